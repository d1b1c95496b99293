"""An emulated chain (`[[setup]] kind = "chain"`): the setups part's chain on this machine (network
namespaces, by default setups.emulation's EmulatedChain; any "module:function" factory yielding a Chain),
measured with xlatperf in its client namespace."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cpulist import parse_user_cpu_list
from ...setups.paper import TOPOLOGIES
from ..hostinfo import affinity_cpus
from ..measurers import ChainMeasurer
from ..nat44 import Cycle, chain_refusal, udp_timeout
from ..stateful.emulated import EmulatedStatefulMeasurer
from ..stateful.measurer import StatefulMeasurer
from ..trial import Measurer
from ..xlatperf import TesterOptions, flows, source_first_port
from .base import Environment, EnvironmentKind, SetupSpec
from .options import (
    OptionError,
    check_values,
    cpu_map,
    cpus,
    known_topology,
    of_type,
    only,
    stateful_topology_refusal,
)
from .testerfit import check_chain

if TYPE_CHECKING:
    from ...setups.chain import Chain
    from ...setups.placement import DutPlan


ChainFactory = Callable[..., Any]


def load_factory(spec: str) -> ChainFactory:
    """"module:function" -> the function (a context manager yielding a Chain)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"chain factory must look like 'package.module:function', got {spec!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot load chain factory {spec!r}: {err}") from None


DEFAULT_CHAIN_FACTORY = "xlatbench.scripts.environments.emulated:emulated_chain"


def emulation_options() -> set[str]:
    """The option names a campaign's emulated chain takes: EmulationConfig's fields, its backends spelled as
    text (`backend`: a name or "clat=NAME,...", `variants`: backend name -> variant)."""
    from ...setups.emulation import EmulationConfig

    names = {f.name for f in dataclasses.fields(EmulationConfig)} - {"topology", "backends"}
    return names | {"backend", "variants"}


def emulation_config(topology: str, **options: Any) -> Any:
    """The setups part's EmulationConfig from campaign options (TOML lists become tuples; the backend text
    parsed here, where it enters, into backend instances)."""
    from ...setups.backends.registry import EMULATION_DEFAULT
    from ...setups.emulation import EmulationConfig
    from ...setups.plan import BackendChoice

    tuple_fields = {f.name for f in dataclasses.fields(EmulationConfig) if "tuple" in str(f.type)}
    values: dict[str, Any] = {}
    if "backend" in options or "variants" in options:
        options = dict(options)
        spec, variants = options.pop("backend", None), options.pop("variants", None)
        values["backends"] = BackendChoice.parse(EMULATION_DEFAULT if spec is None else spec, variants)
    for key, value in options.items():
        if isinstance(value, list):
            value = tuple(value)
        elif key in tuple_fields and isinstance(value, int):
            value = (value,)  # a one-CPU list given as a number
        elif key in tuple_fields and isinstance(value, str):
            value = _cpu_list(key, value)
        values[key] = value
    try:
        return EmulationConfig(topology=topology, **values)
    except TypeError as err:
        raise ValueError(f"chain options {sorted(options)}: {err}") from None


def _cpu_list(key: str, text: str) -> tuple[int, ...]:
    """'0,1' or '[0, 1]' as a tuple of CPU numbers; anything else is the user's error, said plainly."""
    try:
        return parse_user_cpu_list(text)
    except ValueError:
        raise ValueError(f"chain option {key}: expected a list of CPU numbers such as 0,1 or [0], "
                         f"got {text!r}") from None


def emulated_chain(topology: str, **options: Any) -> Any:
    """Bring an emulated chain up (setups' EmulatedChain; it tears down what it made if up fails).

    Returns the chain, a context manager whose exit takes every namespace, cgroup and table down.
    """
    from ...setups.emulation import EmulatedChain

    config = emulation_config(topology, **options)
    clear_killed_run(config.prefix)
    return EmulatedChain.up(config)


def clear_killed_run(prefix: str) -> None:
    """Take down what a killed run of this prefix left (a resumed campaign meets it after `kill -9`),
    unless the process that brought it up is still alive: then the prefix is in use and we refuse."""
    from ...setups.emulation.cleanup import down, leftovers
    from ...setups.emulation.names import statefile

    found = leftovers(prefix)
    if not found:
        return
    try:
        owner = int(json.loads(statefile(prefix).read_text()).get("pid", 0))
    except (OSError, ValueError, TypeError):
        owner = 0
    if owner and owner != os.getpid() and Path(f"/proc/{owner}").exists():
        raise RuntimeError(f"chain prefix {prefix!r} is in use by running process {owner}: pick another "
                           "prefix in the setup's options, or stop that process")
    print(f"removing what a killed run with prefix {prefix!r} left: {', '.join(found[:4])}"
          f"{' ...' if len(found) > 4 else ''}", file=sys.stderr)
    down(prefix)


