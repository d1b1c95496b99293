"""RFC 9693's four measurements from a store's `stateful-result` records (scripts.stateful runs them), in the
tables of draft-lencse-v6ops-transition-scalability: against CPU cores at one point (its Figures 2 and 8:
connection establishment rate and throughput over N connections with their relative scale-up), against the
number of connections at one core count (Figures 4, 5, 9, 10: the same plus the tear-down rate with the empty
table's deletion subtracted), and the table capacity search (Figure 6: C0, R0, CS, RS, CT, C).

Every table names the DUT implementation and role that produced it and the conditions (table size, hash
size, timeouts). Median, minimum and maximum are over the repetitions that gave a figure; "k of n" counts
them. Relative scale-up, as the draft defines it: (median at n cores / median at the first column's cores) /
(n / those cores)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from ..data.records import Record, StatefulResult
from .tables import Table

CONNECTION_RATE, THROUGHPUT, TEARDOWN, CAPACITY = ("connection-rate", "throughput-connections", "teardown",
                                                   "table-capacity")
METRICS = (CONNECTION_RATE, THROUGHPUT, TEARDOWN)  # the kinds of the cores and connections tables


@dataclass(frozen=True)
class Cell:
    """One (setup, cores, point): its results by procedure."""

    setup: str
    cores: int
    point: dict[str, object]
    results: dict[str, list[StatefulResult]]

    @property
    def name(self) -> str:
        return str(self.point["name"])

    def implementation(self) -> str:
        found = [r for rs in self.results.values() for r in rs]
        conditions = found[-1].conditions if found else {}
        return f"{conditions.get('implementation', '?')} ({conditions.get('role', '?')})"


def stateful_results(records: Iterable[Record]) -> list[StatefulResult]:
    """The store's stateful results, a later record of the same key replacing an earlier one."""
    found: dict[str, StatefulResult] = {}
    for record in records:
        if isinstance(record, StatefulResult):
            found[record.key] = record
    return list(found.values())


def cells_of(results: list[StatefulResult]) -> list[Cell]:
    cells: dict[tuple[str, int, str], Cell] = {}
    for r in results:
        key = (r.context.setup_name, r.context.cores, str(r.point["name"]))
        cell = cells.setdefault(key, Cell(key[0], key[1], r.point, {}))
        cell.results.setdefault(r.procedure, []).append(r)
    return sorted(cells.values(), key=lambda c: (c.setup, int(c.point["connections"]), c.name, c.cores))


def stateful_tables(records: Iterable[Record]) -> list[Table]:
    """The draft's tables of a store: per setup, against cores (each point measured at 2+ core counts),
    against connections (each core count; a cell no cores table shows gets one here), then capacity."""
    cells = cells_of(stateful_results(records))
    tables: list[Table] = []
    shown: set[tuple[str, int, str]] = set()
    for setup in dict.fromkeys(c.setup for c in cells):
        everything = [c for c in cells if c.setup == setup]
        mine = [c for c in everything if any(c.results.get(k) for k in METRICS)]
        for point in dict.fromkeys(c.name for c in mine):
            row = sorted((c for c in mine if c.name == point), key=lambda c: c.cores)
            if len(row) >= 2:
                tables.append(_metrics_table(row, against_cores=True))
                shown |= {(c.setup, c.cores, c.name) for c in row}
        for cores in sorted({c.cores for c in mine}):
            row = [c for c in mine if c.cores == cores]
            if len(row) >= 2 or any((c.setup, c.cores, c.name) not in shown for c in row):
                tables.append(_metrics_table(row, against_cores=False))
        tables += [_capacity_table(c) for c in everything if c.results.get(CAPACITY)]
    return tables


# -- the metrics tables -----------------------------------------------------------------------------------
def _metrics_table(cells: list[Cell], against_cores: bool) -> Table:
    first = cells[0]
    implementations = "; ".join(dict.fromkeys(c.implementation() for c in cells))
    if against_cores:
        title = (f"RFC 9693 against the number of CPU cores: {first.setup}, "
                 f"{int(first.point['connections']):,} connections, DUT implementation {implementations}")
    else:
        title = (f"RFC 9693 against the number of connections: {first.setup}, {first.cores} DUT core(s), DUT "
                 f"implementation {implementations}")
    header = ["", *[str(c.cores) if against_cores else _millions(int(c.point["connections"])) for c in cells]]
    rows = [
        ["num. CPU cores", *[str(c.cores) for c in cells]],
        ["source addresses", *[_int(c.point.get("source_addresses")) for c in cells]],
        ["source ports", *[_int(c.point.get("source_ports")) for c in cells]],
        ["num. conn.", *[_int(c.point["connections"]) for c in cells]],
        ["conntrack table size", *[_power(c.point.get("table_size")) for c in cells]],
        ["hash table size", *[_power(c.point.get("hash_size")) for c in cells]],
        ["c.t.s./num. conn.", *[_ratio(c.point.get("table_size"), c.point["connections"]) for c in cells]],
        ["num. conn./h.t.s.", *[_ratio(c.point["connections"], c.point.get("hash_size")) for c in cells]],
        ["timeouts (s)", *[_int(c.point.get("timeout_s")) for c in cells]],
    ]
    for procedure, short, unit in ((CONNECTION_RATE, "cps", "connections/s"), (THROUGHPUT, "throughput",
                                                                                 "queries/s")):
        if any(c.results.get(procedure) for c in cells):
            rows += _metric_rows(cells, procedure, short, unit, against_cores)
    if any(c.results.get(TEARDOWN) for c in cells):
        rows += _teardown_rows(cells)
    return Table(title, header, rows)


