"""Side-by-side benchmark of the RFC 8219 binary search and MLRsearch (RFC 9971; prints, never gates).

Simulated: a fake DUT of known capacity with per-trial noise and a buffer, in simulated time (wall time =
sum of trial durations and rests). Environment: any campaign setup (e.g. an emulated chain), in real time.
MLRsearch's figure is its first goal's conditional throughput (scripts/search/mlrsearch.py).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO

from ..data.records import steal_note
from .clock import Clock, RealClock, SimClock
from .fakes import FakeDut
from .search import (
    MLRSEARCH,
    RFC8219,
    RepeatedSearch,
    SearchOutcome,
    SearchSettings,
    TrialRunner,
    mlrsearch_search,
    rfc8219_search,
    summarize_outcomes,
    verdict,
)
from .trial import Measurer, TrialResult


@dataclass(frozen=True)
class DutStress:
    """What a simulated DUT (FakeDut) does besides its capacity and noise: queries lost at the start of every
    trial (count), the most its tester can send (queries/s, None = unlimited), and a capacity that falls by
    capacity_drop (fraction) after drop_after_s of a trial."""

    trial_start_loss: int = 0
    tester_limit_qps: float | None = None
    capacity_drop: float = 0.0
    drop_after_s: float = 30.0

    def fake_dut_kwargs(self) -> dict[str, float | int | None]:
        return {"trial_start_loss": self.trial_start_loss, "tester_limit_qps": self.tester_limit_qps,
                "capacity_drop": self.capacity_drop, "drop_after_s": self.drop_after_s}

    def describe(self) -> str:
        """The stress as a phrase (empty when there is none), for a DUT's label."""
        parts = []
        if self.trial_start_loss:
            parts.append(f"{self.trial_start_loss} queries lost at the start of every trial")
        if self.tester_limit_qps is not None:
            parts.append(f"tester limit {self.tester_limit_qps:.0f} queries/s")
        if self.capacity_drop:
            parts.append(f"capacity {100 * self.capacity_drop:g} % lower after {self.drop_after_s:g} s of a "
                         "trial")
        return "".join(f", {p}" for p in parts)


@dataclass(frozen=True)
class Comparison:
    """Both searches on one DUT (mlr: MLRsearch). wall_s: time on the clock (simulated or real), s."""

    label: str
    rfc: RepeatedSearch
    mlr: RepeatedSearch
    rfc_wall_s: float
    mlr_wall_s: float
    settings: SearchSettings
    mlr_settings: SearchSettings | None = None  # MLRsearch's own, when they differ from the RFC search's

    @property
    def mlr_search(self) -> SearchSettings:
        return self.mlr_settings or self.settings

    @property
    def inside_rfc_range(self) -> bool | None:
        """Issue 25's criterion (`median_agrees`) with MLRsearch's first goal width."""
        return median_agrees(answers(self.rfc.outcomes), answers(self.mlr.outcomes),
                             self.mlr_search.mlr_goals()[0].relative_width)

    @property
    def repetitions_inside(self) -> tuple[int, int]:
        """(MLRsearch repetitions whose figure lies inside the RFC search's [min, max], all MLRsearch
        repetitions): issue 32's target, per repetition rather than per median; a repetition without a figure
        counts as outside."""
        rfc = answers(self.rfc.outcomes)
        values = [o.throughput_qps for o in self.mlr.outcomes]
        if not rfc:
            return 0, len(values)
        return sum(v is not None and min(rfc) <= v <= max(rfc) for v in values), len(values)

    @property
    def time_ratio(self) -> float:
        return self.mlr_wall_s / self.rfc_wall_s if self.rfc_wall_s else float("nan")

    @property
    def error_qps(self) -> float | None:
        if self.rfc.summary is None:
            return None
        return self.settings.width_qps(self.rfc.summary.median)

    @property
    def same_answer(self) -> bool | None:
        """True when both medians differ by at most the search's error width."""
        if self.rfc.summary is None or self.mlr.summary is None:
            return None
        return abs(self.rfc.summary.median - self.mlr.summary.median) <= (self.error_qps or 0)

    def median_gap_ci(self, level: float = 0.95, resamples: int = 4000) -> tuple[float, float] | None:
        """Bootstrap interval of (MLRsearch median - RFC median), queries/s: each side's answers resampled
        with replacement (fixed seed, so a run prints the same interval again); None without two answers
        each."""
        rfc, mlr = answers(self.rfc.outcomes), answers(self.mlr.outcomes)
        if len(rfc) < 2 or len(mlr) < 2:
            return None
        draw = random.Random(0)
        gaps = sorted(statistics.median(draw.choices(mlr, k=len(mlr)))
                      - statistics.median(draw.choices(rfc, k=len(rfc))) for _ in range(resamples))
        tail = (1 - level) / 2
        return gaps[int(tail * (resamples - 1))], gaps[int((1 - tail) * (resamples - 1))]


