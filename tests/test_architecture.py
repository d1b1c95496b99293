"""The house rules of the Python parts, checked on the source: which part may import which, and where the
tester's command line is written.

Parts, lowest first: the foundation (`xlatbench/` except its front door), `zones/`, `setups/`, `data/`
(the data shape), `analysis/`, `scripts/` (the driver), and the front door (`xlatbench/cli.py`,
`xlatbench/demo.py`). A part imports only parts below it, so there is no cycle between parts: `setups/`
never imports `scripts/` or `analysis/`, and `analysis/` never imports `scripts/`. Every xlatperf option is
written by one module (`ARGV_MODULE`); the option names are read from the tester's own source, so an option
added there is covered without editing this test. docs/ARCHITECTURE.md draws the same order.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lowest first: a part may import only the parts before it.
LAYERS = ("foundation", "zones", "setups", "data", "analysis", "scripts", "front")
PACKAGES = {"xlatbench": "xlatbench", "zones": "xlatbench.zones", "setups": "xlatbench.setups",
            "data": "xlatbench.data", "analysis": "xlatbench.analysis", "scripts": "xlatbench.scripts"}
FRONT = {"cli", "demo"}
ARGV_MODULE = ROOT / "scripts" / "xlatperf.py"
TESTER_OPTIONS = ROOT / "dnsperf" / "src" / "options.cpp"


def _module(path: Path) -> tuple[str, str]:
    """(module name, package its relative imports start from) of a source file."""
    directory, *rest = path.relative_to(ROOT).with_suffix("").parts
    name = ".".join([PACKAGES[directory], *rest])
    if rest and rest[-1] == "__init__":
        name = name.rsplit(".", 1)[0]
        return name, name
    return name, name.rsplit(".", 1)[0]


def _part(module: str) -> str:
    words = module.split(".")
    if len(words) < 2:
        return "front"
    if words[1] in PACKAGES and words[1] != "xlatbench":
        return words[1]
    return "front" if words[1] in FRONT else "foundation"


def _sources() -> list[Path]:
    return sorted(p for directory in PACKAGES for p in (ROOT / directory).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every xlatbench module a file imports, relative imports resolved."""
    name, package = _module(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else (node.module or "")
            if base == "xlatbench":
                found.update(f"xlatbench.{alias.name}" for alias in node.names)
            else:
                found.add(base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if module == "xlatbench" or module.startswith("xlatbench.")}


def _part_edges() -> dict[tuple[str, str], set[str]]:
    """(importing part, imported part) -> the files that import across that edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in _sources():
        source = _part(_module(path)[0])
        for module in _imports(path):
            target = _part(module)
            if target != source:
                edges[(source, target)].add(str(path.relative_to(ROOT)))
    return edges


def test_parts_import_only_downward() -> None:
    upward = {edge: sorted(files) for edge, files in _part_edges().items()
              if LAYERS.index(edge[1]) > LAYERS.index(edge[0])}
    assert not upward, f"imports against the order {' < '.join(LAYERS)}: {upward}"


def test_setups_and_analysis_never_import_the_driver() -> None:
    edges = _part_edges()
    for source, target in (("setups", "scripts"), ("setups", "analysis"), ("analysis", "scripts")):
        files = sorted(edges.get((source, target), ()))
        assert not files, f"{source}/ imports {target}/: {files}"


def test_no_cycle_between_parts() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in _part_edges():
        graph[source].add(target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or reaches(nxt, goal, seen | {nxt}) for nxt in graph[start] - seen)

    cycles = sorted(part for part in list(graph) if reaches(part, part, set()))
    assert not cycles, f"parts on a cycle: {cycles}"


def _tester_flags() -> set[str]:
    """xlatperf's long options, from its CLI11 definitions."""
    text = TESTER_OPTIONS.read_text()
    flags = {f"--{name}" for name in re.findall(r'add_(?:option|flag)\("(?:-\w,)?--([\w-]+)"', text)}
    assert len(flags) > 20, "the tester's options were not found in its source"
    return flags


def _argparse_names(tree: ast.AST) -> set[int]:
    """ids of string constants that name an argparse option (a CLI of the suite's own, not the tester's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "add_argument":
            found.update(id(arg) for arg in node.args if isinstance(arg, ast.Constant))
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_the_tester_command_line_is_written_in_one_module() -> None:
    flags = _tester_flags()
    written: dict[str, set[str]] = defaultdict(set)
    for path in _sources():
        if path == ARGV_MODULE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        skip = _argparse_names(tree) | _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                    and node.value.split("=")[0] in flags:
                written[str(path.relative_to(ROOT))].add(node.value.split("=")[0])
    assert not written, f"xlatperf options written outside {ARGV_MODULE.relative_to(ROOT)}: {dict(written)}"


def test_the_rules_see_what_they_check() -> None:
    """The scan finds the known edges, so an empty finding above means something."""
    edges = _part_edges()
    assert edges.get(("scripts", "data")) and edges.get(("analysis", "data"))
    assert ARGV_MODULE.exists()
