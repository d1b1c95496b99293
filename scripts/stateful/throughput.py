"""RFC 9693's throughput over N established connections: the RFC 8219 binary search (scripts.search) whose
every trial is a phase-2 trial over the N flows phase 1 made at a safe rate, and only those. A phase-2 trial
the DUT's table grew in is stored as such (the flows were not all established: the trial measured
connection set-up, not throughput over connections) and counted as failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..search import RFC8219, RepeatedSearch, SearchSettings, TrialRunner, repeat_search
from ..trial import TrialResult
from .measurer import PhaseTwo, StatefulMeasurer
from .parameters import StatefulParameterError, check_connections


class PhaseOneFailed(RuntimeError):
    """Phase 1 at the safe rate did not make every connection: phase 2 would not be over N connections."""


@dataclass
class OverConnections:
    """A `Measurer` (measure(duration, rate)) whose trials run phase 2 over `connections` flows that phase 1
    made at `setup_rate_cps` just before. phases: every phase-2 trial run, in order."""

    stateful: StatefulMeasurer
    connections: int
    setup_rate_cps: float
    phases: list[PhaseTwo] = field(default_factory=list)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        two = self.stateful.over_established(self.connections, self.setup_rate_cps, rate_qps, duration_s)
        self.phases.append(two)
        if not two.setup.passed:
            raise PhaseOneFailed(
                f"phase 1 at the safe rate {self.setup_rate_cps:,.0f} connections/s answered "
                f"{two.setup.answered:,} of {self.connections:,} queries: lower setup_rate_cps (or "
                "setup_fraction)")
        answered = 0 if two.table_grew else two.answered  # connections made in phase 2: not a pass
        grew = ("the DUT's connection table grew during phase 2",) if two.table_grew else ()
        reasons = two.reasons + grew
        loss = 1.0 if two.sent == 0 else 1.0 - answered / two.sent
        return TrialResult(rate_qps, duration_s, two.sent, answered, loss, two.tester_limited, reasons,
                           achieved_rate_qps=two.sent / duration_s if duration_s else 0.0, raw=two.raw)


@dataclass(frozen=True)
class ThroughputOverConnections:
    """Throughput over N connections: the repeated RFC 8219 search and the phase-2 trials it ran.

    table_grew: trials in which the DUT's connection count rose during phase 2 (a known answer: 0).
    """

    connections: int
    setup_rate_cps: float
    repeated: RepeatedSearch
    phases: tuple[PhaseTwo, ...]

    @property
    def table_grew(self) -> int:
        return sum(p.table_grew for p in self.phases)


def throughput_over_connections(stateful: StatefulMeasurer, connections: int, setup_rate_cps: float,
                                settings: SearchSettings, runner: TrialRunner | None = None,
                                prefix: str = "stateful") -> ThroughputOverConnections:
    """`settings.repetitions` RFC 8219 searches whose trials are phase 2 over `connections` flows.
    runner: the trial runner to use (its measurer is replaced; default: a fresh one on the real clock)."""
    check_connections("connections", connections, stateful.max_connections())
    if setup_rate_cps <= 0:
        raise StatefulParameterError(f"the setup rate must be > 0 connections/s, got {setup_rate_cps}")
    over = OverConnections(stateful, connections, setup_rate_cps)
    runner = runner or TrialRunner(None)
    runner.measurer = over
    repeated = repeat_search(runner, settings, RFC8219, prefix)
    return ThroughputOverConnections(connections, setup_rate_cps, repeated, tuple(over.phases))
