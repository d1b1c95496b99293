"""The search methods side by side on a set of simulated DUTs (`xlatbench search-bench --suite`).

RFC 8219 binary and MLRsearch (RFC 9971, first goal) run R repetitions each, interleaved,
on each DUT of the set: a hard cap with per-trial noise 0 %, 1 % and 2 % (1 sigma), a deep queue whose
overload answers below capacity, and a loss curve that rises gradually above a knee (scripts/fakes.py).
Time is simulated (wall time = trial durations + rests). For each method: time, trials, median, spread
(min-max) and whether its median lies inside the RFC search's [min, max]; beside them the DUT's known
answer and how far each median lies from it. Prints only, never gates.

`simulated_search_s` is the same simulation as an estimate of a search's time for `campaign plan` and the
campaign's ETA, for every method (the MLRsearch library's trial choices have no closed form; the RFC 8219
search's is simulated too, so both estimates come from the methods' own code).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TextIO

from .bench import DutStress, answers, median_agrees
from .clock import SimClock
from .fakes import FakeDut, GradualDut, QueueDut
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
)
from .trial import Measurer

ORDER = (RFC8219, MLRSEARCH)
NAMES = {RFC8219: "RFC 8219 binary", MLRSEARCH: "MLRsearch (RFC 9971)"}
# The queue DUT's queue, in seconds of its capacity: deeper than the tester's 0.25 s timeout, so overload
# answers late (below capacity) rather than dropping.
QUEUE_SECONDS = 0.6
GRADUAL_SLOPE = 0.1


@dataclass(frozen=True)
class MethodRun:
    """R repetitions of one method on one DUT. wall_s: simulated time, s."""

    method: str
    repeated: RepeatedSearch
    wall_s: float

    def values(self) -> list[float]:
        return answers(self.repeated.outcomes)


@dataclass(frozen=True)
class SuiteRow:
    """All methods on one simulated DUT; known_qps: the answer fixed in advance (queries/s); width: the
    MLRsearch first goal's relative width (fraction), the tolerance where the RFC search's range is a
    point."""

    dut: str
    known_qps: float
    runs: dict[str, MethodRun]
    width: float = 0.0

    def agrees(self, method: str) -> bool | None:
        """The comparison's criterion: the median inside the RFC search's [min, max]; where that range is a
        single point (every RFC repetition gave the same answer), within `width` of it instead."""
        return median_agrees(self.runs[RFC8219].values(), self.runs[method].values(), self.width)

    def rfc_is_a_point(self) -> bool:
        rfc = self.runs[RFC8219].values()
        return bool(rfc) and min(rfc) == max(rfc)


def run_methods(make_measurer: Callable[[], Measurer],
                settings: SearchSettings | Mapping[str, SearchSettings], clock: SimClock,
                methods: tuple[str, ...] = ORDER) -> dict[str, MethodRun]:
    """R repetitions of each method, interleaved (a drifting machine treats them alike). settings: one for
    every method, or one per method (each runs its own repetitions)."""
    chosen = settings if isinstance(settings, Mapping) else dict.fromkeys(methods, settings)
    runner = TrialRunner(None, clock=clock)
    outcomes: dict[str, list[SearchOutcome]] = {m: [] for m in methods}
    walls = dict.fromkeys(methods, 0.0)
    for repetition in range(1, max(chosen[m].repetitions for m in methods) + 1):
        for method in methods:
            if repetition > chosen[method].repetitions:
                continue
            runner.measurer = make_measurer()
            started = clock.now()
            sid = f"bench/{method}/rep{repetition}"
            if method == RFC8219:
                outcome = rfc8219_search(runner, chosen[method], sid)
            else:
                outcome = mlrsearch_search(runner, chosen[method], sid)
            walls[method] += clock.now() - started
            outcomes[method].append(outcome)
    return {m: MethodRun(m, summarize_outcomes(m, outcomes[m]), walls[m]) for m in methods}


def simulated_duts(capacity_qps: float, settings: SearchSettings, buffer_queries: float,
                   background_loss: float, stress: DutStress | None = None,
                   ) -> list[tuple[str, Callable[[SimClock, int], Measurer], float]]:
    """The DUT set: (label, factory(clock, seed), known answer in queries/s). stress (a fixed per-trial
    loss, a tester limit, a capacity drop) applies to the hard caps; their known answer is then the RFC 8219
    search's trial duration's (`FakeDut.zero_loss_qps`)."""
    d, loss = settings.duration_s, settings.loss_ratio
    stress = stress or DutStress()
    duts: list[tuple[str, Callable[[SimClock, int], Measurer], float]] = []
    for noise in (0.0, 0.01, 0.02):
        def cap(clock: SimClock, seed: int, noise: float = noise) -> Measurer:
            return FakeDut(capacity_qps, noise=noise, buffer_queries=buffer_queries, seed=seed,
                           background_loss=background_loss, clock=clock, sleep=True,
                           **stress.fake_dut_kwargs())
        plain = FakeDut(capacity_qps, buffer_queries=buffer_queries, **stress.fake_dut_kwargs())
        known = plain.zero_loss_qps(d, loss)
        duts.append((f"hard cap, noise {100 * noise:g} %, buffer {buffer_queries:.0f} queries, random loss "
                     f"{100 * background_loss:g} %{stress.describe()}", cap, known))
    queue = QUEUE_SECONDS * capacity_qps

    def deep(clock: SimClock, seed: int) -> Measurer:
        return QueueDut(capacity_qps, queue_queries=queue, noise=0.005, seed=seed, clock=clock, sleep=True)
    duts.append((f"deep queue ({queue:.0f} queries, timeout 0.25 s, noise 0.5 %): overload answers below "
                 "capacity", deep, QueueDut(capacity_qps, queue_queries=queue).zero_loss_qps(d)))

    def gradual(clock: SimClock, seed: int) -> Measurer:
        return GradualDut(capacity_qps, slope=GRADUAL_SLOPE, seed=seed, clock=clock, sleep=True)
    duts.append((f"gradual loss above {capacity_qps:.0f} queries/s ({100 * GRADUAL_SLOPE:g} % more loss per "
                 "100 % more rate)", gradual, GradualDut(capacity_qps, GRADUAL_SLOPE).rate_at_loss(loss)))
    return duts


def simulated_suite(capacity_qps: float, settings: SearchSettings, seed: int = 1,
                    buffer_queries: float = 5000.0, background_loss: float = 0.00002,
                    mlr_settings: SearchSettings | None = None, stress: DutStress | None = None,
                    ) -> list[SuiteRow]:
    """Every method on every simulated DUT. settings: the RFC 8219 search's (and the known answers'
    duration and loss ratio); mlr_settings: MLRsearch's when they differ (e.g. another campaign file's)."""
    per_method = {RFC8219: settings, MLRSEARCH: mlr_settings or settings}
    width = per_method[MLRSEARCH].mlr_goals()[0].relative_width
    rows = []
    duts = simulated_duts(capacity_qps, settings, buffer_queries, background_loss, stress)
    for label, factory, known in duts:
        clock = SimClock()
        seeds = iter(range(seed, seed + 100_000))
        runs = run_methods(lambda factory=factory, clock=clock, seeds=seeds: factory(clock, next(seeds)),
                           per_method, clock)
        rows.append(SuiteRow(label, known, runs, width))
    return rows


def _qps(values: list[float]) -> str:
    if not values:
        return "no number"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def _settings_text(s: SearchSettings) -> str:
    err = f"{s.error_qps:g} queries/s" if s.error_qps else f"{100 * (s.error_ratio or 0):g} % of the result"
    return (f"bounds {s.min_rate_qps:.0f}–{s.max_rate_qps:.0f} queries/s, error {err}, loss ≤ "
            f"{100 * s.loss_ratio:g} %, {s.duration_s:g} s trials + {s.rest_s:g} s rest, shorter trials + "
            f"{s.short_rest_s:g} s rest, {s.repetitions} repetitions")


def print_suite(rows: list[SuiteRow], settings: SearchSettings, out: TextIO,
                mlr_settings: SearchSettings | None = None) -> None:
    """A Markdown table: one line per DUT and method, then the issue's three criteria in one line each."""
    mlr = mlr_settings or settings
    goals = "; ".join(g.describe() for g in mlr.mlr_goals())
    common = (f"{_settings_text(settings)}" if mlr_settings is None else
              f"RFC 8219: {_settings_text(settings)}; MLRsearch: {_settings_text(mlr)}")
    print(f"Simulated DUTs, simulated time. {common}. MLRsearch reports its first goal's conditional "
          f"throughput; goals: {goals}.\n", file=out)
    print("| DUT (known answer, queries/s) | method | median (min–max), queries/s | spread | median − known "
          "| trials | time | time / RFC | trials / RFC | median in RFC [min, max] (median − RFC median) |",
          file=out)
    print("|---|---|---|---|---|---|---|---|---|---|", file=out)
    for row in rows:
        rfc = row.runs[RFC8219]
        for method in ORDER:
            run = row.runs[method]
            values = run.values()
            spread = f"{max(values) - min(values):,.0f}" if values else "-"
            agrees = row.agrees(method)
            if row.rfc_is_a_point() and agrees is not None:
                inside = f"point: {'within' if agrees else '**beyond**'} {100 * row.width:g} %"
            else:
                inside = {True: "yes", False: "**no**", None: "-"}[agrees]
            if values and rfc.values():
                inside += f" ({statistics.median(values) - statistics.median(rfc.values()):+,.0f})"
            trials = run.repeated.trials
            off = f"{100 * (statistics.median(values) / row.known_qps - 1):+.2f} %" if values else "-"
            print(f"| {row.dut} ({row.known_qps:,.0f}) | {NAMES[method]} | {_qps(values)} | {spread} | "
                  f"{off} | {trials} | {run.wall_s / 3600:.2f} h | {100 * run.wall_s / rfc.wall_s:.0f} % | "
                  f"{trials / rfc.repeated.trials:.2f} | {inside if method != RFC8219 else '-'} |", file=out)
    print(f"\n{criteria(rows)}", file=out)


