"""The RFC 9693 procedures of a campaign at one (setup, cores) point: for each [[stateful.point]] measured at
that core count, each stateful [[procedure]] (scripts.stateful.procedures) in their order, each repetition:
from the store when its `stateful-result` record is there, else run through a RecordingMeasurer (its calls
stored as `stateful-trial` records, replayed on resume) and stored as a `stateful-result`
(data.records.StatefulResult)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from ...data.records import (
    Record,
    StatefulResult,
    StatefulTrial,
    stateful_result_key,
    stateful_scope,
    stateful_trial_key,
)
from ..search import OK, UPPER_NOT_FAILED, SearchSettings, TrialRunner
from .capacity import table_capacity
from .establishment import establishment_rate
from .measurer import StatefulMeasurer
from .procedures import CAPACITY, CONNECTION_RATE, TEARDOWN, THROUGHPUT, Point, StatefulPlan, StatefulSpec
from .replay import Call, RecordingMeasurer
from .teardown import teardown_rate
from .throughput import throughput_over_connections

if TYPE_CHECKING:
    from ..campaign import Recorder, SetupSession

UNITS = {CONNECTION_RATE: "connections/s", THROUGHPUT: "queries/s", TEARDOWN: "connections/s",
         CAPACITY: "entries"}


class StatefulUnavailable(RuntimeError):
    """A setup whose environment has no stateful DUT was asked for RFC 9693 procedures."""


def stored_calls(records: list[Record]) -> dict[str, list[Call]]:
    """Per repetition scope, its stored calls in order (only a gap-free run from call 0 replays)."""
    found: dict[str, dict[int, Call]] = {}
    for r in records:
        if isinstance(r, StatefulTrial):
            scope = r.key.removeprefix("stateful:").rsplit("/call", 1)[0]
            found.setdefault(scope, {})[r.call] = Call(r.method, r.args, r.result, r.raw, r.conditions,
                                                       r.rest_before_s, r.wall_s)
    out: dict[str, list[Call]] = {}
    for scope, calls in found.items():
        ordered: list[Call] = []
        while len(ordered) in calls:
            ordered.append(calls[len(ordered)])
        out[scope] = ordered
    return out


class StatefulRun:
    """The stateful procedures at one (setup, cores). stored: every record of the store by key; calls: the
    stored calls by scope (stored_calls)."""

    def __init__(self, recorder: Recorder, session: SetupSession, plan: StatefulPlan,
                 searches: dict[str, SearchSettings], stored: dict[str, Record],
                 calls: dict[str, list[Call]]) -> None:
        self.recorder, self.session, self.plan, self.searches = recorder, session, plan, searches
        self.stored, self.calls = stored, calls
        self.results: list[StatefulResult] = []

    def run(self) -> list[StatefulResult]:
        for point in self.plan.points_at(self.session.cores):
            for spec in self.plan.procedures:
                if point.runs(spec):
                    self._procedure(point, spec)
        return self.results

    def _procedure(self, point: Point, spec: StatefulSpec) -> None:
        setup, cores = self.session.spec.name, self.session.cores
        done: list[StatefulResult] = []
        repetitions = point.repetitions_of(spec)
        for rep in range(1, repetitions + 1):
            setup_rate = self._setup_rate(point, spec)
            if spec.kind in (THROUGHPUT, TEARDOWN) and setup_rate is None:
                self.recorder.progress.say(f"{setup}, {cores} core(s), {point.name}: no {spec.kind} "
                                           "procedure, the connection-rate procedure gave no median to set "
                                           "its phase-1 rate")
                return
            done.append(self._repetition(point, spec, rep, repetitions, setup_rate))
        values = [r.value for r in done if r.value is not None]
        shown = f"median {statistics.median(values):,.0f} {UNITS[spec.kind]}" if values else "no figure"
        self.recorder.progress.say(f"{setup}, {cores} core(s), {point.connections:,} connections "
                                   f"({point.name}): {spec.kind}: {shown} over {len(values)} of {len(done)} "
                                   f"repetitions [{done[-1].conditions.get('implementation', '?')}]")

    def _setup_rate(self, point: Point, spec: StatefulSpec) -> float | None:
        if spec.setup_rate_cps is not None:
            return spec.setup_rate_cps
        rates = [r.value for r in self.results
                 if r.procedure == CONNECTION_RATE and r.point["name"] == point.name and r.value is not None]
        return None if not rates else max(1.0, float(round(spec.setup_fraction * statistics.median(rates))))

    def _repetition(self, point: Point, spec: StatefulSpec, rep: int, repetitions: int,
                    setup_rate: float | None) -> StatefulResult:
        session = self.session
        scope = stateful_scope(session.spec.name, session.cores, point.name, spec.kind, rep)
        key = stateful_result_key(scope)
        stored = self.stored.get(key)
        if isinstance(stored, StatefulResult):
            self.results.append(stored)
            return stored
        self.recorder.progress.status(f"{session.spec.name} cores={session.cores} {point.name} {spec.kind} "
                                      f"{rep}/{repetitions}")
        measurer = RecordingMeasurer(self._source, point.table, self.calls.get(scope, []),
                                     self._storer(point, spec, rep, scope), session.env.clock, spec.rest_s)
        value, error, status, outcome = _measure(measurer, point, spec, setup_rate, self.searches)
        trials = [stateful_trial_key(scope, i) for i in range(measurer.calls)]
        record = StatefulResult(
            key=key, context=self.recorder.context_of(trials, session), procedure=spec.kind,
            point=point.record(), repetition=rep, spec=_plain(spec.record()), value=value,
            unit=UNITS[spec.kind], error=error, status=status, outcome=_plain(outcome),
            conditions=measurer.conditions_dict(), calls=measurer.calls)
        self.recorder.append(record)
        self.results.append(record)
        return record

    def _source(self) -> StatefulMeasurer:
        return self.session.stateful_measurer()

    def _storer(self, point: Point, spec: StatefulSpec, rep: int, scope: str) -> Callable[[int, Call], None]:
        def store(index: int, call: Call) -> None:
            self.recorder.append(StatefulTrial(
                key=stateful_trial_key(scope, index), context=self.recorder.context(self.session),
                procedure=spec.kind, point=point.record(), repetition=rep, call=index, method=call.method,
                args=call.args, result=call.result, raw=call.raw, conditions=call.conditions,
                rest_before_s=call.rest_before_s, wall_s=call.wall_s))
            self.recorder.new_trials += 1
            self.recorder.progress.advance(call.rest_before_s + call.wall_s)
        return store


def _measure(measurer: RecordingMeasurer, point: Point, spec: StatefulSpec, setup_rate: float | None,
             searches: dict[str, SearchSettings]) -> tuple[float | None, float | None, str, dict[str, Any]]:
    """(value, error, status, outcome) of one repetition."""
    n = point.connections
    if spec.kind == CONNECTION_RATE:
        assert spec.bracket is not None
        found = establishment_rate(measurer, n, spec.bracket, spec.alpha)
        return found.rate_cps, found.error_cps, found.status, asdict(found)
    if spec.kind == THROUGHPUT:
        assert setup_rate is not None and spec.search is not None
        settings = replace(searches[spec.search], repetitions=1, rest_s=0.0)  # the measurer rests
        runner = TrialRunner(None, clock=measurer.clock)
        over = throughput_over_connections(measurer, n, setup_rate, settings, runner, "over-connections")
        outcome = over.repeated.outcomes[0]
        data = {**outcome.to_dict(), "connections": n, "setup_rate_cps": setup_rate,
                "table_grew": over.table_grew, "phases": len(over.phases)}
        value = outcome.throughput_qps if outcome.status in (OK, UPPER_NOT_FAILED) else None
        return value, outcome.upper_qps - outcome.lower_qps, outcome.status, data
    if spec.kind == TEARDOWN:
        assert setup_rate is not None
        done = teardown_rate(measurer, n, setup_rate)
        status = "ok" if done.complete and done.rate_per_s is not None else "incomplete"
        return done.rate_per_s, None, status, asdict(done)
    assert spec.capacity is not None
    found = table_capacity(measurer, spec.capacity)
    value = None if found.capacity is None else float(found.capacity)
    return value, float(found.error), found.status, asdict(found)


def _plain(data: Any) -> Any:
    """JSON-safe: tuples as lists, dataclasses already dicts."""
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(v) for v in data]
    return data
