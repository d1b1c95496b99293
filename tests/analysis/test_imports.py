"""analysis/ reads the store through the suite's data shape (xlatbench.data) and never imports scripts/."""

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"


def test_analysis_reads_records_through_data_and_never_imports_scripts() -> None:
    found = set()
    for path in ANALYSIS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    from_scripts = {(name, module) for name, module in found if "scripts" in module.split(".")}
    from_data = {(name, module) for name, module in found if "data" in module.split(".")}
    assert not from_scripts, from_scripts
    assert from_data, "analysis reads the store through data.store"
