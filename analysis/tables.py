"""Throughput tables the way the paper prints them (Tables 1-3): one column per core count, rows for the
median, minimum and maximum of the repeated searches and the "current/previous" scale-up, plus, with 20 or
more repetitions, the 1st/99th percentiles and the dispersion the MAP-E paper reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scripts.records import method_label
from ..setups.cpulist import format_cpu_list
from .records import Series, Throughput


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


# Marks a median that fewer searches than were run gave (the others found no number).
INCOMPLETE = "†"


def _cell_median(cell: Throughput, repetitions: int | None = None) -> str:
    text = median_text(cell)
    short = repetitions and cell.n < repetitions and cell.median is not None
    return f"{text} {INCOMPLETE}" if short else text


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
    out = ["-"]
    for previous, current in zip(medians, medians[1:], strict=False):
        out.append("-" if previous in (None, 0) or current is None else f"{current / previous:.2f}")
    return out


def series_label(series: Series) -> str:
    """The search method of a series, with its [[search]] table's name unless that is the default."""
    label = method_label(series.rfc8219_exact)
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
        ["Median (queries/s)", *[_cell_median(cell, repetitions) for cell in cells]],
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
    rows.append(["Proportion: current/previous", *scale_up([_median(cell) for cell in cells])])
    if any(cell.shared_cpus for cell in cells):
        rows.append(["DUT CPUs also running the tester/Knot",
                     *[format_cpu_list(cell.shared_cpus) or "none" for cell in cells]])
        title += "; where a DUT CPU also ran the tester or Knot, 'DUT cores' are not the DUTs' alone"
    if any(INCOMPLETE in text for text in rows[0][1:]):
        title += f"; {INCOMPLETE} = not every search gave a number: the median is over fewer"
    if effort:
        rows += _effort_rows(cells)
    return Table(title, ["Number of active DUT cores", *[str(c) for c in cores]], rows)


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


def comparison_table(all_series: list[Series], method_exact: bool = True) -> Table | None:
    """Medians of every setup side by side, each over the baseline and over the tester's loopback
    self-test measured in the same run.

    On a shared 2-core machine absolute rates are noisy; ratios within one run are the figures worth
    comparing, and the self-test ratio shows whether the suite could measure that high at all.
    """
    chosen = [s for s in all_series if s.rfc8219_exact == method_exact]
    if not chosen:
        return None
    ceiling_series = next((s for s in chosen if s.topology == "loopback"), None)
    ceiling = _median_at(ceiling_series, min(ceiling_series.cells)) if ceiling_series else None
    chains = [s for s in chosen if s is not ceiling_series]
    cores = sorted({c for s in chains for c in s.cells})
    rows = []
    if ceiling is not None:
        rows.append(["loopback self-test, tester + Knot alone (queries/s)", *[_qps(ceiling) for _ in cores]])
    several = len({s.search for s in chains}) > 1
    for series in chains:
        name = f"{series.label} [{series.search}]" if several else series.label
        repetitions = series.conditions.get("repetitions")
        rows.append([f"{name}: median (queries/s)", *[_cell_median(series.cells[c], repetitions)
                                                      if c in series.cells else "-" for c in cores]])
        baseline = next((s for s in chains if s.topology == "baseline" and s.search == series.search), None)
        if baseline is not None and series is not baseline:
            rows.append([f"{name} / baseline",
                         *[_share(_median_at(series, c), _median_at(baseline, c)) for c in cores]])
        if ceiling:
            rows.append([f"{name} / loopback self-test",
                         *[_share(_median_at(series, c), ceiling) for c in cores]])
    title = (f"Medians side by side, {method_label(method_exact)}: resolved queries/s, and ratios within "
             f"the same run (! = above {CEILING_SHARE:.0%} of the reference: the tester, Knot or the test "
             "system may be the limit, not the translators)")
    return Table(title, ["Number of active DUT cores", *[str(c) for c in cores]], rows)


def _share(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "-"
    share = value / reference
    return f"{share:.2f}" + (" !" if share > CEILING_SHARE else "")


def _median(cell: Throughput) -> float | None:
    return cell.median if cell.status in ("ok", "upper-bound-not-failed") else None


def _median_at(series: Series | None, cores: int) -> float | None:
    cell = series.cells.get(cores) if series is not None else None
    return None if cell is None else _median(cell)
