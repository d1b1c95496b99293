"""analysis/ reads the store through the shared data shape only: of scripts/ it imports records and store."""

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"
ALLOWED = {("scripts", "records"), ("scripts", "store")}  # absolute or relative (..scripts.records)


def test_analysis_imports_only_the_records_and_the_store_of_scripts() -> None:
    found = set()
    for path in ANALYSIS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    from_scripts = {(name, module) for name, module in found if "scripts" in module.split(".")}
    assert from_scripts, "analysis reads the store through scripts.store"
    assert {tuple(module.split(".")[-2:]) for _, module in from_scripts} <= ALLOWED, from_scripts
