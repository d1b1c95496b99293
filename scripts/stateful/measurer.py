"""What the RFC 9693 searches see of a stateful DUT: one abstract measurer and one dataclass per outcome.

RFC 9693 measures a stateful gateway in two phases. Phase 1 sends exactly one query from each of N distinct
flows (source address x source port, the AF_XDP tester's flows, in RFC 4814 pseudorandom order): every query
that is answered made one connection in the DUT's table. Phase 2 then sends over the flows phase 1 made, and
only those, so that the table does not grow while the classic RFC 8219 procedures run. The searches
(connection establishment rate, throughput over N connections, tear-down rate, table capacity) live beside
this module and see a DUT only through `StatefulMeasurer`, as the throughput searches see one only through
`measure(duration, rate)`; an environment (simulated, emulated namespaces, a real testbed) implements it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TableSettings:
    """The DUT's connection tracking settings for one point of a sweep, applied before phase 1 and recorded.

    max_connections: table size (nf_conntrack_max, or the NAT's own limit), entries; None: left as found.
    hash_size: hash table buckets (nf_conntrack_buckets / hashsize), count; None: left as found.
    timeout_s: the connection (UDP) timeouts set for the run so that nothing expires between the phases, s.
    """

    max_connections: int | None = None
    hash_size: int | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class PhaseOne:
    """One phase-1 trial: `connections` distinct flows, one query each, at `rate_qps`, from an empty table.

    sent / answered: queries, count (answered = valid replies within the tester's timeout).
    table_before / table_after: the DUT's connection count right before and after, entries; None when the
        DUT cannot be read (then the search relies on `answered`).
    tester_limited: the tester could not offer the rate (never DUT loss); reasons say why.
    """

    connections: int
    rate_qps: float
    sent: int
    answered: int
    table_before: int | None
    table_after: int | None
    tester_limited: bool = False
    reasons: tuple[str, ...] = ()
    raw: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """RFC 9693 §4.1: a phase-1 step passes when every query was answered, and (where the DUT's count is
        read) the table holds a connection for each: a full table that evicts old entries to admit new ones
        (Linux conntrack's early drop) answers every query but keeps fewer than N."""
        return not self.tester_limited and self.sent == self.connections and self.answered == self.sent \
            and not self.table_short

    @property
    def table_short(self) -> bool:
        """The DUT's table grew by fewer connections than phase 1 made (False when it cannot be read)."""
        return self.table_before is not None and self.table_after is not None and \
            self.table_after - self.table_before < self.connections


@dataclass(frozen=True)
class PhaseTwo:
    """One phase-2 trial over the `connections` flows phase 1 made (at `setup_rate_qps`, a safe rate).

    setup: the phase-1 trial that made them.
    sent / answered / duration_s / rate_qps: the phase-2 trial itself.
    table_before / table_after: the DUT's connection count around phase 2, entries (must not grow).
    """

    connections: int
    setup: PhaseOne
    rate_qps: float
    duration_s: float
    sent: int
    answered: int
    table_before: int | None
    table_after: int | None
    tester_limited: bool = False
    reasons: tuple[str, ...] = ()
    raw: dict[str, Any] | None = None

    @property
    def loss_ratio(self) -> float:
        return 1.0 if self.sent == 0 else 1.0 - self.answered / self.sent

    @property
    def table_grew(self) -> bool:
        return self.table_before is not None and self.table_after is not None and \
            self.table_after > self.table_before


@dataclass(frozen=True)
class TearDown:
    """One tear-down measurement (RFC 9693 §4.4): N connections loaded, the whole table deleted and timed.

    loaded: the DUT's connection count before the deletion, entries; removed: how many the deletion removed.
    delete_s: time to delete the loaded table, s; empty_delete_s: time to delete an empty table, s (the
        deletion's own overhead, subtracted).
    """

    connections: int
    setup: PhaseOne
    loaded: int
    removed: int
    delete_s: float
    empty_delete_s: float

    @property
    def rate_per_s(self) -> float | None:
        """Connections torn down per second, N / (T - T_empty); None when the difference is not positive."""
        spent = self.delete_s - self.empty_delete_s
        return None if spent <= 0 else self.removed / spent


@dataclass(frozen=True)
class StatefulConditions:
    """What produced the numbers: recorded with every stateful result."""

    implementation: str                 # the stateful role's backend, e.g. its name in setups/backends
    role: str                           # e.g. "nat44", "plat", "ce-napt"
    table: TableSettings = field(default_factory=TableSettings)
    extra: dict[str, Any] = field(default_factory=dict)


class StatefulMeasurer(ABC):
    """A stateful DUT as the RFC 9693 searches see it."""

    @abstractmethod
    def apply(self, table: TableSettings) -> None:
        """Set the table size, hash size and timeouts for the next measurements (undone at teardown)."""

    @abstractmethod
    def max_connections(self) -> int:
        """The most distinct flows this tester and DUT addressing allow (N above it is refused)."""

    @abstractmethod
    def establish(self, connections: int, rate_qps: float) -> PhaseOne:
        """Empty the DUT's table, then run phase 1: `connections` flows, one query each, at `rate_qps`."""

    @abstractmethod
    def over_established(self, connections: int, setup_rate_qps: float, rate_qps: float,
                         duration_s: float) -> PhaseTwo:
        """Phase 1 at `setup_rate_qps`, then a phase-2 trial over exactly those flows."""

    @abstractmethod
    def tear_down(self, connections: int, setup_rate_qps: float) -> TearDown:
        """Phase 1 at `setup_rate_qps`, then delete the whole table and time it (and an empty one)."""

    @abstractmethod
    def conditions(self) -> StatefulConditions:
        """The implementation, role and table settings in force."""
