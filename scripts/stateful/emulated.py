"""The stateful DUT in namespaces: RFC 9693's phases against an emulated chain's NAT44 gateway.

Phase 1 is one xlatperf AF_XDP trial of exactly N queries over N flows (source address x port) at the asked
rate, so its duration is N / rate: the tester sends each flow once per round, in RFC 4814 pseudorandom order
keyed by a flow seed this measurer keeps, and every answered query made one connection in the gateway's
conntrack table, which is emptied before (`conntrack -F` in the DUT's namespace) and counted around it (the
namespace's own nf_conntrack_count). Phase 2 runs over the same flows with the same seed. Tear-down times the
deletion of the loaded table and of an empty one. The table's size and hash buckets are the kernel's, set in
the root namespace under the chain's lease (restored at teardown, also after a killed run); the UDP timeouts
are the DUT namespace's own, set long enough that nothing expires between the phases. The tester's command
line is scripts.xlatperf's (through scripts.measurers.ChainMeasurer), never built here.
"""

from __future__ import annotations

import math
import random
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..measurers import ChainMeasurer
from ..trial import TrialResult
from ..xlatperf import (
    MAX_XDP_FLOWS,
    TesterOptions,
    options_for_sessions,
    pseudorandom_flows,
    source_first_port,
)
from .measurer import PhaseOne, PhaseTwo, StatefulConditions, StatefulMeasurer, TableSettings, TearDown
from .memory import budget, memory_refusal

# The UDP timeouts set when the table settings name none, s: an hour outlasts any run on this machine.
DEFAULT_TIMEOUT_S = 3600
# Beyond the phases' own durations a connection must outlast the table reads and flushes around them and
# the tester's start, s.
TIMEOUT_SLACK_S = 30.0


class StatefulChain(Protocol):
    """What this measurer needs of a chain beyond setups.chain.Chain (the emulated chain has it)."""

    def stateful_host(self) -> str: ...
    def stateful_description(self) -> dict[str, object]: ...
    def xdp_flow_capacity(self, first_port: int) -> int: ...
    def set_conntrack_table(self, max_entries: int | None, buckets: int | None) -> dict[str, object]: ...
    def conntrack_table(self) -> dict[str, int]: ...
    def set_udp_timeouts(self, host: str, seconds: int) -> dict[str, int]: ...
    def conntrack_count(self, host: str) -> int: ...
    def conntrack_stats(self, host: str) -> dict[str, int]: ...
    def conntrack_flush(self, host: str) -> float: ...


def run_s(connections: int, setup_rate_qps: float, phase_two_s: float, tester_timeout_s: float) -> float:
    """How long a connection made early in phase 1 must live: phase 1 (N / rate), the tester's wait for the
    last replies, phase 2 and TIMEOUT_SLACK_S, s."""
    return connections / setup_rate_qps + 2 * tester_timeout_s + phase_two_s + TIMEOUT_SLACK_S


def timeout_refusal(timeout_s: float, connections: int, setup_rate_qps: float, phase_two_s: float = 0.0,
                    tester_timeout_s: float = 0.25) -> str | None:
    """Why the DUT's UDP connection timeout `timeout_s` is too short for this run, in one line (None: it
    outlasts it): a connection expiring between the phases would be made again in phase 2."""
    needed = run_s(connections, setup_rate_qps, phase_two_s, tester_timeout_s)
    if timeout_s >= needed:
        return None
    return (f"the DUT's UDP connection timeout {timeout_s:g} s is shorter than the run it must outlast "
            f"({needed:.1f} s: phase 1 of {connections} connections at {setup_rate_qps:g} connections/s, "
            f"phase 2 {phase_two_s:g} s, {TIMEOUT_SLACK_S:g} s of reads): raise timeout_s")


