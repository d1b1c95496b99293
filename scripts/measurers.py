"""Measurers that run a real tester and turn its run into a TrialResult: xlatperf against Knot on loopback,
xlatperf through a chain (emulated in namespaces or a real testbed over SSH: the Chain protocol hides which),
and DNS-OARC's dnsperf as a peer tool on loopback. The searches see only their `measure(duration, rate)`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cpuload import read_jiffies, steal_between
from ..failures import ComponentFailure
from ..procs import dead_processes
from ..setups.chain import TesterPlace, xdp_queue_problem
from .dnsperf import DnsperfOptions, dnsperf_argv, run_dnsperf, short_of_schedule
from .trial import TrialResult, result_from_xlatperf
from .xlatperf import TesterOptions, find_tester, flows, run_trial, source_first_port

if TYPE_CHECKING:
    from ..setups.chain import Chain


def check_components(dead: list[str], rate_qps: float, duration_s: float) -> None:
    """Raise ComponentFailure when a process the trial needed (`dead`: "name (pid N)" of each one taken
    before the trial and gone after it) died: its loss then says nothing about the DUT or the tester, so it
    must be neither a figure nor DUT loss."""
    if dead:
        raise ComponentFailure(f"{', '.join(dead)} died during the trial at {rate_qps:.0f} queries/s for "
                               f"{duration_s:g} s: the trial is void, not stored as a result or as DUT loss")


def counter_deltas(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict:
    """Per hop, per counter: after - before (counters present in both snapshots)."""
    deltas: dict[str, dict[str, int]] = {}
    for hop, values in after.items():
        old = before.get(hop, {})
        deltas[hop] = {name: int(value) - int(old[name]) for name, value in values.items()
                       if name in old and isinstance(value, int | float)}
    return deltas


def cpu_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per DUT: CPU-seconds its translator processes used between the two snapshots."""
    return {dut: round(float(after[dut]) - float(before.get(dut, 0.0)), 6) for dut in after}


def tester_version(doc: dict[str, Any] | None) -> str | None:
    return None if doc is None else doc.get("header", {}).get("version")


def check_client_queues(chain: Chain, tester: TesterOptions) -> None:
    """Before an AF_XDP tester measures: a ValueError, in one line, when the client's interface has more
    receive queues than the tester binds (one per thread pair), so that part of the replies would never
    reach it; a chain that cannot read its queue count is not held back (xlatperf counts such replies)."""
    read = getattr(chain, "client_receive_queues", None)
    if read is None:
        return
    interface, queues = read()
    problem = xdp_queue_problem(interface, queues, tester.threads)
    if problem:
        raise ValueError(problem)


@dataclass
class ChainMeasurer:
    """xlatperf in the client host of an emulated chain, with the DUTs' CPU time and hop counters per trial.

    chain: the emulated chain (already up).
    tester: xlatperf options; the chain says where the tester sends from (its `tester_place`: the AF_XDP
        flows' interface and addresses, a MAP-T CE's address and ports).
    binary: xlatperf path (default: the build's, see xlatbench.paths).
    """

    chain: Chain
    tester: TesterOptions = field(default_factory=TesterOptions)
    binary: Path | None = None
    last_tester_version: str | None = field(default=None, init=False)
    place: TesterPlace = field(default_factory=TesterPlace, init=False)

    def __post_init__(self) -> None:
        if not hasattr(self.chain, "max_flows"):
            raise ValueError(f"the chain {type(self.chain).__name__} lacks max_flows (the Chain protocol of "
                             "xlatbench.setups.chain): its factory must set it, None when it has no limit")
        max_flows = self.chain.max_flows
        count = flows(self.tester)
        if max_flows is not None and count > max_flows:
            raise ValueError(f"the tester would use {count} source ports (threads x ports_per_thread) "
                             f"but the {self.chain.topology} chain carries only {max_flows} flows "
                             "(a MAP-T port set, or a PLAT's one public address): lower threads or "
                             "ports_per_thread")
        place = getattr(self.chain, "tester_place", None)
        if place is not None:
            self.place = place(self.tester.io, count, source_first_port(self.tester))
        elif self.tester.io != "socket":
            raise ValueError(f"the {self.chain.topology} chain ({type(self.chain).__name__}) cannot "
                             f"place the tester's flows for io = {self.tester.io!r} (it has no "
                             "tester_place): use io = 'socket'")
        if self.tester.io != "socket":
            check_client_queues(self.chain, self.tester)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        binary = self.binary or find_tester()
        cpu_before, counters_before = self.chain.dut_cpu_times(), self.chain.counters()
        components = self.chain.component_pids()
        ticks = read_jiffies()
        doc = run_trial(self.chain.client_argv([]), binary, self.chain.server_address, rate_qps, duration_s,
                        self.tester, self.place)
        steal = steal_between(ticks, read_jiffies())
        check_components(self.chain.gone(components), rate_qps, duration_s)
        entries = getattr(self.chain, "conntrack_entries", None)  # optional: the emulated chain's
        conntrack = entries() if entries is not None else None
        cpu_after, counters_after = self.chain.dut_cpu_times(), self.chain.counters()
        self.last_tester_version = tester_version(doc)
        result = result_from_xlatperf(doc, rate_qps, duration_s)
        dut: dict[str, Any] = {"cpu_s": cpu_deltas(cpu_before, cpu_after),
                               "counters": counter_deltas(counters_before, counters_after)}
        if conntrack is not None:
            dut["conntrack_entries"] = conntrack
        return replace(result, dut_stats=dut, host_steal_pct=steal)

    def describe(self) -> dict[str, Any]:
        return {"measurer": "chain", "chain": self.chain.describe(), "tester_options": _options(self.tester)}


