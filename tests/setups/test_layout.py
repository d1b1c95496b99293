"""setups/ keeps its rooms: the shared core imports neither world, the worlds (emulation/, testbed/) never
import each other, and no module of setups/ takes part in an import circle (lazy imports inside functions
included: a circle there is still a circle)."""

import ast
from pathlib import Path

SETUPS = Path(__file__).resolve().parents[2] / "setups"
WORLDS = ("emulation", "testbed")


def module_name(path: Path) -> str:
    parts = path.relative_to(SETUPS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The setups modules `path` imports at run time (relative imports resolved; `from . import x` names
    module x; imports under `if TYPE_CHECKING:` are for annotations only and left out)."""
    here = module_name(path).split(".") if module_name(path) else []
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # an annotation's import: never run, so no circle
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        if node.level - 1 > len(package):
            continue  # above setups/: the foundation (..procs, ..zones)
        target = base + (node.module.split(".") if node.module else [])
        for alias in node.names:
            candidate = ".".join([*target, alias.name])
            if (SETUPS / Path(*candidate.split("."))).with_suffix(".py").exists():
                found.add(candidate)
            elif target:
                found.add(".".join(target))
    return {name for name in found if name}


def graph() -> dict[str, set[str]]:
    return {module_name(path) or "__init__": imports_of(path) for path in SETUPS.rglob("*.py")}


def world_of(module: str) -> str | None:
    head = module.split(".")[0]
    return head if head in WORLDS else None


def test_the_core_imports_no_world_and_the_worlds_not_each_other() -> None:
    edges = graph()
    assert "emulation.chain" in edges and "testbed.chain" in edges, sorted(edges)
    wrong = []
    for module, targets in edges.items():
        for target in targets:
            mine, theirs = world_of(module), world_of(target)
            if theirs is not None and mine != theirs and module != "__init__":
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong


def test_no_import_circle_in_setups() -> None:
    edges = graph()
    for module in edges:
        edges[module] = {t for t in edges[module] if t in edges and t != module}
    seen: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for target in sorted(edges[module]):
            if seen.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in seen:
                visit(target, [*path, target])
        seen[module] = 2

    for module in sorted(edges):
        if module not in seen:
            visit(module, [module])
    # a package's __init__ re-exporting its own modules is no circle: its modules import their siblings
    real = [c for c in cycles if not any(m.endswith("__init__") or "." not in m and m in WORLDS for m in c)]
    assert not real, real
