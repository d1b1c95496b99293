"""The RFC 9971 (MLRsearch) figures of a store, in their own tables: per setup, [[search]] table and swept
session count, one row per search goal with the median, minimum and maximum conditional throughput over the
repetitions, per core count, and the rows the RFC 8219 tables carry (searches with a result, tester limit,
scale-up). They are never mixed into the RFC 8219 binary search's medians: a conditional throughput is
defined by its goal (goal loss ratio, exceed ratio, width, initial and final trial durations, duration sum)
and the tester's timeout, all stated in the table.

The first goal's cell is the series' summary cell (analysis.series), printed by the same value and mark path
as an RFC 8219 cell (tables.cell_median_text: `n of R`, †, ‡, ≥, the tester limit); the other goals' cells
come from the search records' `goals` (scripts/search/mlrsearch.py), with † when fewer repetitions than the
campaign's gave that goal a number.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..data.records import Record, SearchEntry
from .bounded import INCOMPLETE
from .series import Series, Throughput
from .tables import (
    MIXED,
    Table,
    cell_median_text,
    cell_value,
    conditions_text,
    scale_up_values,
)

MLRSEARCH = "mlrsearch"

# (setup, search name, flows) -> cores -> goal name -> [(conditional throughput, status)]
GoalCells = dict[tuple[str, str, int], dict[int, dict[str, list[tuple[float | None, str]]]]]


def goal_text(goal: dict[str, Any]) -> str:
    """A goal in RFC 9971's terms, short enough for a table's first column."""
    text = (f"goal {goal['name']!r}: goal loss ratio {100 * goal['loss_ratio']:g} %, exceed ratio "
            f"{100 * goal['exceed_ratio']:g} %")
    if "relative_width" in goal:
        text += f", width {100 * goal['relative_width']:g} %"
    if "initial_trial_duration_s" in goal:
        text += f", trials {goal['initial_trial_duration_s']:g} s"
        if goal.get("preceding_targets", 1) and goal["initial_trial_duration_s"] < \
                goal["final_trial_duration_s"]:
            text += f" then {goal['final_trial_duration_s']:g} s"
    else:
        text += f", final trial {goal['final_trial_duration_s']:g} s"
    return text + f", duration sum {goal['duration_sum_s']:g} s"


def _cell(values: list[float | None], statuses: list[str], repetitions: int | None) -> str:
    numbers = [v for v in values if v is not None]
    if not numbers:
        return ", ".join(sorted(set(statuses))) or "-"
    text = (f"{statistics.median(numbers):,.0f} ({min(numbers):,.0f}–{max(numbers):,.0f})"
            if len(numbers) > 1 else f"{numbers[0]:,.0f}")
    if "upper-bound-not-failed" in statuses:
        text = f"≥ {text}"
    expected = max(len(values), repetitions or 0)
    return text if len(numbers) == expected else f"{text} {INCOMPLETE} [{len(numbers)} of {expected}]"


def _first_goal_cell(cell: Throughput, repetitions: int | None) -> str:
    """The series' own cell (first goal): the RFC 8219 path's median and marks, then its spread."""
    text = cell_median_text(cell, repetitions)
    if cell.minimum is not None and cell.maximum is not None and cell.n > 1:
        text += f" ({cell.minimum:,.0f}–{cell.maximum:,.0f})"
    return text


def goal_cells(records: Iterable[Record]) -> tuple[GoalCells, dict[tuple[str, str, int], dict[str, Any]]]:
    """Every goal's conditional throughputs and statuses, and every goal's definition, per series key."""
    grouped: GoalCells = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    goals: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for record in records:
        if not isinstance(record, SearchEntry) or record.outcome.get("method") != MLRSEARCH:
            continue
        context = record.context
        key = (context.setup_name, record.settings_name, context.sessions)
        for result in record.outcome.get("goals", ()):
            goals[key].setdefault(result["name"], result["goal"])
            grouped[key][context.cores][result["name"]].append(
                (result["conditional_throughput_qps"], result["status"]))
    return grouped, goals


def mlrsearch_table(series: Series, by_cores: dict[int, dict[str, list[tuple[float | None, str]]]],
                    goals: dict[str, dict[str, Any]]) -> Table:
    """The table of one MLRsearch series (module docstring)."""
    cores = sorted(series.cells)
    cells = [series.cells[c] for c in cores]
    repetitions = series.conditions.get("repetitions")
    named = "" if series.search in ("", "default") else f", search {series.search!r}"
    made_by = "; ".join(sorted({cell.implementation for cell in cells}))
    title = (f"Conditional throughput (RFC 9971, MLRsearch) of {series.label} ({made_by}){named}: median "
             f"(min–max) over the repetitions, queries/s; not RFC 8219 figures ({conditions_text(series)})")
    rows = []
    for i, (name, goal) in enumerate(goals.items()):
        if i == 0:
            texts = [_first_goal_cell(cell, repetitions) for cell in cells]
        else:
            texts = []
            for c in cores:
                pairs = by_cores.get(c, {}).get(name, [])
                texts.append(_cell([v for v, _ in pairs], [s for _, s in pairs], repetitions))
        rows.append([goal_text(goal), *texts])
    if not goals:
        rows.append(["first goal", *[_first_goal_cell(cell, repetitions) for cell in cells]])
    rows.append(["Searches with a result", *[f"{cell.n} of {repetitions}" if repetitions else str(cell.n)
                                            for cell in cells]])
    rows.append(["Tester limit (queries/s)", *["-" if cell.tester_limit_qps is None
                                              else f"{cell.tester_limit_qps:,.0f}" for cell in cells]])
    rows.append(["Proportion: current/previous (first goal)",
                 *scale_up_values([cell_value(series, c) for c in cores])])
    marks = " ".join(text for row in rows for text in row[1:])
    if INCOMPLETE in marks:
        title += (f"; {INCOMPLETE} = not every search gave a number: the median is over fewer, and so is "
                  "every ratio from it")
    if any(cell.mixed for cell in cells):
        title += (f"; {MIXED} = its trials were measured by more than one suite commit, tester build, host "
                  "or library version (a resume with --allow-mixed)")
    if "≥" in marks:
        title += "; ≥ = a search never failed: a lower bound"
    if any(cell.tester_limit_qps is not None for cell in cells):
        title += "; tester limit = the rate the tester reached when it could not send what was asked"
    return Table(title, ["Search goal", *[f"{c} DUT core(s)" for c in cores]], rows)


def mlrsearch_tables(all_series: list[Series], records: Iterable[Record]) -> list[Table]:
    """One table per MLRsearch series (setup, [[search]] name, swept session count)."""
    grouped, goals = goal_cells(records)
    tables = []
    for series in all_series:
        if series.method != MLRSEARCH:
            continue
        key = (series.setup, series.search, series.flows)
        tables.append(mlrsearch_table(series, grouped.get(key, {}), goals.get(key, {})))
    return tables
