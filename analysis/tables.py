"""Throughput tables the way the paper prints them (Tables 1-3): one column per core count, rows for the
median, minimum and maximum of the repeated searches and the "current/previous" scale-up, plus, with 20 or
more repetitions, the 1st/99th percentiles and the dispersion the MAP-E paper reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cpulist import format_cpu_list
from ..data.records import method_label
from .bounded import INCOMPLETE, UPPER, Value, of_cell
from .series import Series, Throughput


@dataclass(frozen=True)
class Table:
    """A rendered table: a title that says what produced the numbers, a header row and body rows."""

    title: str
    header: list[str]
    rows: list[list[str]]

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.header) + " |",
                 "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)

    def text(self, indent: str = "  ") -> str:
        """Plain text for a console: columns separated by " | ", padded to line up."""
        lines = [self.header, *self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(self.header))]
        return "\n".join(indent + " | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
                         .rstrip() for line in lines)

    def csv_rows(self) -> list[list[str]]:
        return [[self.title], self.header, *self.rows]


def _qps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


# Marks a cell whose trials were measured by more than one suite commit, tester build or host.
MIXED = "‡"
PLACEMENT_CHANGED = "§"  # the DUTs' CPU placement differs from the column before


def cell_median_text(cell: Throughput, repetitions: int | None = None) -> str:
    text = median_text(cell)
    short = repetitions and cell.n < repetitions and cell.median is not None
    text = f"{text} {INCOMPLETE}" if short else text
    return f"{text} {MIXED}" if cell.mixed else text


def median_text(cell: Throughput) -> str:
    """A cell's median as the table prints it: a number, '≥ number', the tester limit, or the status."""
    if cell.status == "tester-limited":
        limit = _qps(cell.tester_limit_qps)
        return f"tester limit at {limit}"
    if cell.median is None:
        return cell.status
    text = _qps(cell.median)
    return f"≥ {text}" if cell.status == "upper-bound-not-failed" else text


def scale_up(medians: list[float | None]) -> list[str]:
    """'-' for the first column, then each median over the one before it (2 decimals)."""
    return scale_up_values([Value(m) for m in medians])


def scale_up_values(medians: list[Value]) -> list[str]:
    """scale_up of Values: a bound or a partial median carries into the ratio ('≥ 1.50', 'unknown', '†')."""
    pairs = zip(medians, medians[1:], strict=False)
    return ["-", *[current.over(previous).text() for previous, current in pairs]]


def series_label(series: Series) -> str:
    """The search method of a series, with its [[search]] table's name unless that is the default."""
    label = method_label(series.rfc8219_exact, series.method)
    return label if series.search in ("", "default") else f"{label}, search {series.search!r}"


def conditions_text(series: Series) -> str:
    c = series.conditions
    parts = []
    if c.get("loss_ratio") is not None:
        parts.append(f"loss ≤ {100 * c['loss_ratio']:g} %")
    if c.get("timeout_s") is not None:
        parts.append(f"timeout {c['timeout_s']:g} s")
    if c.get("trial_s") is not None:
        parts.append(f"{c['trial_s']:g} s trials")
    if c.get("rest_s") is not None:
        parts.append(f"{c['rest_s']:g} s rest")
    if c.get("repetitions") is not None:
        parts.append(f"{c['repetitions']} repetitions")
    return ", ".join(parts)


