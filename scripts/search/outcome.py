"""The outcome of one search, and the bookkeeping every search method shares to reach it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...data.records import method_label
from .runner import TESTER_LIMITED, TrialRecord, TrialRunner
from .settings import RFC8219, SearchSettings

OK = "ok"
UPPER_NOT_FAILED = "upper-bound-not-failed"
BELOW_LOWER = "below-lower-bound"


@dataclass(frozen=True)
class SearchOutcome:
    """Result of one search.

    method: "rfc8219-binary" or "mlrsearch" ("fast" in stores of the retired fast search).
    status: "ok"; "tester-limited" (no number: the tester could not offer tester_limit_qps and the DUT did
        not fail below it);
        "upper-bound-not-failed" (every trial passed: throughput >= throughput_qps, raise max_rate_qps);
        "below-lower-bound" (no trial passed: throughput below min_rate_qps + error).
    throughput_qps: highest rate that passed a full-length trial, queries/s (None unless ok/upper-not-failed).
    lower_qps, upper_qps: final bracket, queries/s.
    tester_limit_qps: lowest rate of a tester-limited trial, queries/s (also recorded when the DUT failed
        below it and the outcome is ok); mlrsearch: the rate the tester reached in it, not the rate asked.
    trials: every trial of the search, in order.
    elapsed_s: time on the search's clock from its first rest to its last trial's end, s (for replayed
        trials: their recorded wall time and rest).
    rfc8219_exact: True only for the RFC 8219 binary search.
    goals: mlrsearch only: per RFC 9971 goal, its conditional throughput and relevant bounds
        (mlrsearch.goal_result); () for the other methods.
    """

    search_id: str
    method: str
    status: str
    throughput_qps: float | None
    lower_qps: float
    upper_qps: float
    tester_limit_qps: float | None
    trials: tuple[TrialRecord, ...]
    elapsed_s: float
    rfc8219_exact: bool
    goals: tuple[dict[str, Any], ...] = ()

    @property
    def trial_time_s(self) -> float:
        """Sum of trial durations and rests before them, s (simulated wall time)."""
        return sum(t.result.duration_s + t.rest_before_s for t in self.trials)

    def describe(self) -> str:
        exact = method_label(self.rfc8219_exact, self.method)
        if self.status == TESTER_LIMITED:
            reasons = "; ".join(self.trials[-1].result.reasons) if self.trials else ""
            return (f"tester limit reached at {self.tester_limit_qps:.0f} queries/s ({exact})"
                    + (f": {reasons}" if reasons else ""))
        if self.status == BELOW_LOWER:
            return (f"below the lower bound: nothing passed, throughput < {self.upper_qps:.0f} queries/s "
                    f"({exact})")
        sign = ">= " if self.status == UPPER_NOT_FAILED else ""
        return (f"{sign}{self.throughput_qps:.0f} queries/s "
                f"(bracket {self.lower_qps:.0f}-{self.upper_qps:.0f}, "
                f"{len(self.trials)} trials, {exact})")

    @classmethod
    def from_dict(cls, data: dict[str, Any], trials: tuple[TrialRecord, ...]) -> SearchOutcome:
        """A stored outcome (to_dict's keys) with its stored trials."""
        return cls(data["search_id"], data["method"], data["status"], data["throughput_qps"],
                   data["lower_qps"], data["upper_qps"], data["tester_limit_qps"], trials, data["elapsed_s"],
                   data["rfc8219_exact"], tuple(data.get("goals", ())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "search_id": self.search_id, "method": self.method, "status": self.status,
            "throughput_qps": self.throughput_qps, "lower_qps": self.lower_qps, "upper_qps": self.upper_qps,
            "tester_limit_qps": self.tester_limit_qps, "trials": len(self.trials),
            "elapsed_s": self.elapsed_s, "trial_time_s": self.trial_time_s,
            "rfc8219_exact": self.rfc8219_exact,
            **({"goals": list(self.goals)} if self.goals else {}),
        }

    def with_goals(self, goals: tuple[dict[str, Any], ...]) -> SearchOutcome:
        return replace(self, goals=goals)


class Search:
    """Shared bookkeeping of one search: step counter, trial list, tester-limit stop."""

    def __init__(self, runner: TrialRunner, settings: SearchSettings, search_id: str, method: str) -> None:
        self.runner = runner
        self.settings = settings
        self.search_id = search_id
        self.method = method
        self.trials: list[TrialRecord] = []
        self.started = runner.clock.now()

    def trial(self, phase: str, duration_s: float, rate_qps: float, lower: float,
              upper: float) -> TrialRecord:
        for _ in range(1 + self.settings.tester_retries):
            record = self.runner.run(self.search_id, len(self.trials), phase, duration_s,
                                     float(round(rate_qps)), (lower, upper), self.settings.loss_ratio,
                                     self.settings.rest_after(duration_s))
            self.trials.append(record)
            if record.verdict != TESTER_LIMITED:
                break
        return record

    def outcome(self, status: str, lower: float, upper: float, throughput: float | None = None,
                tester_limit: float | None = None) -> SearchOutcome:
        elapsed = self.runner.clock.now() - self.started
        elapsed += sum(t.wall_s + t.rest_before_s for t in self.trials if t.replayed)
        return SearchOutcome(self.search_id, self.method, status, throughput, lower, upper, tester_limit,
                             tuple(self.trials), elapsed, self.method == RFC8219)


def with_id(outcome: SearchOutcome, search_id: str) -> SearchOutcome:
    return replace(outcome, search_id=search_id)
