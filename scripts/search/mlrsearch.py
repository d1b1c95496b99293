"""RFC 9971 Multiple Loss Ratio Search (`mlrsearch`) through FD.io CSIT's own library, PyPI `MLRsearch`.

The library (pinned in pyproject.toml, never copied) chooses every trial; this module only adapts it to the
suite: `SuiteMeasurer` turns the library's `measure(intended_duration, intended_load)` into a trial of the
suite's `TrialRunner` (so every trial is rested, stored and, on resume, replayed from the store in the same
order: the library's choices depend only on the results it is handed), and `mlrsearch_search` turns the
library's per-goal results into a `SearchOutcome` whose `goals` hold each goal's conditional throughput.

Trial -> `MLRsearch.MeasurementResult`: offered count = queries sent (xlatperf's sent count, which is the
schedule unless the tester fell behind; a fake DUT's schedule), forwarding count = valid answers within the
tester's timeout; intended count left equal to the offered count, so the library's trial loss ratio is
exactly the suite's (lost / sent).

A tester-limited trial (the suite's verdict, so not one whose loss the tester's shortfall cannot explain: that
loss is the DUT's and is handed on) is never handed to the library: any result would read as DUT loss (the
library counts unsent queries as loss). It is run again (`tester_retries`, as in the other searches); if it
stays tester-limited the library's search is abandoned and started afresh with a lower max load: the rate the
tester really achieved (or the asked rate), less the widest goal width. Trials of the abandoned attempt stay
in the store (they were measured) but are not handed to the new attempt. When the new search's max load is a
lower bound for the first goal (nothing failed below the tester's limit) the outcome is "tester-limited", as
for the other methods; when something failed below it the conditional throughput stands and the limit is
recorded. After MAX_RESTARTS such restarts, or when the max load would fall to the min load, the outcome is
"tester-limited". The tester limit recorded is the lowest rate the tester reached in a tester-limited trial
(`reached_rate_qps`: the rate it really sent), never the rate the library asked for.

Short trials never have the last word: when the first goal ends "below the lower bound" although no trial
of its final trial duration failed (short trials of its preceding targets failed everywhere, e.g. because
the DUT loses a fixed few queries at the start of every trial, which is more than the loss ratio of a short
trial but not of a full-length one), the search is started afresh with every goal's trials at its final
trial duration (`full_length_goals`); its result is the outcome. A "< 1 queries/s" figure therefore always
rests on failed full-length trials.

The outcome's throughput_qps is the first goal's conditional throughput (RFC 9971: the relevant lower bound
times one minus the pessimistic loss ratio of its trials); lower_qps / upper_qps are that goal's relevant
lower and upper bounds (intended loads). Every goal's figures are in `goals` and in the search record.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from MLRsearch import AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch, SearchGoal

from ..trial import TrialResult
from .goals import ResolvedGoal
from .outcome import BELOW_LOWER, OK, UPPER_NOT_FAILED, Search, SearchOutcome
from .runner import TESTER_LIMITED, TrialRecord, TrialRunner
from .settings import MLRSEARCH, SearchSettings

PHASE = "mlrsearch"
# The library needs a positive min load; with min_rate_qps = 0 it starts here, queries/s.
MIN_LOAD_QPS = 1.0
# Restarts with a lower max load after a tester-limited trial before the search gives up.
MAX_RESTARTS = 8
# The library ends a search that runs longer than this (its own wall clock, time.monotonic), s: a guard
# only (a week); replayed and simulated trials take no wall time.
SEARCH_TIME_LIMIT_S = 7 * 24 * 3600.0


class TesterLimitHit(Exception):
    """A trial stayed tester-limited after its retries: the library's search cannot go on at this max load."""

    def __init__(self, record: TrialRecord) -> None:
        super().__init__(f"tester-limited at {record.result.rate_qps:.0f} queries/s")
        self.record = record


def measurement_result(result: TrialResult, judged: str, intended_duration: float,
                       intended_load: float) -> MeasurementResult:
    """The library's view of one trial (see the module docstring), judged by the suite's verdict (runner.
    verdict); never for a tester-limited one. A trial the tester flagged whose loss is the DUT's (verdict
    "fail") is handed on: its loss is what the DUT lost."""
    if judged == TESTER_LIMITED:
        raise ValueError("a tester-limited trial says nothing of the DUT; it is never handed to MLRsearch")
    return MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                             offered_count=result.sent, forwarding_count=result.valid,
                             offered_duration=result.duration_s)


def reached_rate_qps(result: TrialResult) -> float:
    """The rate a tester-limited trial's tester really reached, queries/s: its achieved rate when it fell
    short of the rate asked (the asked rate says nothing of the tester), else the asked rate."""
    achieved = result.achieved_rate_qps
    return achieved if 0 < achieved < result.rate_qps else result.rate_qps


class SuiteMeasurer(AbstractMeasurer):
    """The library's measurer, answered by the suite's trials (measured, or replayed from the store).

    search: the Search whose trials these are; bounds: (min load, max load) of this attempt, queries/s,
    recorded as each trial's bracket (the library keeps no single bracket)."""

    def __init__(self, search: Search, bounds: tuple[float, float]) -> None:
        self.search, self.bounds = search, bounds

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        record = self.search.trial(PHASE, intended_duration, intended_load, *self.bounds)
        if record.verdict == TESTER_LIMITED:
            raise TesterLimitHit(record)
        return measurement_result(record.result, record.verdict, intended_duration, intended_load)


