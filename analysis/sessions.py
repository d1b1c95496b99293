"""Throughput against the tester's sessions (distinct flows), per setup and core count: draft-lencse's
degradation test as a table and a figure. Only series of a campaign that swept [campaign] sessions count.
Each table also says, per session count, from the point's trial records: how the tester sent (sockets or
AF_XDP), the most conntrack entries a DUT's namespace held after a trial (a stateful translator's own count),
the tester's matching memory, and the loss that matters: at each search's throughput (its highest passing
trial) and in its failing trial just above it -- not the overload trials a binary search starts with, whose
loss says only that the rate was far too high.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: the suite runs headless

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from ..data.records import TrialEntry  # noqa: E402
from .bounded import of_cell  # noqa: E402
from .plots import save_figure, throughput_axes  # noqa: E402
from .series import Series, Throughput  # noqa: E402
from .tables import Table, cell_median_text, conditions_text, series_label  # noqa: E402

# (setup, method, [[search]] name) -> cores -> sessions -> cell
Sweep = dict[tuple[str, str, str], dict[int, dict[int, Throughput]]]


def _sweep_of(series: Series) -> tuple[str, str, str]:
    """The join key (analysis.joinkey) without cores and sessions: what one sessions table holds fixed."""
    key = series.key(0)
    return key.setup, key.method, key.search


def sweeps(all_series: list[Series]) -> Sweep:
    """The swept series regrouped: per (setup, method, search) and core count, the cell of each session
    count."""
    grouped: Sweep = defaultdict(lambda: defaultdict(dict))
    for series in all_series:
        if series.sessions is None:
            continue
        for cores, cell in series.cells.items():
            grouped[_sweep_of(series)][cores][series.sessions] = cell
    return grouped


@dataclass
class PointTrials:
    """What the trials of one sweep point say beside its throughput. io: the tester's io ("socket",
    "xdp"); conntrack: the most conntrack entries one DUT namespace held right after a trial (None: not
    recorded); matching_bytes: the largest flow-table memory xlatperf reported (io.matching.total_bytes;
    None with sockets); loss_at: the highest loss ratio of a search's trial at its throughput (the highest
    rate that passed), over the point's repetitions; loss_above: the median over the repetitions of the loss
    ratio of the failed trial just above the throughput (None: no trial failed above it)."""

    io: str = "socket"
    conntrack: int | None = None
    matching_bytes: int | None = None
    loss_at: float | None = None
    loss_above: float | None = None


def _losses(trials: list[TrialEntry]) -> tuple[float | None, float | None]:
    """One search's (loss at its throughput, loss of the failed trial just above it), ratios."""
    passed = [t for t in trials if t.verdict == "pass"]
    if not passed:
        return None, None
    best = max(passed, key=lambda t: float(t.result["rate_qps"]))
    rate = float(best.result["rate_qps"])
    above = [t for t in trials if t.verdict == "fail" and float(t.result["rate_qps"]) > rate]
    nearest = min(above, key=lambda t: float(t.result["rate_qps"]), default=None)
    loss = float(best.result.get("loss_ratio", 0.0))
    return loss, None if nearest is None else float(nearest.result.get("loss_ratio", 0.0))


# (setup, method, [[search]] name, cores, sessions) -> what its trials say
PointKey = tuple[str, str, str, int, int]


