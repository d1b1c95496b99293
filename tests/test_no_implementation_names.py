"""Outside setups/backends/ no module of the package names a translator implementation in code.

Issue 20's rule: a translator is its backend module(s); everything else asks setups.backends.registry and
uses the Backend interface. An AST scan of every module of the package (setups, scripts, analysis, zones,
xlatbench) outside setups/backends/ looks at identifiers (names, attributes, arguments, functions, classes,
imports, keywords) and string constants; docstrings and comments may mention an implementation. The names
are the registry's own, so a backend added there is covered without editing this test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from xlatbench.setups.backends import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("setups", "scripts", "analysis", "zones", "xlatbench")
EXEMPT = ROOT / "setups" / "backends"


def _words(text: str) -> set[str]:
    """The words of an identifier or a string: split at non-letters and at lower-to-upper case changes."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return {w.lower() for w in re.split(r"[^A-Za-z]+", spaced) if w}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _tokens(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every identifier and non-docstring string constant in `tree`."""
    skip = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            found.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((line, node.attr))
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            found.append((line, node.arg))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((line, node.name))
        elif isinstance(node, ast.alias):
            found += [(line, node.name), (line, node.asname or "")]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((line, node.module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found.append((line, node.value))
    return found


def offences(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT) if ROOT in path.parents else path
    return [f"{where}:{line}: {text!r}" for line, text in _tokens(tree) if _words(text) & names]


def modules() -> list[Path]:
    found = []
    for top in PACKAGE_DIRS:
        found += [p for p in sorted((ROOT / top).rglob("*.py")) if EXEMPT not in p.parents]
    return found


def test_the_scan_sees_identifiers_and_strings_but_not_docstrings(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('"""tayga in a docstring."""\n# jool in a comment\nfrom x import TaygaBackend\n'
                      'def f(bpf_pins):\n    """bpf."""\n'
                      '    return obj.jool_version, "run tayga", f(tun=1)\n')
    found = offences(sample, set(registry.names()))
    assert sorted(f.split(": ", 1)[1] for f in found) == sorted(
        ["'TaygaBackend'", "'bpf_pins'", "'jool_version'", "'run tayga'"]), found


def test_no_module_outside_the_backends_names_an_implementation() -> None:
    names = set(registry.names())
    assert {"tayga", "jool", "bpf"} <= names
    scanned = modules()
    assert len(scanned) > 40 and ROOT / "setups" / "plan.py" in scanned
    found = [o for path in scanned for o in offences(path, names)]
    assert not found, "\n".join(found)