def answers(outcomes: Iterable[SearchOutcome]) -> list[float]:
    """The throughputs of the searches that found one, queries/s."""
    return [o.throughput_qps for o in outcomes if o.throughput_qps is not None]


def median_agrees(rfc: list[float], other: list[float], width: float) -> bool | None:
    """Issue 25's criterion: the other method's median lies inside the RFC search's [min, max]; where that
    range is a single point (every RFC repetition gave the same answer), within `width` (a fraction) of it
    instead. None without answers on both sides."""
    if not rfc or not other:
        return None
    median = statistics.median(other)
    if min(rfc) < max(rfc):
        return min(rfc) <= median <= max(rfc)
    return abs(median - rfc[0]) <= width * rfc[0]


@dataclass
class TrialLog:
    """Wraps a Measurer and writes one line per trial: a real-time benchmark runs for many minutes."""

    inner: Measurer
    out: TextIO
    clock: Clock
    started_s: float
    loss_ratio: float

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        result = self.inner.measure(duration_s, rate_qps)
        judged = verdict(result, self.loss_ratio)
        loss = f"{100 * result.loss_ratio:.4f} %"
        note = steal_note(result.host_steal_pct)
        print(f"    trial {duration_s:g} s at {rate_qps:,.0f} queries/s: loss {loss} "
              f"-> {judged} ({self.clock.now() - self.started_s:.0f} s into the benchmark)"
              f"{'; ' + note if note else ''}", file=self.out, flush=True)
        return result


def compare(label: str, make_measurer: Callable[[], Measurer], settings: SearchSettings,
            clock: Clock, progress: TextIO | None = None,
            mlr_settings: SearchSettings | None = None) -> Comparison:
    """R repetitions of each search, interleaved (RFC, MLRsearch, RFC, MLRsearch, ...) so a machine whose
    load drifts treats both alike.
    progress: where to write a line per search and per trial (None: silent).
    mlr_settings: MLRsearch's own settings (e.g. another campaign file's), each method its own repetitions;
    None: both run `settings`."""
    chosen = {RFC8219: settings, MLRSEARCH: mlr_settings or settings}
    begin = clock.now()
    if progress is not None:
        inner = make_measurer

        def make_measurer() -> Measurer:
            return TrialLog(inner(), progress, clock, begin, settings.loss_ratio)
    runner = TrialRunner(make_measurer(), clock=clock)
    outcomes: dict[str, list[SearchOutcome]] = {RFC8219: [], MLRSEARCH: []}
    walls = {RFC8219: 0.0, MLRSEARCH: 0.0}
    for repetition in range(1, max(c.repetitions for c in chosen.values()) + 1):
        for method in (RFC8219, MLRSEARCH):
            if repetition > chosen[method].repetitions:
                continue
            runner.measurer = make_measurer()
            started = clock.now()
            sid = f"bench/{method}/rep{repetition}"
            if progress is not None:
                print(f"  {method} search, repetition {repetition} of {chosen[method].repetitions}",
                      file=progress, flush=True)
            if method == RFC8219:
                outcome = rfc8219_search(runner, settings, sid)
            else:
                outcome = mlrsearch_search(runner, chosen[method], sid)
            walls[method] += clock.now() - started
            outcomes[method].append(outcome)
    return Comparison(label, summarize_outcomes(RFC8219, outcomes[RFC8219]),
                      summarize_outcomes(MLRSEARCH, outcomes[MLRSEARCH]), walls[RFC8219], walls[MLRSEARCH],
                      settings, mlr_settings)


