"""A simulated stateful NAT of known answers, for the RFC 9693 searches' tests and for anyone to reproduce
them without a DUT: a connection table of `table_size` entries, new connections capped at `max_cps` per
second (scaled by cores ** scaling), phase-2 queries over existing connections carried up to `throughput_qps`,
the table deleted at `teardown_per_s` plus a fixed cost per hash bucket, and `noise` on each trial's rates.

The model, per phase-1 trial of N flows at rate r over N / r seconds: the DUT admits at most max_cps x N / r
new connections (a token bucket refilled at max_cps), and at most the table's free entries; every admitted
query is answered, the others are dropped. Phase 2 sends rate x duration queries over the flows phase 1
made, round robin; the DUT answers at most throughput_qps x duration of them and never makes a connection
(the table does not grow). Time is simulated (`clock`), so a search over millions of connections takes no
real time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..clock import Clock, SimClock
from .measurer import PhaseOne, PhaseTwo, StatefulConditions, StatefulMeasurer, TableSettings, TearDown

FLOW_LIMIT = 1 << 32  # a fake tester's distinct flows: 65 536 source addresses x 65 536 source ports


@dataclass
class FakeStatefulDut(StatefulMeasurer):
    """table_size: entries the table holds (TableSettings.max_connections overrides it), count.
    max_cps: new connections per second at one core, connections/s. cores, scaling: the rates scale by
    cores ** scaling. throughput_qps: phase-2 queries/s carried at one core. teardown_per_s: connections
    deleted per second. empty_delete_s_per_bucket: the empty table's deletion time per hash bucket, s.
    hash_size: buckets (TableSettings.hash_size overrides it). noise: standard deviation of each trial's
    rates, fraction. tester_cps: the tester's own new-flow limit, connections/s (None: unlimited; above it
    a trial is tester-limited). max_flows: distinct flows the tester and the addresses allow.
    """

    table_size: int
    max_cps: float
    throughput_qps: float = 1e6
    teardown_per_s: float = 350_000.0
    empty_delete_s_per_bucket: float = 1e-7
    hash_size: int = 1 << 16
    cores: int = 1
    scaling: float = 1.0
    noise: float = 0.0
    tester_cps: float | None = None
    max_flows: int = FLOW_LIMIT
    timeout_s: float | None = None
    seed: int = 1
    implementation: str = "fake-stateful"
    clock: Clock = field(default_factory=SimClock)
    entries: int = field(default=0, init=False)
    made: int = field(default=0, init=False)   # connections every phase 1 made, count (tests)
    _random: random.Random = field(init=False, repr=False)
    _table: TableSettings = field(default_factory=TableSettings, init=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    # -- the interface -------------------------------------------------------------------------------
    def apply(self, table: TableSettings) -> None:
        self._table = table
        if table.max_connections is not None:
            self.table_size = table.max_connections
        if table.hash_size is not None:
            self.hash_size = table.hash_size
        if table.timeout_s is not None:
            self.timeout_s = table.timeout_s

    def max_connections(self) -> int:
        return self.max_flows

    def establish(self, connections: int, rate_qps: float) -> PhaseOne:
        self._flush()
        return self._phase_one(connections, rate_qps)

    def over_established(self, connections: int, setup_rate_qps: float, rate_qps: float,
                         duration_s: float) -> PhaseTwo:
        self._flush()
        setup = self._phase_one(connections, setup_rate_qps)
        before = self.entries
        sent = int(round(rate_qps * duration_s))
        carried = self._noisy(self.throughput_qps * self.cores ** self.scaling) * duration_s
        limited = self.tester_cps is not None and rate_qps > self.tester_cps
        # Queries of flows phase 1 did not establish make connections now (where the table and the cap let
        # them): the table grows, as a real one would.
        free = max(0, self.table_size - self.entries)
        cap = int(self._noisy(self.max_cps * self.cores ** self.scaling) * duration_s)
        self.entries += min(max(0, connections - self.entries), free, cap)
        answered = int(min(sent, carried) * self.entries / connections)
        self.clock.sleep(duration_s)
        reasons = ("the fake tester's rate limit",) if limited else ()
        return PhaseTwo(connections, setup, rate_qps, duration_s, sent, answered, before, self.entries,
                        limited, reasons)

    def tear_down(self, connections: int, setup_rate_qps: float) -> TearDown:
        self._flush()
        setup = self._phase_one(connections, setup_rate_qps)
        loaded = self.entries
        empty = self.hash_size * self.empty_delete_s_per_bucket
        full = empty + self._noisy(1.0) * loaded / self.teardown_per_s
        self.entries = 0
        self.clock.sleep(full + empty)
        return TearDown(connections, setup, loaded, loaded, full, empty)

    def conditions(self) -> StatefulConditions:
        return StatefulConditions(self.implementation, "nat44", self._table,
                                  {"table_size": self.table_size, "hash_size": self.hash_size,
                                   "max_cps_1core": self.max_cps, "cores": self.cores,
                                   "scaling": self.scaling, "noise": self.noise})

    # -- the model ------------------------------------------------------------------------------------
    def _flush(self) -> None:
        self.entries = 0

    def _noisy(self, value: float) -> float:
        return value * max(0.0, 1.0 + self._random.gauss(0.0, self.noise)) if self.noise else value

    def _phase_one(self, connections: int, rate: float) -> PhaseOne:
        if connections > self.max_flows:
            raise ValueError(f"{connections} flows asked, the fake tester has {self.max_flows}")
        duration = connections / rate
        limited = self.tester_cps is not None and rate > self.tester_cps
        admitted = min(connections, int(self._noisy(self.max_cps * self.cores ** self.scaling) * duration))
        made = min(admitted, max(0, self.table_size - self.entries))
        before = self.entries
        self.entries += made
        self.made += made
        self.clock.sleep(duration)
        reasons = ("the fake tester's new-flow limit",) if limited else ()
        return PhaseOne(connections, rate, connections, made, before, self.entries, limited, reasons)