@dataclass
class ChainEnvironment(Environment):
    """An emulated chain from the setups part, measured with xlatperf in its client namespace.

    topology: "baseline" | "464xlat" | "mapt". options: passed to the factory (backend, prefix...).
    factory: "module:function" returning a context manager that yields a Chain.
    cpu_map: core count -> DUT CPUs (both DUTs); default: setups.placement.plan_dut_cpus (off the tester's
    and Knot's CPUs, each DUT its own, where the machine has enough).
    """

    topology: str
    tester: TesterOptions
    options: dict[str, Any] = field(default_factory=dict)
    factory: str = DEFAULT_CHAIN_FACTORY
    cpu_map: dict[int, list[int]] = field(default_factory=dict)
    _context: Any = field(default=None, init=False)
    _chain: Chain | None = field(default=None, init=False)
    _measurer: ChainMeasurer | None = field(default=None, init=False)

    def up(self) -> None:
        self._context = load_factory(self.factory)(topology=self.topology, **self.factory_options())
        self._chain = self._context.__enter__()
        self._measurer = ChainMeasurer(self._chain, self.tester)

    def factory_options(self) -> dict[str, Any]:
        """The options the factory gets: the campaign's, and for the emulated chain the tester's receive CPUs
        as `client_cpus` (the client's interfaces steer the replies' softirq there, off the DUTs' CPUs)
        unless the campaign set them."""
        if self.factory != DEFAULT_CHAIN_FACTORY or "client_cpus" in self.options:
            return dict(self.options)
        cpus = self.tester.receiver_cpus or self.tester.sender_cpus
        return {**self.options, "client_cpus": cpus} if cpus else dict(self.options)

    def down(self) -> None:
        if self._context is not None:
            context, self._context, self._chain = self._context, None, None
            context.__exit__(None, None, None)

    def max_cores(self) -> int:
        """Every count up to the usable CPUs can be placed (plan_dut_cpus falls back to sharing them with
        the tester and Knot, and says so, when it cannot keep them apart)."""
        return len(affinity_cpus())

    def plan(self, count: int) -> DutPlan:
        """Where the DUTs run at `count` cores: the campaign's cpu_map entry, else the placement rule."""
        from ...setups.paper import topology
        from ...setups.placement import duts_of, plan_dut_cpus

        tester = [cpu for text in (self.tester.sender_cpus, self.tester.receiver_cpus) if text
                  for cpu in parse_user_cpu_list(text)]
        knot = [int(cpu) for cpu in self.options.get("knot_cpus") or ()]
        return plan_dut_cpus(affinity_cpus(), tester, knot, count, duts_of(topology(self.topology)),
                             fixed=self.cpu_map.get(count))

    def dut_cpus(self, count: int) -> list[int]:
        return self.plan(count).cpus

    def set_cores(self, count: int) -> dict[str, Any]:
        assert self._chain is not None, "environment not up"
        plan = self.plan(count)
        per_dut = {dut: list(cpus) for dut, cpus in plan.per_dut.items()}
        return {**plan.record(), "applied": self._chain.set_dut_cpus(plan.cpus, per_dut)}

    def set_tester(self, tester: TesterOptions) -> None:
        """A new measurer with these options (it checks them against the chain's max_flows)."""
        self.tester = tester
        if self._chain is not None:
            self._measurer = ChainMeasurer(self._chain, tester)

    def measurer(self) -> Measurer:
        assert self._measurer is not None, "environment not up"
        return self._measurer

    def stateful_measurer(self) -> StatefulMeasurer:
        """RFC 9693's phases against the chain's stateful NAT44 (the `nat44` topology), with this setup's
        tester (io = "xdp"); ValueError, one line, for a chain without one or a socket tester."""
        assert self._chain is not None, "environment not up"
        if not hasattr(self._chain, "stateful_host"):
            raise ValueError(f"the {self.topology} chain ({type(self._chain).__name__}) cannot run RFC "
                             "9693's phases: it has no conntrack controls")
        return EmulatedStatefulMeasurer(self._chain, self.tester)

    def describe(self) -> dict[str, Any]:
        if self._chain is None:
            return {"topology": self.topology}
        return self._chain.describe()

    def tester_version(self) -> str | None:
        return self._measurer.last_tester_version if self._measurer else None

    def nat44_port_refusal(self, cycles: list[Cycle]) -> str | None:
        return chain_refusal(self._chain, flows(self.tester), source_first_port(self.tester), cycles)


