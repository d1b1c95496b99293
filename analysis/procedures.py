"""RFC 8219's latency (§7.2), packet delay variation (§7.3) and frame loss rate (§7.4 / RFC 2544 §26.3) from a
store's `procedure-trial` records (scripts.procedures runs them): the figures, their tables and figures per
setup, DUT core count and tester sessions.

Per trial, latencies are taken over every query the tester sent, late and lost ones counted as infinitely
late (evidence.all_queries_percentile, as the idle-capture latency): typical = the median, worst case = the
99.9th percentile; PDV = that 99.9th percentile minus the smallest delay of the trial (RFC 8219 §7.3.1's
D99.9thPercentile - Dmin). Reported: the median of each over the repetitions. Latency trials cover the tagged
queries only, those sent from the trial's tag second on (xlatperf --latency-from; RFC 8219 §7.2: after 60 s),
their loss counted from the tester's per-second series; records written before the tag existed cover the
whole trial, and their conditions say "no warm-up cut". PDV covers every query of the trial, as §7.3 does.
FLR = (sent - answered in time) / sent per trial, the median over the repetitions of each step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.records import ProcedureTrial, Record
from .bounded import rate_text
from .evidence import all_queries_percentile
from .tables import Table

# Per procedure: its RFC 8219 section, its least trial duration (s) and repetitions (the one place of them).
RFC_MINIMUM = {"latency": ("§7.2", 120.0, 20), "pdv": ("§7.3", 60.0, 20), "flr": ("§7.4", 60.0, 1)}
TAGGED = ("over the tagged queries of each trial (those sent from its tag second on, see Conditions), late "
          "and lost ones counted as infinitely late")


@dataclass(frozen=True)
class Point:
    """One procedure at one configuration: (setup, cores, sessions, search, method, procedure)."""

    setup: str
    cores: int
    sessions: int
    search: str
    method: str
    procedure: str


@dataclass(frozen=True)
class DelayFigures:
    """Latency or PDV at one point: per-trial values (s, math.inf when more queries went unanswered than the
    percentile leaves out), their medians, and what the figures stand on."""

    point: Point
    implementation: str
    throughput_qps: float
    rate_lower_bound: bool
    rate_partial: bool
    repetitions: int
    duration_s: float
    typical_s: list[float]
    worst_s: list[float]
    pdv_s: list[float]
    bound: bool
    missing: int
    tester_limited: int

    @property
    def typical(self) -> float | None:
        return statistics.median(self.typical_s) if self.typical_s else None

    @property
    def worst(self) -> float | None:
        return statistics.median(self.worst_s) if self.worst_s else None

    @property
    def pdv(self) -> float | None:
        return statistics.median(self.pdv_s) if self.pdv_s else None


def point_of(trial: ProcedureTrial) -> Point:
    return Point(trial.context.setup_name, trial.context.cores, trial.context.sessions, trial.rate_of.search,
                 trial.rate_of.method, trial.procedure)


def procedure_trials(records: Iterable[Record]) -> list[ProcedureTrial]:
    return [r for r in records if isinstance(r, ProcedureTrial)]


def compliance(kind: str, repetitions: int, duration_s: float) -> str | None:
    """None when a procedure has RFC 8219's trial duration and repetitions, else the sentence saying it has
    not: "not RFC 8219 §7.2 compliant: 3 repetitions of 5 s"."""
    section, least_s, least_reps = RFC_MINIMUM[kind]
    if duration_s >= least_s and repetitions >= least_reps:
        return None
    return f"not RFC 8219 {section} compliant: {repetitions} repetitions of {duration_s:g} s"


def conditions(trial: ProcedureTrial) -> str:
    """"20 × 120 s (RFC 8219 §7.2)" or "not RFC 8219 §7.2 compliant: N repetitions of S s", and for latency
    which queries were timed ("queries sent after 60 s", or "whole trials, no warm-up cut")."""
    repetitions, duration = int(trial.spec["repetitions"]), float(trial.spec["duration_s"])
    text = compliance(trial.procedure, repetitions, duration) or \
        f"{repetitions} × {duration:g} s (RFC 8219 {RFC_MINIMUM[trial.procedure][0]})"
    if trial.procedure != "latency":
        return text
    after = tagged_after_s(trial)
    return f"{text}; " + (f"queries sent after {after:g} s" if after > 0 else "whole trials, no warm-up cut")


def tagged_after_s(trial: ProcedureTrial) -> float:
    """The second from which the trial's latency figures count queries (0: the whole trial): what the tester
    recorded, else what the procedure asked."""
    latency = (trial.raw or {}).get("latency") or {}
    if "from_s" in latency:
        return float(latency["from_s"])
    return float(trial.spec.get("tagged_after_s", 0))


def _tagged_counts(trial: ProcedureTrial, after_s: float) -> tuple[int, int]:
    """(sent, valid) of the queries sent from `after_s` on, from the tester's per-second series (row n covers
    [n - 1, n) s after the start, by the second each query was sent)."""
    rows = [row for row in (trial.raw or {}).get("series") or [] if int(row["second"]) > after_s]
    return sum(int(row["sent"]) for row in rows), sum(int(row["valid"]) for row in rows)


def trial_delays(trial: ProcedureTrial) -> tuple[float, float, float, bool] | None:
    """(typical, worst case, PDV, lower bound) of one trial, s; None without the tester's latency (a
    simulated DUT, or no valid reply with figures)."""
    latency = (trial.raw or {}).get("latency") or {}
    if latency.get("p50") is None or latency.get("min") is None:
        return None
    sent, valid = int(trial.result.get("sent", 0)), int(trial.result.get("valid", 0))
    after = float(latency.get("from_s", 0))
    if after > 0:
        sent, valid = _tagged_counts(trial, after)
    typical, typical_bound = all_queries_percentile(latency, sent, valid, 0.5)
    worst, worst_bound = all_queries_percentile(latency, sent, valid, 0.999)
    return typical, worst, worst - float(latency["min"]), typical_bound or worst_bound


def delay_figures(trials: list[ProcedureTrial], procedure: str) -> list[DelayFigures]:
    """Latency (procedure "latency") or PDV ("pdv") per point, in store order."""
    groups: dict[Point, list[ProcedureTrial]] = {}
    for trial in trials:
        if trial.procedure == procedure:
            groups.setdefault(point_of(trial), []).append(trial)
    out = []
    for point, mine in groups.items():
        counted = [t for t in mine if not t.result.get("tester_limited")]
        values = [v for v in (trial_delays(t) for t in counted) if v is not None]
        first = mine[0]
        out.append(DelayFigures(
            point, first.context.tag, first.throughput_qps, first.rate_of.lower_bound, first.rate_of.partial,
            len(mine), first.duration_s, [v[0] for v in values], [v[1] for v in values],
            [v[2] for v in values], any(v[3] for v in values), len(counted) - len(values),
            len(mine) - len(counted)))
    return out


def flr_steps(trials: list[ProcedureTrial]) -> dict[Point, dict[float, list[float | None]]]:
    """Per point, per fraction of the throughput, each repetition's frame loss rate (fraction), None for a
    trial the tester could not offer (its loss is not the DUT's: left out of every figure)."""
    out: dict[Point, dict[float, list[float | None]]] = {}
    for trial in trials:
        if trial.procedure != "flr":
            continue
        sent, valid = int(trial.result["sent"]), int(trial.result["valid"])
        flr = None if trial.result.get("tester_limited") else (sent - valid) / sent if sent > 0 else 1.0
        out.setdefault(point_of(trial), {}).setdefault(trial.fraction, []).append(flr)
    return out


def _measured(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _ms(seconds: float | None, bound: bool = False) -> str:
    if seconds is None:
        return "-"
    if math.isinf(seconds):
        return "> timeout"
    return ("≥ " if bound else "") + f"{1000 * seconds:.3f}"


def _with_unit(seconds: float | None, bound: bool) -> str:
    """_ms with its unit where it is a number ("0.761 ms", "> timeout", "-")."""
    text = _ms(seconds, bound)
    return text if seconds is None or math.isinf(seconds) else f"{text} ms"


def _first(trials: list[ProcedureTrial], point: Point) -> ProcedureTrial:
    return next(t for t in trials if point_of(t) == point)


def latency_tables(records: Iterable[Record]) -> list[Table]:
    """The §7.2 latency, §7.3 PDV and FLR tables of a store (only those it has data for)."""
    trials = procedure_trials(records)
    tables = []
    latency = delay_figures(trials, "latency")
    if latency:
        rows = [[f.point.setup, str(f.point.cores), str(f.point.sessions),
                 rate_text(f.throughput_qps, f.rate_lower_bound, f.rate_partial), _ms(f.typical, f.bound),
                 _ms(f.worst, f.bound), _trials_text(len(f.typical_s), f, trials),
                 conditions(_first(trials, f.point)), f.implementation] for f in latency]
        tables.append(Table(
            "RFC 8219 §7.2 latency at the throughput rate (median throughput of the search): typical = "
            "median of the per-trial medians, worst case = median of the per-trial 99.9th percentiles, round "
            f"trip through the chain, {TAGGED}; ≥ = a lower bound",
            ["Setup", "DUT cores", "Tester sessions", "Rate (queries/s)", "Typical latency (ms)",
             "Worst-case latency (ms)", "Trials with figures", "Conditions", "DUT implementation"], rows))
    pdv = delay_figures(trials, "pdv")
    if pdv:
        rows = [[f.point.setup, str(f.point.cores), str(f.point.sessions),
                 rate_text(f.throughput_qps, f.rate_lower_bound, f.rate_partial), _ms(f.pdv, f.bound),
                 _ms(min(f.pdv_s) if f.pdv_s else None, f.bound),
                 _ms(max(f.pdv_s) if f.pdv_s else None, f.bound),
                 _trials_text(len(f.pdv_s), f, trials), conditions(_first(trials, f.point)), f.implementation]
                for f in pdv]
        tables.append(Table(
            "RFC 8219 §7.3 packet delay variation at the throughput rate: per trial the 99.9th percentile of "
            "the round-trip delay minus its minimum, median over the trials; over every query of each trial "
            "(as §7.3 takes every frame), late and lost ones counted as infinitely late; ≥ = a lower bound",
            ["Setup", "DUT cores", "Tester sessions", "Rate (queries/s)", "PDV median (ms)", "PDV min (ms)",
             "PDV max (ms)", "Trials with figures", "Conditions", "DUT implementation"], rows))
    steps = flr_steps(trials)
    if steps:
        fractions = sorted({f for by in steps.values() for f in by}, reverse=True)
        rows = []
        for point, by in steps.items():
            first = _first(trials, point)
            rows.append([point.setup, str(point.cores), str(point.sessions),
                         rate_text(first.throughput_qps, first.rate_of.lower_bound, first.rate_of.partial),
                         *[_percent(by.get(f)) for f in fractions], conditions(first), first.context.tag])
        tables.append(Table(
            "Frame loss rate (RFC 8219 §7.4, RFC 2544 §26.3) at fractions of the throughput: (sent - "
            "answered within the timeout) / sent, %, median over the repetitions of each step; trials the "
            "tester could not offer (tester-limited) left out",
            ["Setup", "DUT cores", "Tester sessions", "Throughput (queries/s)",
             *[f"FLR at {100 * f:g} % (%)" for f in fractions], "Conditions", "DUT implementation"], rows))
    return tables


def _trials_text(counted: int, figures: DelayFigures, trials: list[ProcedureTrial]) -> str:
    """"2 of 3" trials with figures, saying why where none has any (a simulated DUT times no query) and
    how many were tester-limited (left out)."""
    text = f"{counted} of {figures.repetitions}"
    if figures.tester_limited:
        text += f" ({figures.tester_limited} tester-limited, left out)"
    mine = [t for t in trials if point_of(t) == figures.point]
    if not counted and all(t.raw is None for t in mine):
        text += " (simulated DUT: no latency)"
    return text


def _percent(values: list[float | None] | None) -> str:
    """The median FLR of a step, %; "tester-limited" when the tester could offer none of its trials, with
    how many it could not beside a figure."""
    if not values:
        return "-"
    measured, limited = _measured(values), values.count(None)
    if not measured:
        return "tester-limited"
    return f"{100 * statistics.median(measured):.4f}" + (f" ({limited} tester-limited)" if limited else "")


def procedure_lines(trials: list[ProcedureTrial]) -> list[str]:
    """One console line per procedure of these trials (one point), with units and conditions."""
    lines = []
    for f in delay_figures(trials, "latency"):
        lines.append(f"RFC 8219 latency at {f.throughput_qps:,.0f} queries/s: typical "
                     f"{_with_unit(f.typical, f.bound)}, worst case {_with_unit(f.worst, f.bound)} over "
                     f"{len(f.typical_s)} trial(s) [{conditions(_first(trials, f.point))}; "
                     f"{f.implementation}]")
    for f in delay_figures(trials, "pdv"):
        lines.append(f"RFC 8219 PDV at {f.throughput_qps:,.0f} queries/s: {_with_unit(f.pdv, f.bound)} over "
                     f"{len(f.pdv_s)} trial(s) [{conditions(_first(trials, f.point))}; {f.implementation}]")
    for point, by in flr_steps(trials).items():
        first = _first(trials, point)
        steps = ", ".join(f"{100 * f:g} %: {_percent(v)} %" for f, v in sorted(by.items(), reverse=True))
        lines.append(f"frame loss rate at fractions of {first.throughput_qps:,.0f} queries/s: {steps} "
                     f"[{conditions(first)}; {first.context.tag}]")
    return lines


def procedure_figures(records: Iterable[Record], out_dir: Path) -> list[tuple[str, Path]]:
    """The FLR against the offered fraction of the throughput (one line per setup and core count), and the
    §7.2 latency and §7.3 PDV per configuration; (caption, file) pairs, none without data."""
    from .figures import flr_plot, procedure_delay_plot

    trials = procedure_trials(records)
    made = []
    steps = flr_steps(trials)
    if steps:
        medians = {_label(p, trials): {f: statistics.median(_measured(v))
                                       for f, v in by.items() if _measured(v)} for p, by in steps.items()}
        path = flr_plot(medians, out_dir / "flr.png")
        made.append(("Frame loss rate against the offered rate, fraction of the throughput (RFC 8219 §7.4)",
                     path))
    bars: dict[str, dict[str, Any]] = {}
    for procedure, what in (("latency", ("typical", "worst")), ("pdv", ("pdv",))):
        for f in delay_figures(trials, procedure):
            for name in what:
                value = getattr(f, name)
                if value is not None and not math.isinf(value):
                    bars.setdefault(_label(f.point, trials), {})[name] = value
    if bars:
        path = procedure_delay_plot(bars, out_dir / "procedures-latency.png")
        made.append(("RFC 8219 §7.2 typical and worst-case latency (tagged queries) and §7.3 PDV (whole "
                     "trials) at the throughput rate", path))
    return made


def _label(point: Point, trials: list[ProcedureTrial]) -> str:
    """A figure's name of a configuration, with what produced it."""
    tag = _first(trials, point).context.tag
    return f"{point.setup}, {point.cores} core(s), {point.sessions} sessions ({tag})"