def criteria(rows: list[SuiteRow]) -> str:
    """MLRsearch against issue 25's targets on these rows: medians that agree with the RFC search (its
    [min, max], or within the goal width where that is a point), the most trials and time against it."""
    agree = [row.agrees(MLRSEARCH) for row in rows]
    points = sum(row.rfc_is_a_point() for row in rows)
    trials = max(row.runs[MLRSEARCH].repeated.trials / row.runs[RFC8219].repeated.trials for row in rows)
    time = max(row.runs[MLRSEARCH].wall_s / row.runs[RFC8219].wall_s for row in rows)
    return (f"MLRsearch: {sum(a is True for a in agree)} of {len(rows)} medians agree with the RFC 8219 "
            f"search ({points} of its ranges are a single point: there within the goal width); at most "
            f"{trials:.2f} x its trials (target ≤ 2) and {100 * time:.0f} % of its time.")


# Seed sets of `search-bench --suite --seed-sets N`: the k-th set's first seed is seed + k x SEED_SET_STRIDE
# (each set draws up to a few hundred seeds, one per search, so the sets do not overlap).
SEED_SET_STRIDE = 1000


def seed_sets(capacity_qps: float, settings: SearchSettings, first_seed: int, sets: int,
              buffer_queries: float = 5000.0, background_loss: float = 0.00002,
              mlr_settings: SearchSettings | None = None,
              stress: DutStress | None = None) -> list[tuple[int, list[SuiteRow]]]:
    """The suite `sets` times, first seeds first_seed, first_seed + SEED_SET_STRIDE, ...: (seed, rows)."""
    return [(seed, simulated_suite(capacity_qps, settings, seed, buffer_queries, background_loss,
                                   mlr_settings, stress))
            for seed in range(first_seed, first_seed + sets * SEED_SET_STRIDE, SEED_SET_STRIDE)]