class EmulatedKind(EnvironmentKind):
    """`kind = "chain"`: topology (required), options (the factory's; for the default factory
    setups.emulation's EmulationConfig fields, checked now), factory, cpu_map. With the default factory the
    tester runs here, and [server] io reaches the chain as its knot_io option."""

    name = "chain"
    summary = "emulated"
    keys = frozenset({"topology", "options", "factory", "cpu_map"})
    rules = {"topology": known_topology, "factory": of_type(str, "a string 'package.module:function'"),
             "options": of_type(dict, "a table such as { prefix = \"xb1\" }"), "cpu_map": cpu_map}

    def stateful_refusal(self, setup: SetupSpec) -> str | None:
        return stateful_topology_refusal(self.name, setup.params.get("topology"))

    def command_line_table(self, args: argparse.Namespace) -> dict[str, Any]:
        """--topology, --chain-option KEY=VALUE (each value read by option_value) and --chain-factory."""
        options = {}
        for item in args.chain_option:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ValueError(f"--chain-option expects KEY=VALUE, got {item!r}")
            options[key] = option_value(value)
        table = {"name": args.topology, "kind": "chain", "topology": args.topology, "options": options}
        if args.chain_factory:
            table["factory"] = args.chain_factory
        return table

    def check(self, table: dict[str, Any], where: str) -> None:
        if "topology" not in table:
            raise OptionError(f"{where}: a chain setup needs topology ({' | '.join(TOPOLOGIES)})")
        known_topology(f"{where} topology", table["topology"])
        if table.get("factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY:
            check_emulation_options(where, str(table["topology"]), table.get("options", {}))
        check_values(table, where, self.rules)

    def with_server_io(self, setup: SetupSpec, io: str, where: str) -> SetupSpec:
        """[server] io as the chain's `knot_io` option (a setup that sets knot_io itself must agree)."""
        options = dict(setup.params.get("options", {}))
        if options.get("knot_io", io) != io:
            raise OptionError(f"{where}: options knot_io = {options['knot_io']!r} contradicts "
                              f"[server] io = {io!r}: drop one")
        if io == "socket" and "knot_io" not in options:
            return setup  # the default: a factory that knows no knot_io still gets the options it knew
        options["knot_io"] = io
        if _default_factory(setup):
            check_emulation_options(where, str(setup.params["topology"]), options)
        return dataclasses.replace(setup, params={**setup.params, "options": options})

    def check_tester(self, setup: SetupSpec, tester: TesterOptions, most: int, cycles: list[Cycle],
                     where: str) -> None:
        """The default factory's chain topology checked now; another factory's chain says its max_flows and
        its AF_XDP binding when it is up (ChainMeasurer checks them)."""
        if _default_factory(setup):
            config = emulation_config(str(setup.params["topology"]), **setup.params.get("options", {}))
            check_chain(config.chain_topology(), setup.name, where, tester, most, cycles, udp_timeout)

    def tester_is_local(self, setup: SetupSpec) -> bool:
        return _default_factory(setup)

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        p = setup.params
        dut_cpus = {int(k): [int(c) for c in v] for k, v in p.get("cpu_map", {}).items()}
        return ChainEnvironment(str(p["topology"]), tester, options=dict(p.get("options", {})),
                                factory=str(p.get("factory", DEFAULT_CHAIN_FACTORY)), cpu_map=dut_cpus)


def option_value(text: str) -> Any:
    """KEY=VALUE from the command line: a TOML value as in a campaign file ([0, 1], 2, true, "x"), or
    else numbers, true/false and comma lists as TOML would give them, or the bare text."""
    with contextlib.suppress(tomllib.TOMLDecodeError):
        return tomllib.loads(f"value = {text}")["value"]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "," in text:
        return [option_value(part) for part in text.split(",")]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _default_factory(setup: SetupSpec) -> bool:
    return setup.params.get("factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY


def check_emulation_options(where: str, topology: str, options: Any) -> None:
    """Catch a typo in a chain's options now rather than hours into a campaign."""
    if not isinstance(options, dict):
        raise OptionError(f"{where}: options must be a table")
    from ...setups.emulation.names import check_prefix

    only(options, f"{where} options", emulation_options())
    try:
        config = emulation_config(topology, **options)
        check_prefix(config.prefix)
    except (TypeError, ValueError) as err:
        raise OptionError(f"{where} options: {err}") from None
    for key in ("knot_cpus", "dut_cpus"):
        if getattr(config, key) is not None:
            cpus(f"{where} options {key}", list(getattr(config, key)))


KIND = EmulatedKind()
