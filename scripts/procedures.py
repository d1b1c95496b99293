"""RFC 8219's procedures beyond throughput, as a campaign runs them: latency (§7.2), packet delay variation
(§7.3) and frame loss rate (§7.4, which takes RFC 2544 §26.3's procedure), each a `[[procedure]]` table of
the campaign file, run at one (setup, cores, tester sessions) point after its searches, at the rate the
searches found.

What RFC 8219 asks (the defaults here) and what this suite does instead where its tester cannot:
- latency: trials of at least 120 s at the throughput rate, at least 20 repetitions; per trial the typical
  latency (median) and the worst-case latency (99.9th percentile) of the tagged queries, those sent after
  60 s; reported: the median of each over the repetitions. xlatperf's `--latency-from` restricts its
  histogram to the queries sent from that second on: `tagged_after_s` (default 60 s, or half a trial
  shorter than 120 s, in whole seconds) is passed for latency trials only, and recorded.
- pdv: trials of at least 60 s at the throughput rate, at least 20 repetitions; per trial the 99.9th
  percentile of every query's one-way delay minus its minimum; reported: the median. The suite takes the
  round-trip time the tester measures, as for latency.
- flr: trials at stepped rates, fractions of the throughput (RFC 2544 §26.3 starts at the highest rate and
  steps down by at most 10 %); per trial (sent - answered) / sent. Every listed fraction is run, from the
  highest down, unless `until_lossless = N` stops a repetition after N successive trials without loss
  (RFC 2544 §26.3 says two).

Durations and repetitions are configurable so that a demonstration fits a small machine; a figure measured
with fewer than RFC 8219's says "not RFC 8219 §7.2 compliant: N repetitions of S s"
(analysis.procedures.compliance).
Each trial is one `procedure-trial` record (data.records.ProcedureTrial) whose key names its point,
procedure, repetition and step, so a resumed campaign takes stored trials and measures only missing ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from ..analysis.procedures import RFC_MINIMUM, procedure_lines
from ..data.records import ConfigKey, ProcedureTrial, RateOf, Record, procedure_key
from .search import OK, UPPER_NOT_FAILED

if TYPE_CHECKING:
    from .campaign import ConfigResult, Recorder, SetupSession

DEFAULT_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
KEYS = {"kind", "repetitions", "duration_s", "rest_s", "search", "method", "fractions", "until_lossless",
        "tagged_after_s"}
RFC_TAGGED_AFTER_S = 60  # RFC 8219 §7.2: the tagged queries are those sent after 60 s of a 120 s trial


class ProcedureError(ValueError):
    """A [[procedure]] table is malformed; the message names the table and the key."""


@dataclass(frozen=True)
class ProcedureSpec:
    """One [[procedure]] table. kind: "latency", "pdv" or "flr"; repetitions: trials per step, count;
    duration_s, rest_s: of each trial, s (rest default: the search's); search, method: whose median
    throughput sets the rate (default: the first [[search]] table and the first method); fractions: the FLR
    steps as fractions of that throughput (latency and PDV: (1.0,)); until_lossless: FLR only, stop a
    repetition's steps after this many successive trials without loss (0: run every step); tagged_after_s:
    latency only, the latency covers the queries sent from this second of each trial on (whole seconds)."""

    kind: str
    repetitions: int
    duration_s: float
    rest_s: float | None
    search: str
    method: str
    fractions: tuple[float, ...] = (1.0,)
    until_lossless: int = 0
    tagged_after_s: int = 0

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data["fractions"] = list(self.fractions)
        return data

    def steps(self) -> list[float]:
        """The fractions in the order they run: the highest first (RFC 2544 §26.3)."""
        return sorted(self.fractions, reverse=True)

    def trials(self) -> int:
        return self.repetitions * len(self.fractions)


def parse_procedures(raw: Any, searches: Sequence[str], methods: Sequence[str]) -> tuple[ProcedureSpec, ...]:
    """The [[procedure]] tables of a campaign file (none: ()); ProcedureError names what is wrong."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProcedureError("procedure must be [[procedure]] tables (an array of tables)")
    specs = tuple(_spec(table, i, searches, methods) for i, table in enumerate(raw))
    seen = [(s.kind, s.search, s.method) for s in specs]
    if len(set(seen)) != len(seen):
        raise ProcedureError("[[procedure]]: the same kind twice for one search and method; give each once")
    return specs


def _spec(table: Any, index: int, searches: Sequence[str], methods: Sequence[str]) -> ProcedureSpec:
    where = f"[[procedure]] #{index + 1}"
    if not isinstance(table, dict):
        raise ProcedureError(f"{where} must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ProcedureError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    kind = table.get("kind")
    if kind not in RFC_MINIMUM:
        raise ProcedureError(f"{where}: kind must be one of {list(RFC_MINIMUM)}, got {kind!r}")
    _, duration, repetitions = RFC_MINIMUM[kind]
    reps = table.get("repetitions", repetitions)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ProcedureError(f"{where}: repetitions must be an integer >= 1, got {reps!r}")
    seconds = _positive(where, "duration_s", table.get("duration_s", duration))
    rest = table.get("rest_s")
    if rest is not None and (isinstance(rest, bool) or not isinstance(rest, int | float) or rest < 0):
        raise ProcedureError(f"{where}: rest_s must be a number >= 0, got {rest!r}")
    search = table.get("search", searches[0])
    if search not in searches:
        raise ProcedureError(f"{where}: search {search!r} names no [[search]] table; known: {list(searches)}")
    method = table.get("method", methods[0])
    if method not in methods:
        raise ProcedureError(f"{where}: method {method!r} is not one of the campaign's methods "
                             f"{list(methods)}")
    fractions = _fractions(where, kind, table.get("fractions"))
    tagged = _tagged_after(where, kind, table, float(seconds))
    until = table.get("until_lossless", 0)
    if kind != "flr" and "until_lossless" in table:
        raise ProcedureError(f"{where}: until_lossless is for kind = \"flr\" only")
    if isinstance(until, bool) or not isinstance(until, int) or until < 0:
        raise ProcedureError(f"{where}: until_lossless must be an integer >= 0 (RFC 2544 §26.3: 2), got "
                             f"{until!r}")
    return ProcedureSpec(kind, reps, float(seconds), None if rest is None else float(rest), str(search),
                         str(method), fractions, until, tagged)


def _tagged_after(where: str, kind: str, table: dict[str, Any], duration_s: float) -> int:
    """The latency procedure's tag point, whole seconds: as given, else RFC 8219's 60 s, or half a trial
    shorter than twice that (a demonstration); 0 for the other procedures."""
    if kind != "latency":
        if "tagged_after_s" in table:
            raise ProcedureError(f"{where}: tagged_after_s is for kind = \"latency\" only")
        return 0
    default = RFC_TAGGED_AFTER_S if duration_s >= 2 * RFC_TAGGED_AFTER_S else int(duration_s // 2)
    value = table.get("tagged_after_s", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < duration_s:
        raise ProcedureError(f"{where}: tagged_after_s must be a whole number of seconds from 0 to below "
                             f"duration_s ({duration_s:g} s), got {value!r}")
    return value


def _positive(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ProcedureError(f"{where}: {key} must be a number > 0, got {value!r}")
    return float(value)


def _fractions(where: str, kind: str, value: Any) -> tuple[float, ...]:
    if kind != "flr":
        if value is not None:
            raise ProcedureError(f"{where}: fractions is for kind = \"flr\" only (latency and pdv run at the "
                                 "throughput rate itself)")
        return (1.0,)
    if value is None:
        return DEFAULT_FRACTIONS
    if not isinstance(value, list) or not value or any(
            isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 2 for f in value):
        raise ProcedureError(f"{where}: fractions must be a non-empty list of numbers in (0, 2] (of the "
                             f"throughput), e.g. [1.0, 0.9, 0.8], got {value!r}")
    if len(set(value)) != len(value):
        raise ProcedureError(f"{where}: fractions has repeated values: {value}")
    return tuple(float(f) for f in value)


def procedure_time_s(spec: ProcedureSpec, search_rest_s: float) -> float:
    """Trial time of one procedure at one point, s (the ETA and `campaign plan`)."""
    rest = spec.rest_s if spec.rest_s is not None else search_rest_s
    return spec.trials() * (spec.duration_s + rest)


@contextmanager
def _tagged(session: SetupSession, after_s: int) -> Iterator[None]:
    """The session's tester takes latency only from queries sent `after_s` or later (0: as it is) while the
    block runs, and its own options again after it."""
    if after_s <= 0:
        yield
        return
    tester = session.tester
    session.select_sessions(session.sessions, replace(tester, latency_from_s=float(after_s)))
    try:
        yield
    finally:
        session.select_sessions(session.sessions, tester)


class ProcedureRun:
    """The campaign's procedures at one (setup, cores, sessions) point: each trial from the store when its
    key is there (a resume), else measured now and stored."""

    def __init__(self, recorder: Recorder, results: list[ConfigResult], session: SetupSession,
                 stored: dict[str, Record]) -> None:
        self.recorder, self.results, self.session, self.stored = recorder, results, session, stored
        self.campaign = recorder.campaign

    def run(self) -> None:
        for spec in self.campaign.procedures:
            self._one(spec)

    def _source(self, spec: ProcedureSpec) -> ConfigResult | None:
        wanted = ConfigKey(self.session.spec.name, self.session.cores, spec.search, spec.method,
                           self.session.sessions)
        return next((r for r in self.results if r.key == wanted), None)

    def _one(self, spec: ProcedureSpec) -> None:
        setup, cores = self.session.spec.name, self.session.cores
        source = self._source(spec)
        if source is None or source.repeated.summary is None or \
                source.repeated.status not in (OK, UPPER_NOT_FAILED):
            self.recorder.progress.say(f"{setup}, {cores} core(s): no {spec.kind} procedure, the "
                                       f"{spec.method} search {spec.search!r} gave no median throughput")
            return
        throughput = float(round(source.repeated.summary.median))
        settings = self.campaign.settings(spec.search)
        rate_of = RateOf(spec.search, spec.method, source.repeated.status == UPPER_NOT_FAILED,
                         source.repeated.summary.n < settings.repetitions)
        rest = spec.rest_s if spec.rest_s is not None else settings.rest_s
        with _tagged(self.session, spec.tagged_after_s):
            done = [trial for rep in range(1, spec.repetitions + 1)
                    for trial in self._repetition(spec, rep, throughput, rest, rate_of)]
        for line in procedure_lines(done):
            self.recorder.progress.say(f"{setup}, {cores} core(s): {line}")

    def _repetition(self, spec: ProcedureSpec, rep: int, throughput: float, rest: float,
                    rate_of: RateOf) -> list[ProcedureTrial]:
        """One repetition's trials, the highest fraction first; with until_lossless, none after that many
        successive trials without loss (a stored repetition stops where it stopped: the same results)."""
        done: list[ProcedureTrial] = []
        lossless = 0
        for fraction in spec.steps():
            if spec.until_lossless and lossless >= spec.until_lossless:
                break
            trial = self._trial(spec, rep, fraction, throughput, rest, rate_of)
            done.append(trial)
            clean = not trial.result.get("tester_limited") and trial.result["sent"] == trial.result["valid"]
            lossless = lossless + 1 if clean else 0
        return done

    def _trial(self, spec: ProcedureSpec, rep: int, fraction: float, throughput: float, rest: float,
               rate_of: RateOf) -> ProcedureTrial:
        session, runner, progress = self.session, self.session.runner, self.recorder.progress
        key = procedure_key(session.spec.name, session.cores, session.sessions, spec.search, spec.method,
                            spec.kind, rep, None if spec.kind != "flr" else fraction)
        progress.idle_run_planned(spec.duration_s + rest)  # the ETA counts procedures with the idle capture
        stored = self.stored.get(key)
        if isinstance(stored, ProcedureTrial):
            runner.owe_rest(rest)
            return stored
        rate = max(1.0, float(round(fraction * throughput)))
        progress.status(f"{session.spec.name} cores={session.cores} {spec.kind} {rep}/{spec.repetitions}"
                        + (f" at {100 * fraction:g} %" if spec.kind == "flr" else ""))
        measurer = runner.ensure_measurer()
        rest_taken = runner.take_rest()
        started = runner.clock.now()
        result = measurer.measure(spec.duration_s, rate)
        wall = runner.clock.now() - started
        runner.owe_rest(rest)
        record = ProcedureTrial(
            key=key, context=self.recorder.context(session), procedure=spec.kind, repetition=rep,
            fraction=fraction, throughput_qps=throughput, rate_qps=rate, duration_s=spec.duration_s,
            spec=spec.record(), result={**result.to_dict(with_raw=False), "rest_before_s": rest_taken,
                                        "wall_s": wall},
            raw=result.raw, rate_of=rate_of)
        self.recorder.append(record)
        self.recorder.new_trials += 1
        progress.advance(progress.trial_time_s(session.spec.name, spec.duration_s, rest_taken, wall))
        return record