def library_goal(goal: ResolvedGoal) -> SearchGoal:
    """The library's SearchGoal of a goal; fail_fast off: a min load that fails is "below the lower bound",
    not an exception."""
    return SearchGoal(loss_ratio=goal.loss_ratio, exceed_ratio=goal.exceed_ratio,
                      relative_width=goal.relative_width,
                      initial_trial_duration=goal.initial_trial_duration_s,
                      final_trial_duration=goal.final_trial_duration_s, duration_sum=goal.duration_sum_s,
                      preceding_targets=goal.preceding_targets,
                      expansion_coefficient=goal.expansion_coefficient, fail_fast=False)


def library_config(goals: tuple[ResolvedGoal, ...], min_load: float, max_load: float) -> Config:
    """Config of one attempt: the goals, loads in queries/s, no warmup trial (RFC 8219 has none)."""
    config = Config()
    config.goals = [library_goal(g) for g in goals]
    config.min_load = min_load  # before max_load: each setter checks against the other's current value
    config.max_load = max_load
    config.search_duration_max = SEARCH_TIME_LIMIT_S
    config.warmup_duration = None
    return config


def _quiet(_: str) -> None:
    """The library's debug lines are not wanted: every trial is in the store."""


def goal_result(goal: ResolvedGoal, result: Any, max_load: float) -> dict[str, Any]:
    """One goal's figures as stored: the goal, its conditional throughput and relevant bounds (queries/s,
    None where the library found none) and the status they mean."""
    lower, upper = result.relevant_lower_bound, result.relevant_upper_bound
    throughput = result.conditional_throughput
    if lower is None:
        status = BELOW_LOWER
    elif upper is None:
        status = UPPER_NOT_FAILED
    else:
        status = OK
    return {"name": goal.name, "goal": asdict(goal), "status": status,
            "conditional_throughput_qps": None if throughput is None else float(throughput),
            "relevant_lower_bound_qps": None if lower is None else float(lower),
            "relevant_upper_bound_qps": None if upper is None else float(upper), "max_load_qps": max_load}


def full_length_failed(trials: list[TrialRecord], goal: ResolvedGoal) -> bool:
    """Whether any of these trials of the goal's final trial duration failed (the only trials that may make
    a load "below the lower bound" of a figure at that duration)."""
    return any(t.verdict == "fail" and t.result.duration_s >= goal.final_trial_duration_s for t in trials)


def full_length_goals(goals: tuple[ResolvedGoal, ...]) -> tuple[ResolvedGoal, ...]:
    """The goals with every trial at their final trial duration (no shorter trials for their preceding
    targets): a short trial can then never veto a load that a full-length trial would pass."""
    return tuple(replace(g, initial_trial_duration_s=g.final_trial_duration_s,
                         preceding_targets=0 if g.duration_sum_s == g.final_trial_duration_s
                         else max(1, g.preceding_targets)) for g in goals)


def mlrsearch_search(runner: TrialRunner, settings: SearchSettings, search_id: str) -> SearchOutcome:
    """One RFC 9971 search of all the settings' goals at once (module docstring)."""
    s = Search(runner, settings, search_id, MLRSEARCH)
    goals = settings.mlr_goals()
    widest = max(g.relative_width for g in goals)
    min_load = max(settings.min_rate_qps, MIN_LOAD_QPS)
    max_load = settings.max_rate_qps
    tester_limit: float | None = None
    first = 0  # this attempt's first trial
    for _ in range(MAX_RESTARTS + 2):  # + 1: the restart with full-length trials only
        if max_load <= min_load:
            break
        try:
            results = MultipleLossRatioSearch(library_config(goals, min_load, max_load)).search(
                SuiteMeasurer(s, (min_load, max_load)), debug=_quiet)
        except TesterLimitHit as hit:
            reached = reached_rate_qps(hit.record.result)
            tester_limit = reached if tester_limit is None else min(tester_limit, reached)
            max_load = float(math.floor(min(reached, max_load) * (1 - widest)))
            first = len(s.trials)
            continue
        figures = [goal_result(g, results[library_goal(g)], max_load) for g in goals]
        if figures[0]["status"] == BELOW_LOWER and not full_length_failed(s.trials[first:], goals[0]) \
                and goals != full_length_goals(goals):
            goals, first = full_length_goals(goals), len(s.trials)
            continue
        return _outcome(s, figures, min_load, max_load, tester_limit)
    limit = tester_limit if tester_limit is not None else max_load
    return s.outcome(TESTER_LIMITED, min_load, limit, tester_limit=limit)


def _outcome(s: Search, figures: list[dict[str, Any]], min_load: float, max_load: float,
             tester_limit: float | None) -> SearchOutcome:
    """The outcome: the first goal's figures as the search's, every goal's in `goals`."""
    first = figures[0]
    lower = first["relevant_lower_bound_qps"]
    upper = first["relevant_upper_bound_qps"]
    status = first["status"]
    if status == UPPER_NOT_FAILED and tester_limit is not None:
        outcome = s.outcome(TESTER_LIMITED, lower, max_load, tester_limit=tester_limit)
    elif status == BELOW_LOWER:
        outcome = s.outcome(BELOW_LOWER, min_load, upper if upper is not None else min_load,
                            tester_limit=tester_limit)
    else:
        outcome = s.outcome(status, lower, upper if upper is not None else max_load,
                            throughput=first["conditional_throughput_qps"], tester_limit=tester_limit)
    return outcome.with_goals(tuple(figures))