@dataclass
class LoopbackMeasurer:
    """xlatperf against a Knot server on loopback: the tester's self-test (no DUT in between).

    server: address Knot listens on (127.0.0.1); tester.port must be Knot's port.
    knot_description: what KnotServer.describe() said, recorded with the results.
    """

    server: str = "127.0.0.1"
    tester: TesterOptions = field(default_factory=TesterOptions)
    binary: Path | None = None
    knot_description: dict[str, Any] | None = None
    last_tester_version: str | None = field(default=None, init=False)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        binary = self.binary or find_tester()
        knotd = (self.knot_description or {}).get("pid")
        ticks = read_jiffies()
        doc = run_trial([], binary, self.server, rate_qps, duration_s, self.tester)
        steal = steal_between(ticks, read_jiffies())
        check_components(dead_processes({"knotd": knotd} if isinstance(knotd, int) else {}), rate_qps,
                         duration_s)
        self.last_tester_version = tester_version(doc)
        return replace(result_from_xlatperf(doc, rate_qps, duration_s), host_steal_pct=steal)

    def describe(self) -> dict[str, Any]:
        return {"measurer": "loopback", "server": self.knot_description,
                "tester_options": _options(self.tester)}


@dataclass
class DnsperfMeasurer:
    """DNS-OARC dnsperf with -Q against a DNS server (no DUT in between): the reference beside xlatperf.

    A trial is tester-limited when dnsperf did not send rate x duration queries (scripts.dnsperf), since
    above its in-flight cap it slows down instead of losing; loss is what it never saw answered in
    options.timeout_s.
    """

    server: str
    options: DnsperfOptions

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        ticks = read_jiffies()
        run = run_dnsperf(dnsperf_argv(self.server, self.options, duration_s, rate_qps), duration_s)
        steal = steal_between(ticks, read_jiffies())
        short = short_of_schedule(run, rate_qps, duration_s)
        return TrialResult(rate_qps=rate_qps, duration_s=duration_s, sent=run.sent, valid=run.completed,
                           loss_ratio=1.0 - run.completed / run.sent if run.sent else 1.0,
                           tester_limited=short is not None, reasons=(short,) if short else (),
                           achieved_rate_qps=run.sent / duration_s, host_steal_pct=steal,
                           tester_shortfall=max(0, round(rate_qps * duration_s) - run.sent))

    def describe(self) -> dict[str, Any]:
        data = asdict(self.options)
        data["data"] = str(self.options.data)
        return {"measurer": "dnsperf", "server": self.server, "dnsperf_options": data}


def _options(options: TesterOptions) -> dict[str, Any]:
    data = asdict(options)
    data["extra_args"] = list(options.extra_args)
    return data