def throughput_table(series: Series, effort: bool = False) -> Table:
    """The paper's table for one setup and search method; effort adds the searches' trials and time (the
    campaign's console summary)."""
    cores = sorted(series.cells)
    cells = [series.cells[c] for c in cores]
    implementations = sorted({cell.implementation for cell in cells})
    title = (f"Throughput of {series.label} ({'; '.join(implementations)}), {series_label(series)}: "
             f"resolved queries/s ({conditions_text(series)})")
    repetitions = series.conditions.get("repetitions")
    rows = [
        ["Median (queries/s)", *[cell_median_text(cell, repetitions) for cell in cells]],
        ["Minimum (queries/s)", *[_qps(cell.minimum) for cell in cells]],
        ["Maximum (queries/s)", *[_qps(cell.maximum) for cell in cells]],
    ]
    if any(cell.dispersion is not None for cell in cells):
        rows += [
            ["1st percentile (queries/s)", *[_qps(cell.p1) for cell in cells]],
            ["99th percentile (queries/s)", *[_qps(cell.p99) for cell in cells]],
            ["Dispersion (p99 − p1)/median (%)",
             *["-" if cell.dispersion is None else f"{100 * cell.dispersion:.2f}" for cell in cells]],
        ]
    rows.append(["Searches with a result", *[_searches(cell, repetitions) for cell in cells]])
    ratios = scale_up_values([cell_value(series, c) for c in cores])
    moved = placement_changes(cells)
    rows.append(["Proportion: current/previous",
                 *[f"{text} {PLACEMENT_CHANGED}" if i in moved else text for i, text in enumerate(ratios)]])
    if moved:
        rows.append(["DUT CPU placement", *[cell.placement or "-" for cell in cells]])
        title += (f"; {PLACEMENT_CHANGED} = the DUTs' CPU placement changed from the column before (e.g. "
                  "each DUT its own CPUs, then both sharing them): that ratio compares different CPU budgets")
    if any(cell.shared_cpus for cell in cells):
        rows.append(["DUT CPUs also running the tester/Knot",
                     *[format_cpu_list(cell.shared_cpus) or "none" for cell in cells]])
        title += "; where a DUT CPU also ran the tester or Knot, 'DUT cores' are not the DUTs' alone"
    if any(INCOMPLETE in text for text in rows[0][1:]):
        title += (f"; {INCOMPLETE} = not every search gave a number: the median is over fewer, and so is "
                  "every ratio from it")
    if any(cell.mixed for cell in cells):
        title += (f"; {MIXED} = its trials were measured by more than one suite commit, tester build or host "
                  "(a resume with --allow-mixed)")
    if any(text.startswith("≥") for text in rows[0][1:]):
        title += "; ≥ = a search never failed: a lower bound, a ratio from it a bound ('unknown' if both are)"
    if effort:
        rows += _effort_rows(cells)
    return Table(title, ["Number of active DUT cores", *[str(c) for c in cores]], rows)


def placement_changes(cells: list[Throughput]) -> set[int]:
    """Columns (by index) whose recorded DUT placement differs from the column before: their scale-up ratio
    compares different CPU budgets (per-dut: N CPUs per DUT; shared-duts: N CPUs for both)."""
    return {i for i in range(1, len(cells))
            if None not in (cells[i].placement, cells[i - 1].placement)
            and cells[i].placement != cells[i - 1].placement}


def _effort_rows(cells: list[Throughput]) -> list[list[str]]:
    return [["Status", *[cell.status for cell in cells]],
            ["Trials", *[str(cell.trials) for cell in cells]],
            ["Search time with rests (s)", *[f"{cell.elapsed_s:.0f}" for cell in cells]]]


def _searches(cell: Throughput, repetitions: int | None) -> str:
    return f"{cell.n} of {repetitions}" if repetitions else str(cell.n)


# A result above this share of a reference measured in the same run may be the reference's limit rather
# than the DUTs': of the tester's loopback self-test (the MAP-E paper uses a tester only up to 90-95 % of its
# self-tested capacity), or of the baseline chain, whose forwarding DUTs leave the test system as the limit.
CEILING_SHARE = 0.9


def comparison_tables(all_series: list[Series]) -> list[Table]:
    """One side-by-side table per (method, [[search]] name) that has something to compare (MLRsearch's
    first-goal conditional throughputs in tables of their own, never beside RFC 8219 medians)."""
    groups = list(dict.fromkeys((s.rfc8219_exact, s.search, s.method) for s in all_series))
    tables = [comparison_table(all_series, exact, search, method) for exact, search, method in groups]
    return [t for t in tables if t is not None and len(t.rows) > 1]