def print_seed_sets(results: list[tuple[int, list[SuiteRow]]], out: TextIO) -> None:
    """Issue 25's three criteria over every row of every seed set, then each row that disagrees (its RFC
    [min, max], the MLRsearch median and how far outside it lies, % of the nearer end)."""
    rows = [row for _, set_rows in results for row in set_rows]
    firsts = [str(seed) for seed, _ in results]
    seeds = ", ".join(firsts if len(firsts) <= 5 else [*firsts[:2], "...", firsts[-1]])
    print(f"Over {len(results)} seed sets (first seeds {seeds}): {criteria(rows)}", file=out)
    for seed, set_rows in results:
        for row in set_rows:
            if row.agrees(MLRSEARCH) is not False:
                continue
            rfc, mlr = row.runs[RFC8219].values(), statistics.median(row.runs[MLRSEARCH].values())
            nearer = min(rfc) if mlr < min(rfc) else max(rfc)
            print(f"- seed {seed}, {row.dut}: MLRsearch median {mlr:,.0f}, RFC 8219 [{min(rfc):,.0f}, "
                  f"{max(rfc):,.0f}] ({100 * (mlr / nearer - 1):+.2f} % of its nearer end)", file=out)


# campaign plan: the simulated DUT sits at this fraction of max_rate_qps (the RFC estimate's choice) with
# this per-trial noise (1 sigma); the estimate is the mean over PLAN_SEEDS simulated campaigns.
PLAN_CAPACITY_FRACTION = 0.25
PLAN_NOISE = 0.01
PLAN_SEEDS = 3