def _metric_rows(cells: list[Cell], procedure: str, short: str, unit: str,
                 against_cores: bool) -> list[list[str]]:
    stats = [_stats(c.results.get(procedure, [])) for c in cells]
    errors = [max((r.error for r in c.results.get(procedure, []) if r.error is not None), default=None)
              for c in cells]
    rows = [[f"{short}: num. experiments", *[s.count for s in stats]],
            [f"{short}: error ({unit})", *[_number(e) for e in errors]],
            [f"{short} median ({unit})", *[_number(s.median, s.bound) for s in stats]],
            [f"{short} min ({unit})", *[_number(s.low) for s in stats]],
            [f"{short} max ({unit})", *[_number(s.high) for s in stats]]]
    if against_cores:
        scale = _scale_up([s.median for s in stats], [c.cores for c in cells])
        rows.append([f"{short} rel. scale up", *scale])
    return rows


def _teardown_rows(cells: list[Cell]) -> list[list[str]]:
    full = [[float(r.outcome["full_delete_s"]) for r in c.results.get(TEARDOWN, [])] for c in cells]
    empty = [[float(r.outcome["empty_delete_s"]) for r in c.results.get(TEARDOWN, [])] for c in cells]
    removed = [[int(r.outcome["removed"]) for r in c.results.get(TEARDOWN, [])] for c in cells]
    rows = [["tear-down: num. experiments", *[str(len(f)) if f else "-" for f in full]],
            ["full contr. del. median (s)", *[_seconds(_median(f)) for f in full]],
            ["full contr. del. min (s)", *[_seconds(min(f) if f else None) for f in full]],
            ["full contr. del. max (s)", *[_seconds(max(f) if f else None) for f in full]],
            ["empty contr. del. median (s)", *[_seconds(_median(e)) for e in empty]],
            ["empty contr. del. min (s)", *[_seconds(min(e) if e else None) for e in empty]],
            ["empty contr. del. max (s)", *[_seconds(max(e) if e else None) for e in empty]]]
    deletion = [None if not f or not e else _median(f) - _median(e) for f, e in zip(full, empty, strict=True)]
    rows.append(["conn. deletion time (s)", *[_seconds(d) for d in deletion]])
    rate = []
    for cell, spent, gone in zip(cells, deletion, removed, strict=True):
        n = int(cell.point["connections"])
        incomplete = any(g != n for g in gone)
        text = "-" if spent is None or spent <= 0 else f"{n / spent:,.0f}"
        rate.append(f"{text} (removed ≠ N)" if incomplete and text != "-" else text)
    rows.append(["conn. tear-down rate (connections/s)", *rate])
    return rows


# -- the capacity table (Figure 6) ------------------------------------------------------------------------
def _capacity_table(cell: Cell) -> Table:
    results = cell.results[CAPACITY]
    columns = (("C0", "c0"), ("R0", "r0"), ("CS", "cs"), ("RS", "rs"), ("CT", "ct"), ("C", "capacity"))
    values = {label: [float(r.outcome[key]) for r in results if r.outcome.get(key) is not None]
              for label, key in columns}
    spec = results[0].spec.get("capacity", {})
    found = [r for r in results if r.value is not None]
    title = (f"RFC 9693 connection tracking table capacity: {cell.setup}, {cell.cores} DUT core(s), table "
             f"size {_int(cell.point.get('table_size'))}, hash size {_int(cell.point.get('hash_size'))}, "
             f"{len(found)} of {len(results)} experiments with a result ({_statuses(results)}); alpha "
             f"{spec.get('alpha') or 'none (no validation)'}, beta {spec.get('beta')}, gamma "
             f"{spec.get('gamma')}, E {spec.get('error')}; R in connections/s, C in entries; DUT "
             f"implementation {cell.implementation()}")
    rows = [[what, *[_number(pick(v)) if v else "-" for v in values.values()]]
            for what, pick in (("median", _median), ("min", min), ("max", max))]
    return Table(title, ["", *values], rows)


# -- cells ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stats:
    count: str
    median: float | None
    low: float | None
    high: float | None
    bound: bool


def _stats(results: list[StatefulResult]) -> Stats:
    values = [float(r.value) for r in results if r.value is not None]
    bound = any(r.status == "upper-bound-not-failed" for r in results)
    if not results:
        return Stats("-", None, None, None, False)
    count = str(len(values)) if len(values) == len(results) else f"{len(values)} of {len(results)}"
    if not values:
        return Stats(count, None, None, None, False)
    return Stats(count, statistics.median(values), min(values), max(values), bound)


def _statuses(results: list[StatefulResult]) -> str:
    return ", ".join(f"{status}: {sum(r.status == status for r in results)}"
                     for status in dict.fromkeys(r.status for r in results))


def _scale_up(medians: list[float | None], cores: list[int]) -> list[str]:
    base, base_cores = medians[0], cores[0]
    out = []
    for median, count in zip(medians, cores, strict=True):
        if base is None or median is None or not base:
            out.append("-")
        else:
            out.append(f"{(median / base) / (count / base_cores):.3f}")
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _number(value: float | None, bound: bool = False) -> str:
    if value is None:
        return "-"
    return ("≥ " if bound else "") + f"{value:,.0f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3f}"


def _int(value: object) -> str:
    return "-" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


def _power(value: object) -> str:
    """2^k where it is one (the draft writes table sizes so), else the number."""
    if value is None:
        return "as found"
    number = int(value)  # type: ignore[call-overload]
    return f"2^{number.bit_length() - 1}" if number > 0 and number & (number - 1) == 0 else f"{number:,}"


def _ratio(top: object, bottom: object) -> str:
    if top is None or bottom is None or not bottom:
        return "-"
    return f"{int(top) / int(bottom):.3f}"  # type: ignore[call-overload]


def _millions(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n:,}"
