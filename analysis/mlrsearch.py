"""The RFC 9971 (MLRsearch) figures of a store, in their own tables: per setup and [[search]] table, one row
per search goal with the median, minimum and maximum conditional throughput over the repetitions, per core
count. They come from the search records' `goals` (scripts/search/mlrsearch.py) and are never mixed into the
RFC 8219 binary search's medians: a conditional throughput is defined by its goal (goal loss ratio, goal
exceed ratio, goal final trial duration, goal duration sum), not by RFC 8219's criterion.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..data.records import Record, SearchEntry
from .tables import Table

MLRSEARCH = "mlrsearch"


def goal_text(goal: dict[str, Any]) -> str:
    """A goal in RFC 9971's terms, short enough for a table's first column."""
    return (f"goal {goal['name']!r}: goal loss ratio {100 * goal['loss_ratio']:g} %, exceed ratio "
            f"{100 * goal['exceed_ratio']:g} %, final trial {goal['final_trial_duration_s']:g} s, "
            f"duration sum {goal['duration_sum_s']:g} s")


def _cell(values: list[float | None], statuses: list[str]) -> str:
    numbers = [v for v in values if v is not None]
    if not numbers:
        return ", ".join(sorted(set(statuses))) or "-"
    text = (f"{statistics.median(numbers):,.0f} ({min(numbers):,.0f}–{max(numbers):,.0f})"
            if len(numbers) > 1 else f"{numbers[0]:,.0f}")
    if "upper-bound-not-failed" in statuses:
        text = f"≥ {text}"
    return text if len(numbers) == len(values) else f"{text} [{len(numbers)} of {len(values)}]"


def mlrsearch_tables(records: Iterable[Record]) -> list[Table]:
    """One table per (setup, [[search]] name, swept session count) with mlrsearch searches."""
    # (setup, search name, sessions) -> cores -> goal name -> [(conditional throughput, status)]
    grouped: dict[tuple[str, str, int | None], dict[int, dict[str, list[tuple[float | None, str]]]]] = \
        defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    goals: dict[tuple[str, str, int | None], dict[str, dict[str, Any]]] = defaultdict(dict)
    implementations: dict[tuple[str, str, int | None], set[str]] = defaultdict(set)
    for record in records:
        if not isinstance(record, SearchEntry) or record.outcome.get("method") != MLRSEARCH:
            continue
        context = record.context
        key = (context.setup_name, record.settings_name, context.sessions if context.swept else None)
        implementations[key].add(context.implementation)
        for result in record.outcome.get("goals", ()):
            goals[key].setdefault(result["name"], result["goal"])
            grouped[key][context.cores][result["name"]].append(
                (result["conditional_throughput_qps"], result["status"]))
    tables = []
    for key, by_cores in grouped.items():
        setup, search, sessions = key
        cores = sorted(by_cores)
        where = setup if sessions is None else f"{setup}, {sessions} tester sessions"
        named = "" if search in ("", "default") else f", search {search!r}"
        made_by = "; ".join(sorted(implementations[key]))
        title = (f"Conditional throughput (RFC 9971, MLRsearch) of {where} ({made_by}){named}: "
                 "median (min–max) over the repetitions, queries/s; not RFC 8219 figures")
        rows = []
        for name, goal in goals[key].items():
            cells = []
            for c in cores:
                pairs = by_cores[c].get(name, [])
                cells.append(_cell([v for v, _ in pairs], [s for _, s in pairs]))
            rows.append([goal_text(goal), *cells])
        tables.append(Table(title, ["Search goal", *[f"{c} DUT core(s)" for c in cores]], rows))
    return tables
