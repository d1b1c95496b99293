"""Figures like the paper's: throughput against DUT cores (Figure 18) and per-core idle time during the
median-rate runs (Figures 8-17). Every figure's title and labels say what produced it and in which unit.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: the suite runs headless

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from .bounded import rate_text  # noqa: E402
from .evidence import Evidence  # noqa: E402
from .series import Series  # noqa: E402
from .tables import conditions_text  # noqa: E402


def _implementations(all_series: list[Series]) -> list[str]:
    """One line per setup: which implementation produced its points (the legend names only the setup)."""
    lines: dict[str, set[str]] = {}
    for series in all_series:
        lines.setdefault(series.setup, set()).update(
            cell.implementation for cell in series.cells.values() if cell.median is not None)
    out: list[str] = []
    for setup, impls in lines.items():
        text = "; ".join(sorted(impls))
        if not text.startswith(f"{setup}:"):
            text = f"{setup}: {text}"
        out += textwrap.wrap(text, 150, subsequent_indent="    ")
    return out


def throughput_vs_cores(all_series: list[Series], path: Path, title_suffix: str = "") -> Path | None:
    """Median throughput per core count, min-max as error bars, one line per setup and method."""
    plotted = False
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    setups = list(dict.fromkeys(series.setup for series in all_series))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for series in all_series:
        points = [(c, cell) for c, cell in sorted(series.cells.items()) if cell.median is not None]
        if not points:
            continue
        cores = [c for c, _ in points]
        medians = [cell.median for _, cell in points]
        # A summary with a median always has its minimum and maximum.
        below = [cell.median - cell.minimum for _, cell in points]
        above = [cell.maximum - cell.median for _, cell in points]
        style = "-o" if series.rfc8219_exact else ":^" if series.method == "mlrsearch" else "--s"
        short = "RFC 8219" if series.rfc8219_exact else (
            "MLRsearch, RFC 9971 conditional throughput" if series.method == "mlrsearch"
            else "fast search (retired), not RFC 8219 exact")
        colour = colours[setups.index(series.setup) % len(colours)]
        search = "" if series.search in ("", "default") else f", search {series.search!r}"
        ax.errorbar(cores, medians, yerr=[below, above], fmt=style, capsize=4, color=colour,
                    label=f"{series.label} ({short}{search})")
        plotted = True
    if not plotted:
        plt.close(fig)
        return None
    throughput_axes(ax, sorted({c for s in all_series for c in s.cells}), "active DUT cores")
    conditions = conditions_text(all_series[0]) if all_series else ""
    if any(cell.shared_cpus for series in all_series for cell in series.cells.values()):
        title_suffix += "\nDUT cores include CPUs that also ran the tester/Knot: not the DUTs' alone"
    ax.set_title(f"Throughput vs DUT cores: median, min-max bars\n{conditions}{title_suffix}", fontsize=9)
    produced_by = _implementations(all_series)
    fig.set_figheight(4.5 + 0.16 * len(produced_by))
    fig.text(0.01, 0.01, "\n".join(produced_by), fontsize=6.5, va="bottom", ha="left")
    return save_figure(fig, path, rect=(0, 0.04 * len(produced_by) / (1 + 0.035 * len(produced_by)), 1, 1))


def idle_lines(ax: Any, evidence: Evidence, cpus: list[str],
               per_second: list[dict[str, Any]] | None = None) -> None:
    """On ax: the idle time of each of these CPUs, second by second, averaged over the capture's runs (of
    `per_second`, a DUT host's own series, else the capture's machine)."""
    rows = evidence.per_second if per_second is None else per_second
    seconds = [s["second"] for s in rows]
    for cpu in cpus:
        idle = [s["cpus"].get(cpu, {}).get("idle") for s in rows]
        ax.plot(seconds, idle, marker=".", label=f"CPU {cpu}")
    ax.set_ylim(0, 100)
    ax.set_xlabel(f"time since trial start (s, {evidence.interval_s:g} s samples)")
    ax.set_ylabel("idle time (%)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def idle_per_core(capture: Evidence, path: Path) -> Path | None:
    """Idle time of each CPU, second by second, averaged over the capture's runs."""
    cpus = sorted({c for s in capture.per_second for c in s.get("cpus", {}) if c != "all"}, key=int)
    if not capture.per_second or not cpus:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4))
    idle_lines(ax, capture, cpus)
    where = ("whole machine: tester, Knot and both DUTs share these CPUs" if capture.emulated
             else "the campaign's own machine, not a DUT host: no per-DUT-host samples recorded")
    produced_by = textwrap.fill(capture.implementation, 110)
    rate = rate_text(capture.rate_qps, capture.rate_lower_bound, capture.rate_partial)
    ax.set_title(f"CPU idle time, {capture.setup}, {capture.cores} DUT core(s), {rate} "
                 f"queries/s, mean of {capture.runs} run(s)\n{produced_by}\n({where})", fontsize=8)
    return save_figure(fig, path)


def throughput_axes(ax: Any, ticks: list[int], xlabel: str) -> None:
    """A log2 x axis with `ticks`, throughput in resolved queries/s from 0 on y, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput (resolved queries/s)")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def save_figure(fig: Any, path: Path, dpi: int = 110,
                rect: tuple[float, float, float, float] = (0, 0, 1, 1)) -> Path:
    """Lay the figure out within `rect`, write it as PNG at `dpi` and free it; returns the path."""
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