def simulated(capacity_qps: float, noise: float, buffer_queries: float, settings: SearchSettings,
              seed: int, background_loss: float = 0.0,
              mlr_settings: SearchSettings | None = None, stress: DutStress | None = None) -> Comparison:
    """Both searches on a FakeDut (stress: its fixed per-trial loss, tester limit and capacity drop)."""
    clock = SimClock()
    seeds = iter(range(seed, seed + 1000))
    stress = stress or DutStress()

    def make() -> Measurer:
        return FakeDut(capacity_qps, noise=noise, buffer_queries=buffer_queries, seed=next(seeds),
                       background_loss=background_loss, clock=clock, sleep=True, **stress.fake_dut_kwargs())

    label = (f"simulated DUT: capacity {capacity_qps:.0f} queries/s, "
             f"per-trial noise {100 * noise:g} % (1 sigma), "
             f"buffer {buffer_queries:.0f} queries, random loss {100 * background_loss:g} % of queries"
             f"{stress.describe()}, seed {seed}")
    return compare(label, make, settings, clock, mlr_settings=mlr_settings)


def real(label: str, measurer: Measurer, settings: SearchSettings,
         progress: TextIO | None = None, mlr_settings: SearchSettings | None = None) -> Comparison:
    return compare(label, lambda: measurer, settings, RealClock(), progress, mlr_settings)


def _settings_line(s: SearchSettings) -> str:
    err = f"{s.error_qps:g} queries/s" if s.error_qps else f"{100 * (s.error_ratio or 0):g} % of the result"
    return (f"bounds {s.min_rate_qps:.0f}-{s.max_rate_qps:.0f} queries/s, error {err}, loss <= "
            f"{100 * s.loss_ratio:g} %, full trials {s.duration_s:g} s + {s.rest_s:g} s rest, shorter trials "
            f"+ {s.short_rest_s:g} s rest, {s.repetitions} repetitions")


def print_comparison(c: Comparison, out: TextIO, time_kind: str = "simulated") -> None:
    goals = "; ".join(g.describe() for g in c.mlr_search.mlr_goals())
    print(c.label, file=out)
    if c.mlr_settings is None:
        print(f"  settings: {_settings_line(c.settings)}; MLRsearch {goals}", file=out)
    else:
        print(f"  settings: RFC 8219 {_settings_line(c.settings)}; MLRsearch "
              f"{_settings_line(c.mlr_settings)}, {goals}", file=out)
    for rep, wall in ((c.rfc, c.rfc_wall_s), (c.mlr, c.mlr_wall_s)):
        print(f"  {rep.describe()}; {rep.trials} trials; {time_kind} wall time {wall:.0f} s",
              file=out)
    inside = {True: "yes", False: "NO", None: "n/a"}[c.inside_rfc_range]
    print(f"  MLRsearch median inside the RFC 8219 search's [min, max] (within the first goal's width where "
          f"that is a point): {inside}", file=out)
    inside_n, total_n = c.repetitions_inside
    per_search = (c.mlr.trials / max(1, len(c.mlr.outcomes))) / (c.rfc.trials / max(1, len(c.rfc.outcomes)))
    print(f"  MLRsearch repetitions inside the RFC 8219 search's [min, max]: {inside_n} of {total_n}; trials "
          f"per search {per_search:.2f} x the RFC search's", file=out)
    same = {True: "yes", False: "NO", None: "n/a"}[c.same_answer]
    error = f"{c.error_qps:.0f} queries/s" if c.error_qps is not None else "n/a"
    print(f"  same median within the error bound ({error}): {same}; MLRsearch/RFC wall time "
          f"{100 * c.time_ratio:.1f} %", file=out)
    gap = c.median_gap_ci()
    if gap is not None and c.error_qps is not None:
        inside = "inside" if -c.error_qps <= gap[0] and gap[1] <= c.error_qps else "NOT inside"
        print(f"  MLRsearch median - RFC median: 95 % bootstrap interval {gap[0]:+.0f} to {gap[1]:+.0f} "
              f"queries/s, {inside} +-{c.error_qps:.0f} queries/s", file=out)
