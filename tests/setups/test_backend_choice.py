"""The backend choice is parsed once, where its text enters (the command line, a campaign file's chain
options, a chain's state file; an inventory makes its hosts' instances when it is loaded), and carried as
backend instances per role; the Backend interface is split by concern and each part holds the part it uses;
what analysis reads of a backend (its execution model, the device its queue drops show on) is declared by the
backend and read through the keys its package defines."""

from __future__ import annotations

import ast
import json
import typing
from collections import Counter
from pathlib import Path

import pytest

from xlatbench.setups.backends import (
    EXECUTION_MODEL_KEY,
    QUEUE_DEVICE_KEY,
    Backend,
    Counters,
    Declared,
    Deployment,
    Named,
    RenderContext,
    Renderer,
    Runtime,
    declared,
    recorded_execution_model,
    recorded_queue_device,
    registry,
)
from xlatbench.setups.emulation import EmulationConfig
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import ROLES, BackendChoice
from xlatbench.setups.testbed.inventory import parse_inventory

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("setups", "scripts", "analysis", "results", "zones", "xlatbench")
# The functions where backend text enters and is parsed, one call each: the command line (`--backend` and the
# variant flags), a campaign file's emulated-chain options, a chain's state file. Before: 11 calls on the way
# from the command line to the steps, and an inventory spelled its hosts' backends back into text to parse it.
EDGES = {"backends_of", "emulation_config", "from_state"}
# The modules outside setups/backends/ that hold whole backends (`Backend`): the choice that carries them, the
# inventory whose hosts each get one. Every other part holds the narrow part it uses.
WHOLE_BACKEND_HOLDERS = {"setups/plan.py", "setups/testbed/inventory.py"}


def _modules() -> list[Path]:
    return [p for d in PACKAGE_DIRS for p in sorted((ROOT / d).rglob("*.py"))]


def _parse_calls(tree: ast.AST) -> list[str]:
    """The name of the function around each `BackendChoice.parse(...)` call in `tree` ("" at module level)."""
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "BackendChoice"):
            found.append(function)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return found


def test_backend_text_is_parsed_once_at_each_edge() -> None:
    calls: list[tuple[str, str]] = []
    for path in _modules():
        calls += [(str(path.relative_to(ROOT)), f) for f in _parse_calls(ast.parse(path.read_text()))]
    assert Counter(f for _, f in calls) == Counter(EDGES), f"BackendChoice.parse outside the edges: {calls}"


def test_a_choice_and_a_chain_take_only_backend_instances() -> None:
    with pytest.raises(TypeError, match="not a backend instance: parse text where it enters"):
        BackendChoice(dict.fromkeys(ROLES, registry.names()[0]))
    with pytest.raises(ValueError, match="a backend for each of clat, plat, ce, br"):
        BackendChoice({"clat": registry.make(registry.names()[0])})
    with pytest.raises(TypeError, match="not a BackendChoice"):
        EmulationConfig("464xlat", backends=registry.EMULATION_DEFAULT)  # type: ignore[arg-type]
    choice = BackendChoice.parse(registry.EMULATION_DEFAULT)
    instances = {id(b) for b in choice.by_role.values()}
    assert len(instances) == len({b.name for b in choice.by_role.values()}), "one instance per backend"
    default = registry.make(registry.EMULATION_DEFAULT)
    assert all(b.name == registry.EMULATION_DEFAULT
               for role, b in choice.by_role.items() if role in default.roles)
    assert all(b.name == registry.default_for(role) for role, b in choice.by_role.items())


@pytest.mark.parametrize("name", registry.names())
def test_the_choice_spells_itself_back_and_a_state_file_round_trips(name: str) -> None:
    other = next(n for n in registry.names() if n != name)
    mixed = BackendChoice.parse(f"clat={name},plat={other}", default=name)
    rest = ",".join(f"{role}={name if role in registry.make(name).roles else registry.default_for(role)}"
                    for role in ROLES[2:])
    assert mixed.spec() == f"clat={name},plat={other},{rest}"
    assert BackendChoice.parse(mixed.spec()).spec() == mixed.spec()
    assert BackendChoice.parse(name).spec() == name
    variants = {n: o.choices[-1] for n, o in registry.variant_options().items()}
    config = EmulationConfig("464xlat", backends=BackendChoice.parse(mixed.spec(), variants), knot_cpus=(1,),
                             nat64_prefix="2001:db8:64::/96")
    back = EmulationConfig.from_state(json.loads(json.dumps(config.state())))
    assert back.backends.spec() == mixed.spec() and back.backends.variants() == config.backends.variants()
    assert back.knot_cpus == (1,) and back.nat64_prefix == config.nat64_prefix
    assert {"backend", "variants"} <= set(config.state()) and "backends" not in config.state()