@dataclass
class EmulatedStatefulMeasurer(StatefulMeasurer):
    """RFC 9693's phases against the stateful NAT of an emulated chain: the `nat44` gateway, the PLAT's NAT44
    (`plat`: conntrack in the PLAT's namespace), the MAP-T CE's NAPT44 (`ce`: conntrack in its `napt`
    namespace, at most the CE's port set's flows).

    chain: the emulated chain, up. tester: xlatperf options with io = "xdp" (each phase gets as many flows
    as connections from them: options_for_sessions). flow_seed: the RFC 4814 order's key, the same in every
    phase (0: drawn once here, recorded in conditions()). binary: xlatperf (None: the build's).
    local_memory: the DUT's kernel is this machine's (emulation), so N is checked against its memory
    (scripts.stateful.memory) before a phase; a testbed's DUT is another host.
    """

    chain: Any
    tester: TesterOptions
    flow_seed: int = 0
    binary: Path | None = None
    local_memory: bool = True
    _table: TableSettings = field(default_factory=TableSettings, init=False)
    _applied: dict[str, object] = field(default_factory=dict, init=False)
    _measurers: dict[int, ChainMeasurer] = field(default_factory=dict, init=False)
    _memory: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.tester.io != "xdp":
            raise ValueError("the stateful phases need the tester's AF_XDP flows (io = 'xdp', N flows "
                             f"without sockets), got io = {self.tester.io!r}")
        if shutil.which("conntrack") is None:
            raise ValueError("the conntrack CLI is not installed (it flushes and times the DUT's table): run "
                             "tools/install-deps or apt-get install conntrack")
        self.host = self.chain.stateful_host()  # ValueError: no NAT44 in this chain
        if self.flow_seed == 0:
            self.flow_seed = random.SystemRandom().randrange(1, 1 << 63)
        self.apply(TableSettings())
        # The tester resolves the gateway's address with a datagram to it when the client does not know it
        # yet: a connection of its own in the DUT's table. One query now makes it before any phase counts.
        self._measurer(1).measure(0.01, 100)

    # -- settings -----------------------------------------------------------------------------------
    def apply(self, table: TableSettings) -> None:
        """The table size and hash buckets exactly (root namespace, under the chain's lease; None: left as
        they are) and the DUT namespace's UDP timeouts (None: DEFAULT_TIMEOUT_S)."""
        for name, value in (("max_connections", table.max_connections), ("hash_size", table.hash_size)):
            if value is not None and value < 1:
                raise ValueError(f"table {name} must be at least 1, got {value}")
        if table.timeout_s is not None and table.timeout_s <= 0:
            raise ValueError(f"table timeout_s must be positive, got {table.timeout_s} s")
        seconds = DEFAULT_TIMEOUT_S if table.timeout_s is None else math.ceil(table.timeout_s)
        root = self.chain.set_conntrack_table(table.max_connections, table.hash_size)
        timeouts = self.chain.set_udp_timeouts(self.host, seconds)
        self._table = replace(table, timeout_s=float(min(timeouts.values())))
        self._applied = {"root_sysctls": root, "udp_timeouts_s": timeouts}

    def max_connections(self) -> int:
        return self._flow_limit()[0]

    def _flow_limit(self) -> tuple[int, str]:
        """The most connections a phase may make here and why: the tester's flows or what the chain
        carries (a MAP-T CE's port set)."""
        first_port = source_first_port(self.tester)
        assert first_port is not None  # io = "xdp" always has one
        limit = getattr(self.chain, "stateful_flow_limit", None)  # the emulated chain says why
        most, why = limit(first_port) if limit else (
            self.chain.xdp_flow_capacity(first_port), "the tester's AF_XDP flows over the client's addresses "
                                                      "and ports")
        if most > MAX_XDP_FLOWS:
            return MAX_XDP_FLOWS, "the tester's AF_XDP flows"
        return most, why

    # -- the phases ---------------------------------------------------------------------------------
    def establish(self, connections: int, rate_qps: float) -> PhaseOne:
        self._check(connections, rate_qps, 0.0)
        return self._phase_one(connections, rate_qps)

    def over_established(self, connections: int, setup_rate_qps: float, rate_qps: float,
                         duration_s: float) -> PhaseTwo:
        if rate_qps <= 0 or duration_s <= 0:
            raise ValueError(f"phase 2 needs a positive rate and duration, got {rate_qps} queries/s for "
                             f"{duration_s} s")
        self._check(connections, setup_rate_qps, duration_s)
        setup = self._phase_one(connections, setup_rate_qps)
        before = self.chain.conntrack_count(self.host)
        result = self._measurer(connections).measure(duration_s, rate_qps)
        after = self.chain.conntrack_count(self.host)
        return PhaseTwo(connections=connections, setup=setup, rate_qps=rate_qps, duration_s=duration_s,
                        sent=result.sent, answered=result.valid, table_before=before, table_after=after,
                        tester_limited=result.tester_limited, reasons=tuple(result.reasons),
                        raw=_raw(result))

    def tear_down(self, connections: int, setup_rate_qps: float) -> TearDown:
        self._check(connections, setup_rate_qps, 0.0)
        setup = self._phase_one(connections, setup_rate_qps)
        loaded = self.chain.conntrack_count(self.host)
        delete_s = self.chain.conntrack_flush(self.host)
        left = self.chain.conntrack_count(self.host)
        empty_delete_s = self.chain.conntrack_flush(self.host)
        return TearDown(connections=connections, setup=setup, loaded=loaded, removed=loaded - left,
                        delete_s=delete_s, empty_delete_s=empty_delete_s)

    def conditions(self) -> StatefulConditions:
        description = self.chain.stateful_description()
        table = replace(self._table, **_none_to_read(self._table, self.chain.conntrack_table()))
        return StatefulConditions(
            implementation=str(description.get("implementation", "unknown")),
            role=str(description.get("role", "nat44")), table=table,
            extra={"dut": description, "flow_seed": self.flow_seed, "flow_order": "pseudorandom (RFC 4814)",
                   "table_read": self.chain.conntrack_table(), "memory": self._memory, **self._applied})

    # -- helpers ------------------------------------------------------------------------------------
    def _check(self, connections: int, setup_rate_qps: float, phase_two_s: float) -> None:
        """Refuse, in one line and before anything runs, N out of range (what limits it named), N that the
        kernel's memory cannot hold (the arithmetic printed), a rate that is not positive, and a timeout
        shorter than the run."""
        most, why = self._flow_limit()
        if not 1 <= connections <= most:
            raise ValueError(f"connections must be 1-{most} ({why}), got {connections}")
        if self.local_memory:
            buckets = self._table.hash_size or self.chain.conntrack_table().get("nf_conntrack_buckets", 0)
            found = budget(connections, buckets)
            self._memory = found.line()
            refusal = memory_refusal(found)
            if refusal:
                raise ValueError(refusal)
        if setup_rate_qps <= 0:
            raise ValueError(f"the phase-1 rate must be positive, got {setup_rate_qps} connections/s")
        assert self._table.timeout_s is not None  # apply() always sets it
        refusal = timeout_refusal(self._table.timeout_s, connections, setup_rate_qps, phase_two_s,
                                  self.tester.timeout_s)
        if refusal:
            raise ValueError(refusal)

    def _phase_one(self, connections: int, rate_qps: float) -> PhaseOne:
        """Empty the DUT's table, then exactly `connections` queries over as many flows at `rate_qps`."""
        measurer = self._measurer(connections)
        self.chain.conntrack_flush(self.host)
        before, stats = self.chain.conntrack_count(self.host), self.chain.conntrack_stats(self.host)
        result = measurer.measure(connections / rate_qps, rate_qps)
        after = self.chain.conntrack_count(self.host)
        stats = {name: value - stats.get(name, 0)
                 for name, value in self.chain.conntrack_stats(self.host).items()}
        return PhaseOne(connections=connections, rate_qps=rate_qps, sent=result.sent, answered=result.valid,
                        table_before=before, table_after=after, tester_limited=result.tester_limited,
                        reasons=tuple(result.reasons), raw={**_raw(result), "conntrack_stats": stats})

    def _measurer(self, connections: int) -> ChainMeasurer:
        """A chain measurer whose tester has exactly `connections` flows in the kept pseudorandom order."""
        if connections not in self._measurers:
            tester = options_for_sessions(pseudorandom_flows(self.tester, self.flow_seed), connections)
            self._measurers = {connections: ChainMeasurer(self.chain, tester, self.binary)}
        return self._measurers[connections]


def _none_to_read(table: TableSettings, read: dict[str, int]) -> dict[str, int]:
    """The table size and buckets as read where the settings left them as found."""
    found = {}
    if table.max_connections is None and "nf_conntrack_max" in read:
        found["max_connections"] = read["nf_conntrack_max"]
    if table.hash_size is None and "nf_conntrack_buckets" in read:
        found["hash_size"] = read["nf_conntrack_buckets"]
    return found


def _raw(result: TrialResult) -> dict[str, Any]:
    """What a phase keeps of its trial: the tester's rate and the DUT's side (not the whole JSON)."""
    return {"achieved_rate_qps": result.achieved_rate_qps, "loss_ratio": result.loss_ratio,
            "dut_stats": result.dut_stats, "warnings": list(getattr(result, "warnings", ()) or ()),
            "tester_shortfall": result.tester_shortfall}
