"""Figures the report adds to the paper's: per-DUT CPU idle time (like the paper's Figures 8-17, one figure
per DUT: in emulation per DUT CPU set) and latency at the throughput rate. Every figure says what produced it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: the suite runs headless

import matplotlib.pyplot as plt  # noqa: E402

from .evidence import Evidence, Latency  # noqa: E402
from .plots import idle_lines, save_figure  # noqa: E402


def _sharing_note(evidence: Evidence, dut: str) -> str:
    if evidence.separate_hosts:
        return ""  # CPU numbers of different hosts: nothing is shared
    mine = set(evidence.dut_cpus[dut])
    notes = []
    others = [d for d, cpus in evidence.dut_cpus.items() if d != dut and mine & set(cpus)]
    if others:
        notes.append(f"shared with {', '.join(others)}")
    if mine & set(evidence.test_cpus):
        notes.append("shared with the tester/Knot")
    return f" ({'; '.join(notes)}: not this DUT's alone)" if notes else ""


def idle_per_dut(evidence: Evidence, out_dir: Path) -> list[tuple[str, Path]]:
    """One figure per DUT: idle time of each of its CPUs, second by second, averaged over the capture runs.
    Returns (caption, file) pairs; none when the store has no per-DUT placement or no samples."""
    made = []
    for dut, cpus in sorted(evidence.dut_cpus.items()):
        seconds = evidence.dut_per_second.get(dut) or []
        if not any(s["cpus"].get(str(cpu), {}).get("idle") is not None for s in seconds for cpu in cpus):
            continue
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        idle_lines(ax, evidence, [str(cpu) for cpu in cpus], seconds)
        where = f"DUT host {dut}, its active cores" if evidence.separate_hosts else dut
        caption = (f"{where} of {evidence.setup}, {evidence.cores} DUT core(s), at {evidence.rate_qps:,.0f} "
                   f"queries/s: CPU idle time, mean of {evidence.runs} run(s){_sharing_note(evidence, dut)}")
        title = "\n".join(textwrap.wrap(caption, 90))
        ax.set_title(title + "\n" + textwrap.shorten(evidence.implementation, 100),
                     fontsize=8)
        path = save_figure(fig, out_dir / f"idle-{evidence.setup}-cores{evidence.cores}-{dut}.png", dpi=100)
        made.append((caption, path))
    return made


def latency_plot(latencies: list[Latency], path: Path) -> Path | None:
    """Typical and worst-case latency per configuration, ms, log scale."""
    shown = [lat for lat in latencies if lat.typical_s is not None]
    if not shown:
        return None
    labels = [f"{lat.setup}\n{lat.cores} core(s)" for lat in shown]
    x = range(len(shown))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(shown) + 2), 3.6))
    ax.bar([i - 0.2 for i in x], [1000 * (lat.typical_s or 0) for lat in shown], 0.4,
           label="typical (median of per-trial medians)")
    ax.bar([i + 0.2 for i in x], [1000 * (lat.worst_s or 0) for lat in shown], 0.4,
           label="worst case (median of per-trial 99.9th percentiles)")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_yscale("log")
    top = max(1000 * (lat.worst_s or lat.typical_s or 0) for lat in shown)
    bottom = min(1000 * (lat.typical_s or top) for lat in shown)
    ax.set_ylim(bottom / 4, top * 30)  # every bar visible, room for the legend above them
    ax.set_ylabel("latency (ms, log scale)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    trials = sorted({lat.trials for lat in shown})
    counts = "/".join(map(str, trials))
    ax.set_title(f"Latency at the median throughput rate ({counts} trial(s) each, xlatperf)",
                 fontsize=9)
    return save_figure(fig, path, dpi=100)