def point_trials(records: list[Any]) -> dict[PointKey, PointTrials]:
    """Per swept point, what its trial records say (PointTrials)."""
    points: dict[PointKey, PointTrials] = {}
    searches: dict[PointKey, dict[str, list[TrialEntry]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        if not isinstance(record, TrialEntry) or not record.context.swept:
            continue
        key = (record.context.setup_name, record.search.method, record.search.settings_name,
               record.context.cores, record.context.sessions)
        point = points.setdefault(key, PointTrials(
            io=str(record.context.tester.get("options", {}).get("io", "socket"))))
        entries = ((record.result.get("dut_stats") or {}).get("conntrack_entries") or {}).values()
        if entries:
            point.conntrack = max(point.conntrack or 0, *(int(n) for n in entries))
        matching = ((record.raw or {}).get("io") or {}).get("matching") or {}
        if "total_bytes" in matching:
            point.matching_bytes = max(point.matching_bytes or 0, int(matching["total_bytes"]))
        searches[key][record.search.id].append(record)
    for key, by_search in searches.items():
        found = [_losses(trials) for trials in by_search.values()]
        at = [a for a, _ in found if a is not None]
        above = [b for _, b in found if b is not None]
        points[key].loss_at = max(at) if at else None
        points[key].loss_above = statistics.median(above) if above else None
    return points


def sessions_tables(all_series: list[Series], records: list[Any] | None = None) -> list[Table]:
    """One table per (setup, method, [[search]] name, cores) measured at two or more session counts;
    `records` (the store's) add the rows of point_trials."""
    by_name = {_sweep_of(s): s for s in all_series if s.sessions is not None}
    points = point_trials(records or [])
    tables = []
    for name, per_cores in sweeps(all_series).items():
        series = by_name[name]
        for cores, cells in sorted(per_cores.items()):
            if len(cells) > 1:
                tables.append(_table(series, cores, cells, {n: points.get((*name, cores, n)) for n in cells}))
    return tables


def _trial_rows(counts: list[int], points: dict[int, PointTrials | None]) -> list[list[str]]:
    """The rows of point_trials, only those some point recorded."""
    found = [points[n] for n in counts]
    if not any(found):
        return []
    rows = [["Tester io", *["-" if p is None else "AF_XDP" if p.io == "xdp" else "sockets" for p in found]]]
    if any(p and p.conntrack is not None for p in found):
        rows.append(["Conntrack entries after a trial (DUT's own count, most)",
                     *["-" if p is None or p.conntrack is None else f"{p.conntrack:,}" for p in found]])
    if any(p and p.matching_bytes is not None for p in found):
        rows.append(["Tester matching memory (bytes, most)", *[
            "-" if p is None or p.matching_bytes is None else f"{p.matching_bytes:,}" for p in found]])
    rows.append(["Loss at the throughput (%, its passing trial; worst repetition)",
                 *["-" if p is None or p.loss_at is None else f"{100 * p.loss_at:.4g}" for p in found]])
    rows.append(["Loss just above the throughput (%, the failed trial nearest above it; median of "
                 "repetitions)",
                 *["-" if p is None or p.loss_above is None else f"{100 * p.loss_above:.4g}" for p in found]])
    return rows


def _table(series: Series, cores: int, cells: dict[int, Throughput],
           points: dict[int, PointTrials | None] | None = None) -> Table:
    counts = sorted(cells)
    repetitions = series.conditions.get("repetitions")
    values = {n: of_cell(cell.status, cell.median, cell.n, repetitions) for n, cell in cells.items()}
    implementations = sorted({cell.implementation for cell in cells.values()})
    title = (f"Throughput of {series.setup} against tester sessions ({'; '.join(implementations)}), "
             f"{cores} DUT core(s), {series_label(series)}: resolved queries/s "
             f"({conditions_text(series)})")
    ratio = [values[n].over(values[counts[0]]).text() for n in counts]
    rows = [
        ["Median (queries/s)", *[cell_median_text(cells[n], repetitions) for n in counts]],
        ["Minimum (queries/s)", *["-" if cells[n].minimum is None else f"{cells[n].minimum:,.0f}"
                                  for n in counts]],
        ["Maximum (queries/s)", *["-" if cells[n].maximum is None else f"{cells[n].maximum:,.0f}"
                                  for n in counts]],
        [f"Proportion to {counts[0]} session(s)", *ratio],
        *_trial_rows(counts, points or dict.fromkeys(counts)),
    ]
    return Table(title, ["Tester sessions (source address x port)", *[str(n) for n in counts]], rows)


def throughput_vs_sessions(all_series: list[Series], path: Path) -> Path | None:
    """Median throughput against sessions (log2 axis), min-max bars, one line per setup, method and cores."""
    lines = [(key, cores, cells) for key, per_cores in sweeps(all_series).items()
             for cores, cells in sorted(per_cores.items())
             if sum(cell.median is not None for cell in cells.values()) > 1]
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for (setup, method, search), cores, cells in lines:
        points = [(n, cell) for n, cell in sorted(cells.items()) if cell.median is not None]
        ax.errorbar([n for n, _ in points], [c.median for _, c in points],
                    yerr=[[c.median - (c.minimum or c.median) for _, c in points],
                          [(c.maximum or c.median) - c.median for _, c in points]],
                    fmt="-o", capsize=4, label=f"{setup}, {cores} core(s), {method}"
                    + ("" if search in ("", "default") else f", search {search!r}"))
    throughput_axes(ax, sorted({n for _, _, cells in lines for n in cells}),
                    "tester sessions (distinct source address x port flows)")
    swept = [s for s in all_series if s.sessions is not None]
    implementations = sorted({c.implementation for s in swept for c in s.cells.values()})
    ax.set_title(f"Throughput vs tester sessions: median, min-max bars\n{conditions_text(swept[0])}\n"
                 f"{'; '.join(implementations)[:150]}", fontsize=8)
    return save_figure(fig, path)
