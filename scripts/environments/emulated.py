"""What a campaign measures: a fake DUT, Knot on loopback, or an emulated chain, behind one interface.

An environment is brought up only when a trial really has to run (a resumed campaign replays stored
trials without it), and always torn down, also on Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import Clock, RealClock
from ..fakes import FakeDut
from ..hostinfo import usable_cpus
from ..measurers import ChainMeasurer, LoopbackMeasurer
from ..nat44 import Cycle, chain_refusal
from ..overhead import Overhead
from ..trial import Measurer, TrialResult
from ..xlatperf import TesterOptions, flows, source_first_port

if TYPE_CHECKING:
    from ...setups.chain import Chain
    from ...setups.placement import DutPlan

KINDS = ("fake", "loopback", "chain", "testbed")  # what a command line's --dut may name
SETUP_KINDS = KINDS  # what a campaign's [[setup]] may be (testbed: scripts/environments/testbed.py)


class Environment:
    """One setup of a campaign. Subclasses fill in up/down/measurer/describe.

    simulated: trials take no real time (no CPU samples in the idle capture). clock: the time the searches
    rest and measure on (a fake DUT in simulated time brings its own).
    """

    simulated = False
    clock: Clock = RealClock()

    def up(self) -> None: ...

    def down(self) -> None: ...

    def max_cores(self) -> int:
        return 1

    def refuse_cores(self, counts: list[int]) -> None:
        """Raise (one line) when one of these core counts (each <= max_cores) cannot be set up; called
        before anything is brought up, so a campaign fails before its first up/down."""

    def dut_cpus(self, count: int) -> list[int]:
        return list(range(count))

    def set_cores(self, count: int) -> dict[str, Any]:
        return {"cores": count}

    def set_tester(self, tester: TesterOptions) -> None:
        """Following trials use these tester options (a point of a sessions sweep)."""

    def measurer(self) -> Measurer:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}

    def tester_version(self) -> str | None:
        return None

    def nat44_port_refusal(self, cycles: list[Cycle]) -> str | None:
        """Once up: why the tester's flows on ephemeral ports do not fit a MAP-T CE's port set with the
        conntrack timeout its NAT44 really has (scripts.nat44), or None."""
        return None

    def probe_trial_overhead(self) -> Overhead | None:
        """What a trial takes beyond its duration here, measured without bringing the setup up (campaign
        plan); None: this environment cannot measure it before running."""
        return Overhead(0.0, "simulated time: trials take only their duration") if self.simulated else None

    def start_host_idle(self) -> None:
        """Start per-host CPU samplers (a real testbed's DUT hosts) before an idle-capture trial."""

    def collect_host_idle(self, result: TrialResult | None) -> dict[str, list[dict[str, Any]]] | None:
        """Stop them: per host its samples during `result`'s trial (None: the trial failed); None where the
        hosts share the campaign's own machine."""
        return None


@dataclass
class FakeEnvironment(Environment):
    """A fake DUT whose capacity grows with cores and falls with the tester's sessions (flows):
    capacity_qps x cores ** scaling / (1 + sessions / half_capacity_sessions).

    capacity_qps: capacity at one core (and few sessions), queries/s. scaling: exponent (1 = linear).
    half_capacity_sessions: sessions at which the capacity is half (None: sessions do not matter).
    noise, buffer_queries, tester_limit_qps, seed: see FakeDut. realtime: trials really take their duration
    (for kill tests); otherwise time is simulated. cores_available: largest core count the fake DUT "has".
    sessions: the tester's flows (set_tester changes it).
    """

    capacity_qps: float
    scaling: float = 1.0
    noise: float = 0.0
    buffer_queries: float = 0.0
    tester_limit_qps: float | None = None
    background_loss: float = 0.0
    seed: int = 1
    realtime: bool = False
    cores_available: int = 16
    clock: Clock = field(default_factory=RealClock)
    half_capacity_sessions: float | None = None
    sessions: int = 4
    _cores: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        self.simulated = not self.realtime
        if self.half_capacity_sessions is not None and self.half_capacity_sessions <= 0:
            raise ValueError(f"half_capacity_sessions must be positive, got {self.half_capacity_sessions}")

    def max_cores(self) -> int:
        return self.cores_available

    def capacity(self) -> float:
        """Capacity at the current cores and sessions, queries/s."""
        cap = self.capacity_qps * self._cores ** self.scaling
        if self.half_capacity_sessions is not None:
            cap /= 1.0 + self.sessions / self.half_capacity_sessions
        return cap

    def set_cores(self, count: int) -> dict[str, Any]:
        self._cores = count
        return {"cores": count, "capacity_qps": self.capacity()}

    def set_tester(self, tester: TesterOptions) -> None:
        self.sessions = flows(tester)

    def measurer(self) -> Measurer:
        return FakeDut(self.capacity(), noise=self.noise,
                       buffer_queries=self.buffer_queries, tester_limit_qps=self.tester_limit_qps,
                       background_loss=self.background_loss,
                       seed=self.seed * 1000 + self._cores, clock=self.clock, sleep=True)

    def describe(self) -> dict[str, Any]:
        return {"implementation": "fake", "version": "n/a", "capacity_qps_1core": self.capacity_qps,
                "scaling": self.scaling, "noise": self.noise, "buffer_queries": self.buffer_queries,
                "tester_limit_qps": self.tester_limit_qps, "background_loss": self.background_loss,
                "half_capacity_sessions": self.half_capacity_sessions,
                "time": "real" if self.realtime else "simulated"}

    def tester_version(self) -> str | None:
        return "fake"


@dataclass
class LoopbackEnvironment(Environment):
    """xlatperf against Knot on 127.0.0.1 (a tester self-test; no DUT, so one "core" only).

    knot_cpus: CPUs knotd is pinned to (NOTES: keep it off the tester's core).
    rmem_bytes: root net.core.rmem_max, rmem_default and wmem_max while it is up, bytes: the same socket
        buffers as an emulated chain gives Knot and the tester, so the self-test is comparable with it
        (knotd's sockets take rmem_default; with 208 KiB it drops replies long before its CPU is full).
    """

    tester: TesterOptions
    knot_cpus: tuple[int, ...] | None = None
    udp_workers: int = 1
    workdir: Path | None = None
    rmem_bytes: int = 4 << 20
    _server: Any = field(default=None, init=False)
    _measurer: LoopbackMeasurer | None = field(default=None, init=False)
    _sysctls: dict[str, object] | None = field(default=None, init=False)

    @property
    def _holder(self) -> str:
        return f"loopback-{os.getpid()}"

    def up(self) -> None:
        from ...setups.emulation import rootsysctl
        from ...zones.knot import KnotConfig, KnotServer, loopback_rundir

        self._sysctls = rootsysctl.acquire(self._holder, rootsysctl.socket_buffers(self.rmem_bytes), netns=[],
                                           pid=os.getpid())
        # A fixed run directory (not a temporary one): a later run or `setup down` finds a killed run's knotd.
        workdir = self.workdir or loopback_rundir("127.0.0.1", self.tester.port)
        config = KnotConfig(listen=(("127.0.0.1", self.tester.port),), udp_workers=self.udp_workers,
                            cpus=self.knot_cpus)
        self._server = KnotServer(workdir, config)
        try:
            self._server.start()
        except BaseException:
            self.down()
            raise
        self._measurer = LoopbackMeasurer(tester=self.tester, knot_description=self._server.describe())

    def down(self) -> None:
        from ...setups.emulation import rootsysctl

        if self._server is not None:
            server, self._server = self._server, None
            server.stop()
            if self.workdir is None:
                shutil.rmtree(server.workdir, ignore_errors=True)
        if self._sysctls is not None:
            rootsysctl.release(self._holder)
            self._sysctls = None

    def set_tester(self, tester: TesterOptions) -> None:
        self.tester = tester
        if self._measurer is not None:
            self._measurer.tester = tester

    def measurer(self) -> Measurer:
        assert self._measurer is not None, "environment not up"
        return self._measurer

    def describe(self) -> dict[str, Any]:
        server = self._server.describe() if self._server is not None else {"implementation": "knot"}
        return {"implementation": "loopback (no DUT)", "server": server, "server_io": "socket",
                "root_sysctls": self._sysctls}

    def tester_version(self) -> str | None:
        return self._measurer.last_tester_version if self._measurer else None


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


def emulation_config(topology: str, **options: Any) -> Any:
    """The setups part's EmulationConfig from campaign options (TOML lists become tuples)."""
    from ...setups.emulation import EmulationConfig

    tuple_fields = {f.name for f in dataclasses.fields(EmulationConfig) if "tuple" in str(f.type)}
    values = {}
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
    from ...setups.cpulist import parse_user_cpu_list

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
        return len(usable_cpus())

    def plan(self, count: int) -> DutPlan:
        """Where the DUTs run at `count` cores: the campaign's cpu_map entry, else the placement rule."""
        from ...setups.cpulist import parse_user_cpu_list
        from ...setups.paper import topology
        from ...setups.placement import duts_of, plan_dut_cpus

        tester = [cpu for text in (self.tester.sender_cpus, self.tester.receiver_cpus) if text
                  for cpu in parse_user_cpu_list(text)]
        knot = [int(cpu) for cpu in self.options.get("knot_cpus") or ()]
        return plan_dut_cpus(usable_cpus(), tester, knot, count, duts_of(topology(self.topology)),
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

    def describe(self) -> dict[str, Any]:
        if self._chain is None:
            return {"topology": self.topology}
        return self._chain.describe()

    def tester_version(self) -> str | None:
        return self._measurer.last_tester_version if self._measurer else None

    def nat44_port_refusal(self, cycles: list[Cycle]) -> str | None:
        return chain_refusal(self._chain, flows(self.tester), source_first_port(self.tester), cycles)