def comparison_table(all_series: list[Series], method_exact: bool = True,
                     search: str | None = None, method: str | None = None) -> Table | None:
    """Medians of every setup side by side for one method and [[search]] table (the first of that method
    when None), each over the baseline and over the tester's loopback self-test measured in the same run,
    each at its own join key (analysis.joinkey): a session count is divided by the baseline and the
    self-test of that same session count.

    On a shared 2-core machine absolute rates are noisy; ratios within one run are the figures worth
    comparing, and the self-test ratio shows whether the suite could measure that high at all.
    """
    chosen = [s for s in all_series if s.rfc8219_exact == method_exact and method in (None, s.method)]
    if search is None and chosen:
        search = chosen[0].search
    chosen = [s for s in chosen if s.search == search]
    if not chosen:
        return None
    ceilings = [s for s in chosen if s.topology == "loopback"]
    chains = [s for s in chosen if s.topology != "loopback"]
    cores = sorted({c for s in chains for c in s.cells})
    rows = []
    for ceiling in ceilings:
        rows.append([f"{_loopback_name(ceiling)}, tester + Knot alone (queries/s)",
                     *[_ceiling_at(ceiling).text(0, thousands=True) for _ in cores]])
    for series in chains:
        repetitions = series.conditions.get("repetitions")
        rows.append([f"{series.label}: median (queries/s)", *[cell_median_text(series.cells[c], repetitions)
                                                              if c in series.cells else "-" for c in cores]])
        if series.topology != "baseline":
            baseline = [_median_at(_partner(chains, series, c, "baseline"), c) for c in cores]
            if any(value.number is not None for value in baseline):
                rows.append([f"{series.label} / baseline", *_ratios(series, cores, baseline)])
        loopback = [_ceiling_at(_partner(ceilings, series, c, "loopback")) for c in cores]
        if any(value.number is not None for value in loopback):
            rows.append([f"{series.label} / loopback self-test", *_ratios(series, cores, loopback)])
    title = (f"Medians side by side, {method_label(method_exact, chosen[0].method)}"
             + ("" if search in ("", "default") else f", search {search!r}")
             + ": resolved queries/s, and ratios within the same run, each at the same cores, tester "
             f"sessions and search (! = above {CEILING_SHARE:.0%} of the reference: the tester, Knot or the "
             "test system may be the limit, not the translators)")
    return Table(title, ["Number of active DUT cores", *[str(c) for c in cores]], rows)


def _ratios(series: Series, cores: list[int], references: list[Value]) -> list[str]:
    """The series' median at each core count over the reference at that count."""
    return [_share(_median_at(series, c), ref) for c, ref in zip(cores, references, strict=True)]


def _loopback_name(series: Series) -> str:
    return "loopback self-test" if series.sessions is None else \
        f"loopback self-test, {series.sessions} tester sessions"


def _partner(candidates: list[Series], series: Series, cores: int, topology: str) -> Series | None:
    """The series of `topology` whose key at `cores` is this series' key but for the setup (the loopback
    self-test, which has no DUT cores, matches at any core count)."""
    for other in candidates:
        if other.topology != topology:
            continue
        at = cores if topology != "loopback" else (min(other.cells) if other.cells else cores)
        if other.key(at) == series.key(at).with_setup(other.setup):
            return other
    return None


def _ceiling_at(series: Series | None) -> Value:
    return Value(None) if series is None or not series.cells else _median_at(series, min(series.cells))


def _share(value: Value, reference: Value) -> str:
    """value / reference as a Value's text, '!' when it may be above CEILING_SHARE of the reference."""
    share = value.over(reference)
    near = share.number is not None and share.number > CEILING_SHARE and share.side != UPPER
    return share.text() + (" !" if near else "")


def cell_value(series: Series, cores: int) -> Value:
    """The median of a series' cell as a Value (exact, lower bound, partial; no number without a cell)."""
    cell = series.cells.get(cores)
    if cell is None:
        return Value(None)
    return of_cell(cell.status, cell.median, cell.n, series.conditions.get("repetitions"))


def _median_at(series: Series | None, cores: int) -> Value:
    return Value(None) if series is None else cell_value(series, cores)