def _inventory(dut1: str, dut2: str, **top: str) -> dict[str, object]:
    hosts = {"client": {"ssh": "c", "interfaces": {"client-dut1": "e0"}},
             "dut1": {"ssh": "d1", "backend": dut1, "interfaces": {"client-dut1": "e1", "dut1-dut2": "e2"}},
             "dut2": {"ssh": "d2", "backend": dut2, "interfaces": {"dut1-dut2": "e3", "dut2-server": "e4"}},
             "server": {"ssh": "s", "interfaces": {"dut2-server": "e5"}}}
    return {"name": "lab", "topology": "464xlat", "hosts": hosts, **top}


def test_an_inventory_carries_its_hosts_backend_instances_with_their_variants() -> None:
    for name, option in registry.variant_options().items():
        other = next(n for n in registry.names() if n != name)
        inv = parse_inventory(_inventory(other, name, **{option.flag: option.choices[-1]}))
        assert inv.hosts["dut2"].backend.name == name
        assert inv.hosts["dut2"].backend.variant == option.choices[-1]
        choice = inv.backends()
        assert choice.by_role["plat"] is inv.hosts["dut2"].backend is choice.by_role["br"]
        assert choice.by_role["clat"] is inv.hosts["dut1"].backend is choice.by_role["ce"]
        assert not hasattr(inv, "backend_spec"), "no text between the inventory and its choice"


def _own_members(protocol: type) -> set[str]:
    names = {n for n in vars(protocol) if not n.startswith("_")}
    return names | set(vars(protocol).get("__annotations__", {}))


def test_the_backend_interface_is_split_by_concern_and_each_part_is_narrow() -> None:
    parts = {"rendering": Renderer, "runtime": Runtime, "deployment": Deployment, "counters": Counters,
             "declared": Declared, "named": Named}
    members = {what: _own_members(p) for what, p in parts.items()}
    for a in parts:
        for b in parts:
            if a < b:
                assert not members[a] & members[b], f"{a} and {b} share {members[a] & members[b]}"
    assert not _own_members(Backend), "Backend only joins the parts"
    assert "render" in members["rendering"] and "processes" in members["runtime"]
    assert {"preflight_facts", "undo", "with_binary"} <= members["deployment"]
    assert {"counters_script", "parse_counters", "run_time"} <= members["counters"]
    assert {"execution_model", "queue_device"} == members["declared"]
    everything = set().union(*members.values())
    for backend in registry.every():
        assert all(hasattr(backend, m) for m in everything), backend.name
    views = {"renderer": Renderer, "runtime": Runtime, "deployment": Deployment, "counters": Counters}
    for method, protocol in views.items():
        hints = typing.get_type_hints(getattr(BackendChoice, method))
        assert hints["return"] is protocol, f"BackendChoice.{method} gives the whole backend"


def test_only_the_choice_and_the_inventory_hold_whole_backends() -> None:
    holders = set()
    for path in _modules():
        rel = str(path.relative_to(ROOT))
        if rel.startswith("setups/backends/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("backends") \
                    and any(alias.name == "Backend" for alias in node.names):
                holders.add(rel)
    assert holders == WHOLE_BACKEND_HOLDERS


@pytest.mark.parametrize("name", registry.names())
def test_what_analysis_reads_of_a_backend_is_declared(name: str) -> None:
    backend = registry.make(name)
    for chain in ("464xlat", "mapt"):
        for role in topology(chain).translators().values():
            info = backend.describe(role)
            assert declared(backend).items() <= info.items()
            assert recorded_execution_model(info) == backend.execution_model
            assert recorded_queue_device(info) == backend.queue_device
    if backend.queue_device is not None:  # a device of its own, where its queue overflows
        assert backend.queue_device in backend.devices(RenderContext(world="netns", prefix="xq"))


def test_analysis_reads_the_declared_keys_through_their_readers() -> None:
    """No module of analysis/ spells a key of a translator's description that a backend declares."""
    for path in sorted((ROOT / "analysis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant):
                assert node.value not in (EXECUTION_MODEL_KEY, QUEUE_DEVICE_KEY), f"{path.name}:{node.lineno}"