def simulated_search_s(settings: SearchSettings, method: str = MLRSEARCH) -> float:
    """Simulated time of `settings.repetitions` searches of `method` (trial durations + rests), s."""
    return simulated_search(settings, method)[0]


# campaign plan's opening trials: a tester that sends at most this fraction of max_rate_qps (the searches'
# first trials ask for more: MLRsearch's first is at max_rate_qps), so those trials are tester-limited and
# retried before the search goes on below the tester's reach.
PLAN_TESTER_FRACTION = 0.5


def opening_trials(settings: SearchSettings, method: str = MLRSEARCH) -> tuple[float, float]:
    """(time in s, trials) that `settings.repetitions` searches of `method` add when the tester sends at most
    PLAN_TESTER_FRACTION x max_rate_qps: the same simulation with and without that tester (never below 0)."""
    limited = simulated_search(settings, method, PLAN_TESTER_FRACTION)
    free = simulated_search(settings, method)
    return max(0.0, limited[0] - free[0]), max(0.0, limited[1] - free[1])


@functools.lru_cache(maxsize=128)
def simulated_search(settings: SearchSettings, method: str = MLRSEARCH,
                     tester_fraction: float | None = None) -> tuple[float, float]:
    """(time in s, trials) of `settings.repetitions` searches of `method` (trial durations + rests): on a
    hard-cap DUT at PLAN_CAPACITY_FRACTION x max_rate_qps with PLAN_NOISE, mean over PLAN_SEEDS seeds;
    tester_fraction: the tester sends at most that fraction of max_rate_qps (None: any rate)."""
    span = settings.max_rate_qps - settings.min_rate_qps
    capacity = settings.min_rate_qps + PLAN_CAPACITY_FRACTION * span
    limit = None if tester_fraction is None else tester_fraction * settings.max_rate_qps
    total = trials = 0.0
    for seed in range(1, PLAN_SEEDS + 1):
        clock = SimClock()
        seeds = iter(range(seed * 1000, seed * 1000 + 100_000))
        def dut(clock: SimClock = clock, seeds: Iterator[int] = seeds) -> Measurer:
            return FakeDut(capacity, noise=PLAN_NOISE, seed=next(seeds), clock=clock, sleep=True,
                           tester_limit_qps=limit)
        runs = run_methods(dut, settings, clock, (method,))
        total += runs[method].wall_s
        trials += runs[method].repeated.trials
    return total / PLAN_SEEDS, trials / PLAN_SEEDS
