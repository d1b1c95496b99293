"""RFC 8219 throughput by binary search, as Lencse & Nagy ran it, split from how a trial is measured.

The search only asks a `TrialRunner` for trials; the runner rests between trials, records every trial
(`on_trial`), and on a resumed campaign hands back trials already in the store instead of measuring again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from xlatbench.scripts.clock import Clock, RealClock
from xlatbench.scripts.trial import DEFAULT_LOSS_RATIO, Measurer, TrialResult

RFC8219 = "rfc8219-binary"
FAST = "fast"
METHODS = (RFC8219, FAST)


@dataclass(frozen=True)
class SearchSettings:
    """How a throughput search runs (defaults: the paper's section 3).

    min_rate_qps: lower bound, queries/s; assumed to pass, never measured.
    max_rate_qps: upper bound, queries/s; assumed to fail, never measured by the RFC 8219 search.
    error_qps: the search stops when upper - lower <= error_qps, queries/s (absolute error).
    error_ratio: ... or when upper - lower <= error_ratio x lower, fraction (relative error). With both set
        the search stops at whichever is wider; at least one is required; the width is never below 1 query/s.
    loss_ratio: highest loss that passes, fraction (1e-4 = 0.01 %).
    duration_s: full trial duration, s (paper: 60).
    rest_s: rest after a full trial before the next trial, s (paper: 10).
    repetitions: how many times the whole search runs (paper: 10).
    short_duration_s: fast search only: duration of its bracketing trials, s.
    short_rest_s: fast search only: rest after a short trial, s.
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

    def __post_init__(self) -> None:
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

    def width_qps(self, lower_qps: float) -> float:
        """Bracket width at which the search stops, queries/s, for a bracket starting at lower_qps."""
        absolute = self.error_qps or 0.0
        relative = (self.error_ratio or 0.0) * lower_qps
        return max(absolute, relative, 1.0)

    def done(self, lower_qps: float, upper_qps: float) -> bool:
        return upper_qps - lower_qps <= self.width_qps(lower_qps)

    def rest_after(self, duration_s: float) -> float:
        return self.rest_s if duration_s >= self.duration_s else self.short_rest_s


PASS, FAIL, TESTER_LIMITED = "pass", "fail", "tester-limited"


@dataclass(frozen=True)
class TrialRecord:
    """One trial as a search saw it.

    search_id: the search (and repetition) it belongs to.
    step: index of the trial within that search, from 0.
    phase: "binary" (RFC 8219 step), "short" (fast search bracketing), "full" (fast search, full length).
    lower_qps, upper_qps: the bracket before this trial, queries/s.
    verdict: "pass", "fail" (DUT loss above loss_ratio) or "tester-limited".
    rest_before_s: rest taken before this trial, s.
    wall_s: time the trial took on the search's clock, s.
    replayed: True when the result came from the store of an interrupted campaign.
    """

    search_id: str
    step: int
    phase: str
    lower_qps: float
    upper_qps: float
    verdict: str
    result: TrialResult
    rest_before_s: float = 0.0
    wall_s: float = 0.0
    replayed: bool = False


class ReplayMismatch(RuntimeError):
    """A stored trial does not match what the search asks now: the store belongs to another campaign."""


@dataclass
class TrialRunner:
    """Runs the trials of searches: rests, records, and replays stored trials on resume.

    measurer: what runs a real trial.
    clock: real or simulated time (rests sleep on it).
    on_trial: called with each new (not replayed) TrialRecord, e.g. to append it to the store.
    replay: stored trials by (search_id, step), handed back instead of measuring (resume).
    before_real_trial: when measurer is None, called once before the first real trial to make one (lets a
        resumed campaign build a chain only when a trial is really missing).
    """

    measurer: Measurer | None
    clock: Clock = field(default_factory=RealClock)
    on_trial: Callable[[TrialRecord], None] | None = None
    replay: Mapping[tuple[str, int], TrialRecord] = field(default_factory=dict)
    before_real_trial: Callable[[], Measurer] | None = None
    _owed_rest_s: float = field(default=0.0, init=False)

    def take_rest(self) -> float:
        """Sleep the rest owed to the previous trial (for runs outside a search, e.g. idle capture)."""
        rest, self._owed_rest_s = self._owed_rest_s, 0.0
        self.clock.sleep(rest)
        return rest

    def owe_rest(self, rest_s: float) -> None:
        self._owed_rest_s = rest_s

    def ensure_measurer(self) -> Measurer:
        if self.measurer is None:
            if self.before_real_trial is None:
                raise RuntimeError("TrialRunner has no measurer")
            self.measurer = self.before_real_trial()
        return self.measurer

    def run(self, search_id: str, step: int, phase: str, duration_s: float, rate_qps: float,
            bracket: tuple[float, float], loss_ratio: float, rest_after_s: float) -> TrialRecord:
        stored_record = self.replay.get((search_id, step))
        if stored_record is not None:
            stored = stored_record.result
            if not (math.isclose(stored.rate_qps, rate_qps, abs_tol=0.5)
                    and math.isclose(stored.duration_s, duration_s, abs_tol=1e-6)):
                raise ReplayMismatch(
                    f"stored trial {search_id} step {step} ran {stored.rate_qps:.0f} queries/s for "
                    f"{stored.duration_s} s but the search now asks {rate_qps:.0f} queries/s for "
                    f"{duration_s} s: "
                    "the store was written by a different campaign; use a new store file")
            self._owed_rest_s = rest_after_s
            return TrialRecord(search_id, step, phase, bracket[0], bracket[1], _verdict(stored, loss_ratio),
                               stored, stored_record.rest_before_s, stored_record.wall_s, replayed=True)
        measurer = self.ensure_measurer()
        rest = self.take_rest()
        started = self.clock.now()
        result = measurer.measure(duration_s, rate_qps)
        record = TrialRecord(search_id, step, phase, bracket[0], bracket[1], _verdict(result, loss_ratio),
                             result, rest_before_s=rest, wall_s=self.clock.now() - started)
        self._owed_rest_s = rest_after_s
        if self.on_trial is not None:
            self.on_trial(record)
        return record


def _verdict(result: TrialResult, loss_ratio: float) -> str:
    if result.tester_limited:
        return TESTER_LIMITED
    return PASS if result.passed(loss_ratio) else FAIL


OK = "ok"
UPPER_NOT_FAILED = "upper-bound-not-failed"
BELOW_LOWER = "below-lower-bound"


@dataclass(frozen=True)
class SearchOutcome:
    """Result of one search.

    method: "rfc8219-binary" or "fast".
    status: "ok"; "tester-limited" (no number: the tester could not offer tester_limit_qps and the DUT did
        not fail below it);
        "upper-bound-not-failed" (every trial passed: throughput >= throughput_qps, raise max_rate_qps);
        "below-lower-bound" (no trial passed: throughput below min_rate_qps + error).
    throughput_qps: highest rate that passed a full-length trial, queries/s (None unless ok/upper-not-failed).
    lower_qps, upper_qps: final bracket, queries/s.
    tester_limit_qps: lowest rate of a tester-limited trial, queries/s (also recorded when the DUT failed
        below it and the outcome is ok).
    trials: every trial of the search, in order.
    elapsed_s: time on the search's clock from its first rest to its last trial's end, s (for replayed
        trials: their recorded wall time and rest).
    rfc8219_exact: True only for the RFC 8219 binary search.
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

    @property
    def trial_time_s(self) -> float:
        """Sum of trial durations and rests before them, s (simulated wall time)."""
        return sum(t.result.duration_s + t.rest_before_s for t in self.trials)

    def describe(self) -> str:
        exact = "RFC 8219 binary search" if self.rfc8219_exact else "fast search, not RFC 8219 exact"
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "search_id": self.search_id, "method": self.method, "status": self.status,
            "throughput_qps": self.throughput_qps, "lower_qps": self.lower_qps, "upper_qps": self.upper_qps,
            "tester_limit_qps": self.tester_limit_qps, "trials": len(self.trials),
            "elapsed_s": self.elapsed_s, "trial_time_s": self.trial_time_s,
            "rfc8219_exact": self.rfc8219_exact,
        }


class _Search:
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


def midpoint(lower: float, upper: float) -> float:
    return float(round((lower + upper) / 2))


def rfc8219_search(runner: TrialRunner, settings: SearchSettings, search_id: str) -> SearchOutcome:
    """Binary search of RFC 8219 section 7.3 / the paper: halve [min, max] until upper - lower <= error.

    Every step is a full-length trial; the result is the highest rate that passed.
    """
    s = _Search(runner, settings, search_id, RFC8219)
    lower, upper = settings.min_rate_qps, settings.max_rate_qps
    passed_any = failed_any = False
    tester_limit: float | None = None
    while not settings.done(lower, upper):
        rate = midpoint(lower, upper)
        if rate <= lower or rate >= upper:
            break
        record = s.trial("binary", settings.duration_s, rate, lower, upper)
        if record.verdict == TESTER_LIMITED:
            # Says nothing of the DUT, but nothing at or above this rate can be measured: search below it.
            upper = tester_limit = rate
        elif record.verdict == PASS:
            lower, passed_any = rate, True
        else:
            upper, failed_any = rate, True
    return _final(s, lower, upper, passed_any, failed_any, tester_limit)


def _final(s: _Search, lower: float, upper: float, passed_any: bool, failed_any: bool,
           tester_limit: float | None) -> SearchOutcome:
    """The outcome of a finished bracket. When its upper end is where the tester gave up, the DUT's
    throughput lies at or above the tester's limit: no number, "tester limit reached"."""
    if tester_limit is not None and upper >= tester_limit:
        return s.outcome(TESTER_LIMITED, lower, upper, tester_limit=tester_limit)
    if not passed_any and s.settings.min_rate_qps == lower:
        return s.outcome(BELOW_LOWER, lower, upper, tester_limit=tester_limit)
    status = OK if failed_any else UPPER_NOT_FAILED
    return s.outcome(status, lower, upper, throughput=lower, tester_limit=tester_limit)


def with_id(outcome: SearchOutcome, search_id: str) -> SearchOutcome:
    return replace(outcome, search_id=search_id)
