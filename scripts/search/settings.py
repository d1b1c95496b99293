"""How a throughput search runs: its bounds, error width, loss criterion, trial lengths and rests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...data.records import search_error_qps
from ..trial import DEFAULT_LOSS_RATIO
from .goals import Goal, ResolvedGoal, default_width, goals_from_tables, resolved_goals

RFC8219 = "rfc8219-binary"
MLRSEARCH = "mlrsearch"
METHODS = (RFC8219, MLRSEARCH)
# Methods the suite no longer runs: name -> (the method to write instead, why). Their stored records still
# read (tables label them); a campaign file or command naming one is refused with this reason.
FAST = "fast"
RETIRED = {
    FAST: (MLRSEARCH, "the fast search was retired on 2026-11-25 in favour of MLRsearch (RFC 9971): on "
                      "the simulated comparison of docs/benchmarks.md it ran away on a DUT whose overload "
                      "answers below capacity (47 x the RFC 8219 search's time) and its median left the RFC "
                      "search's range at 2 % noise"),
}


def check_method(method: object, where: str = "method") -> str:
    """The method, if the suite can run it; else ValueError in one line (a retired one says why and what to
    write instead). where: how the message names the setting."""
    if isinstance(method, str) and method in RETIRED:
        replacement, why = RETIRED[method]
        raise ValueError(f"{where} {method!r}: {why}; write {replacement!r} instead")
    if method not in METHODS:
        raise ValueError(f"{where}: unknown method {method!r}; use {list(METHODS)}")
    return str(method)


@dataclass(frozen=True)
class SearchSettings:
    """How a throughput search runs (defaults: the paper's section 3).

    min_rate_qps: lower bound, queries/s; assumed to pass, measured only when nothing above it passed.
    max_rate_qps: upper bound, queries/s; assumed to fail, never measured by the RFC 8219 search.
    error_qps: the search stops when upper - lower <= error_qps, queries/s (absolute error).
    error_ratio: ... or when upper - lower <= error_ratio x lower, fraction (relative error). With both set
        the search stops at whichever is wider; at least one is required; the width is never below 1 query/s.
    loss_ratio: highest loss that passes, fraction (1e-4 = 0.01 %).
    duration_s: full trial duration, s (paper: 60).
    rest_s: rest after a full trial before the next trial, s (paper: 10).
    repetitions: how many times the whole search runs (paper: 10).
    short_duration_s: MLRsearch only: the default initial trial duration of its goals' preceding targets
        (capped at the final trial duration) and the final trial duration of its default "short"
        goal, s.
    short_rest_s: rest after a trial shorter than duration_s (MLRsearch's shorter trials), s.
    tester_retries: a tester-limited trial is run again (after the rest) up to this many times before the
        search gives up with "tester limit reached": a sender preempted once on a shared machine says nothing
        about the tester's capacity. Every attempt is recorded.
    """

    max_rate_qps: float
    min_rate_qps: float = 0.0
    error_qps: float | None = None
    error_ratio: float | None = None
    loss_ratio: float = DEFAULT_LOSS_RATIO
    duration_s: float = 60.0
    rest_s: float = 10.0
    repetitions: int = 10
    short_duration_s: float = 5.0
    short_rest_s: float = 2.0
    tester_retries: int = 2
    goals: tuple[Goal, ...] | Any = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "goals", goals_from_tables(self.goals))  # a campaign file gives tables
        problems = []
        if not 0 <= self.min_rate_qps < self.max_rate_qps:
            problems.append(f"need 0 <= min_rate_qps < max_rate_qps, got {self.min_rate_qps} and "
                            f"{self.max_rate_qps}")
        if self.error_qps is None and self.error_ratio is None:
            problems.append("set error_qps (absolute) or error_ratio (relative) to say when the search stops")
        if self.error_qps is not None and self.error_qps < 1:
            problems.append(f"error_qps must be at least 1 query/s, got {self.error_qps}")
        if self.error_ratio is not None and not 0 < self.error_ratio < 1:
            problems.append(f"error_ratio must be in (0, 1), got {self.error_ratio}")
        if not 0 <= self.loss_ratio < 1:
            problems.append(f"loss_ratio must be in [0, 1), got {self.loss_ratio}")
        if self.duration_s <= 0 or self.short_duration_s <= 0:
            problems.append("trial durations must be positive")
        if self.rest_s < 0 or self.short_rest_s < 0:
            problems.append("rests must not be negative")
        if self.tester_retries < 0:
            problems.append(f"tester_retries must not be negative, got {self.tester_retries}")
        if self.repetitions < 1:
            problems.append(f"repetitions must be at least 1, got {self.repetitions}")
        if problems:
            raise ValueError("; ".join(problems))
        self.mlr_goals()  # a goal the search's own values make wrong fails now, not at its first trial

    def width_qps(self, lower_qps: float) -> float:
        """Bracket width at which the search stops, queries/s, for a bracket starting at lower_qps."""
        return search_error_qps(self.error_qps, self.error_ratio, lower_qps)

    def done(self, lower_qps: float, upper_qps: float) -> bool:
        return upper_qps - lower_qps <= self.width_qps(lower_qps)

    def rest_after(self, duration_s: float) -> float:
        return self.rest_s if duration_s >= self.duration_s else self.short_rest_s


    def mlr_goals(self) -> tuple[ResolvedGoal, ...]:
        """The RFC 9971 goals of an mlrsearch with every value set (the search's defaults filled in)."""
        width = default_width(self.error_qps, self.error_ratio, self.max_rate_qps)
        return resolved_goals(self.goals, self.loss_ratio, self.duration_s, self.short_duration_s, width)
