"""analysis/ reads the store through the suite's data shape (xlatbench.results) and never imports scripts/."""

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"


def test_analysis_reads_records_through_results_and_never_imports_scripts() -> None:
    found = set()
    for path in ANALYSIS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    from_scripts = {(name, module) for name, module in found if "scripts" in module.split(".")}
    from_results = {(name, module) for name, module in found if "results" in module.split(".")}
    assert not from_scripts, from_scripts
    assert from_results, "analysis reads the store through results.store"
