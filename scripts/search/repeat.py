"""A search repeated R times and summarized (median/min/max, percentiles and dispersion from 20 runs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...data.records import method_label
from ..stats import Summary, summarize
from .mlrsearch import mlrsearch_search
from .outcome import OK, UPPER_NOT_FAILED, SearchOutcome
from .rfc8219 import rfc8219_search
from .runner import TESTER_LIMITED, TrialRunner
from .settings import MLRSEARCH, RFC8219, SearchSettings, check_method

# The remaining repetitions are not run once this many, from the first, all ended at the tester limit.
TESTER_STOP = 2


@dataclass(frozen=True)
class RepeatedSearch:
    """R repetitions of one search method.

    outcomes: one per repetition run (fewer than R when the first TESTER_STOP all reached the tester limit).
    summary: of the throughputs of the outcomes with a number, queries/s (None when none has one): a
        tester-limited repetition does not void the others, the median is over those with a number (the
        report marks a median over fewer than R).
    status: "ok", "tester-limited" (no repetition gave a number), "upper-bound-not-failed" (a lower bound
        only) or "below-lower-bound".
    """

    method: str
    outcomes: tuple[SearchOutcome, ...]
    summary: Summary | None
    status: str

    @property
    def rfc8219_exact(self) -> bool:
        return self.method == RFC8219

    @property
    def tester_limit_qps(self) -> float | None:
        limits = [o.tester_limit_qps for o in self.outcomes if o.tester_limit_qps is not None]
        return min(limits) if limits else None

    @property
    def tester_limited_repetitions(self) -> int:
        return sum(o.status == TESTER_LIMITED for o in self.outcomes)

    @property
    def elapsed_s(self) -> float:
        return sum(o.elapsed_s for o in self.outcomes)

    @property
    def trials(self) -> int:
        return sum(len(o.trials) for o in self.outcomes)

    def describe(self, unit: str = "queries/s") -> str:
        label = method_label(self.rfc8219_exact, self.method)
        if self.status == TESTER_LIMITED:
            last = self.outcomes[-1].trials[-1].result.reasons if self.outcomes[-1].trials else ()
            why = f" ({'; '.join(last)})" if last else ""
            return f"{label}: tester limit reached at {self.tester_limit_qps:.0f} {unit}{why}, no throughput"
        if self.summary is None:
            return f"{label}: {self.status}, no throughput"
        s = self.summary
        text = (f"{label}: median {s.median:.0f} {unit}, min {s.minimum:.0f}, max {s.maximum:.0f} "
                f"over {s.n} searches")
        if s.dispersion is not None:
            text += f", p1 {s.p1:.0f}, p99 {s.p99:.0f}, dispersion {100 * s.dispersion:.2f} %"
        if self.status == UPPER_NOT_FAILED:
            text += " (some searches never failed: a lower bound, raise max_rate_qps)"
        limited = self.tester_limited_repetitions
        if limited:
            text += (f" ({limited} of {len(self.outcomes)} searches reached the tester limit at "
                     f"{self.tester_limit_qps:.0f} {unit} without a number: the median is over the others)")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "status": self.status, "rfc8219_exact": self.rfc8219_exact,
                "summary": None if self.summary is None else self.summary.to_dict(),
                "tester_limit_qps": self.tester_limit_qps, "throughputs_qps":
                [o.throughput_qps for o in self.outcomes], "trials": self.trials, "elapsed_s": self.elapsed_s}


def search_id(prefix: str, method: str, repetition: int) -> str:
    return f"{prefix}/{method}/rep{repetition}"


def repeat_search(runner: TrialRunner, settings: SearchSettings, method: str, id_prefix: str,
                  on_outcome: Callable[[SearchOutcome], None] | None = None,
                  completed: Mapping[str, SearchOutcome] | None = None) -> RepeatedSearch:
    """Run `settings.repetitions` searches. A repetition that reached the tester limit does not stop the
    others (a tester preempted on a shared machine says nothing of the next search); only when the first
    TESTER_STOP repetitions all ended at the tester limit without a number do the rest stay unrun.

    Every repetition is independent of the others (each method searches afresh).
    completed: outcomes of repetitions an earlier run finished (a resumed campaign), by search id: taken as
    they are, so a store resumes even when a search's algorithm changed since those trials were measured.
    """
    check_method(method, "search method")
    outcomes: list[SearchOutcome] = []
    for repetition in range(1, settings.repetitions + 1):
        sid = search_id(id_prefix, method, repetition)
        if completed is not None and sid in completed:
            outcome = completed[sid]  # finished in an earlier run: taken as stored, not searched again
        elif method == RFC8219:
            outcome = rfc8219_search(runner, settings, sid)
        else:
            assert method == MLRSEARCH
            outcome = mlrsearch_search(runner, settings, sid)
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
        if len(outcomes) >= TESTER_STOP and all(o.status == TESTER_LIMITED for o in outcomes):
            break
    return summarize_outcomes(method, outcomes)


def summarize_outcomes(method: str, outcomes: list[SearchOutcome]) -> RepeatedSearch:
    statuses = {o.status for o in outcomes}
    numbers = [o.throughput_qps for o in outcomes if o.throughput_qps is not None]
    if TESTER_LIMITED in statuses and not numbers:
        return RepeatedSearch(method, tuple(outcomes), None, TESTER_LIMITED)
    summary = summarize(numbers) if numbers else None
    if summary is None:
        status = outcomes[0].status if outcomes else OK
    elif UPPER_NOT_FAILED in statuses:
        status = UPPER_NOT_FAILED
    else:
        status = OK
    return RepeatedSearch(method, tuple(outcomes), summary, status)
