"""Figures the report adds to the paper's: per-DUT CPU idle time (like the paper's Figures 8-17, one figure
per DUT: in emulation per DUT CPU set) and latency at the throughput rate. Every figure says what produced it.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: the suite runs headless

import matplotlib.pyplot as plt  # noqa: E402

from .bounded import rate_text  # noqa: E402
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
        rate = rate_text(evidence.rate_qps, evidence.rate_lower_bound, evidence.rate_partial)
        caption = (f"{where} of {evidence.setup}, {evidence.cores} DUT core(s), at {rate} "
                   f"queries/s: CPU idle time, mean of {evidence.runs} run(s){_sharing_note(evidence, dut)}")
        title = "\n".join(textwrap.wrap(caption, 90))
        ax.set_title(title + "\n" + textwrap.shorten(evidence.implementation, 100),
                     fontsize=8)
        path = save_figure(fig, out_dir / f"idle-{evidence.setup}-cores{evidence.cores}-{dut}.png", dpi=100)
        made.append((caption, path))
    return made


def _bar_ms(seconds: float | None, timeout_s: float | None) -> float:
    """A latency as a bar height, ms: an infinite one (late or lost queries) at the timeout (1 s unknown)."""
    if seconds is None:
        return 0.0
    return 1000 * ((timeout_s or 1.0) if math.isinf(seconds) else seconds)


def latency_plot(latencies: list[Latency], path: Path) -> Path | None:
    """Typical and worst-case latency per configuration, ms, log scale."""
    shown = [lat for lat in latencies if lat.typical_s is not None]
    if not shown:
        return None
    labels = [f"{lat.setup}\n{lat.cores} core(s)\n{lat.sessions} sessions" for lat in shown]
    x = range(len(shown))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(shown) + 2), 3.6))
    typical = [_bar_ms(lat.typical_s, lat.timeout_s) for lat in shown]
    worst = [_bar_ms(lat.worst_s, lat.timeout_s) for lat in shown]
    ax.bar([i - 0.2 for i in x], typical, 0.4, label="typical (median of per-trial medians)")
    ax.bar([i + 0.2 for i in x], worst, 0.4,
           label="worst case (median of per-trial 99.9th percentiles); > timeout: hatched")
    for i, lat in enumerate(shown):  # an infinite percentile (late or lost queries) drawn at the timeout
        for offset, value, height in ((-0.2, lat.typical_s, typical[i]), (0.2, lat.worst_s, worst[i])):
            if value is not None and math.isinf(value):
                ax.bar(i + offset, height, 0.4, fill=False, hatch="//")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_yscale("log")
    top = max(max(worst), max(typical))
    bottom = min(v for v in typical if v > 0) if any(v > 0 for v in typical) else top
    ax.set_ylim(bottom / 4, top * 30)  # every bar visible, room for the legend above them
    ax.set_ylabel("latency (ms, log scale)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    trials = sorted({lat.trials for lat in shown})
    counts = "/".join(map(str, trials))
    ax.set_title(f"Idle-capture latency at the median throughput rate ({counts} run(s) each, xlatperf)",
                 fontsize=9)
    return save_figure(fig, path, dpi=100)


def flr_plot(lines: dict[str, dict[float, float]], path: Path) -> Path:
    """Frame loss rate (%, median over the repetitions) against the offered rate as a fraction of the
    throughput (%), one line per configuration (RFC 8219 §7.4)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, by in lines.items():
        fractions = sorted(by)
        ax.plot([100 * f for f in fractions], [100 * by[f] for f in fractions], marker="o", label=label)
    ax.set_xlabel("offered rate (% of the median throughput)")
    ax.set_ylabel("frame loss rate (%)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Frame loss rate at stepped rates (RFC 8219 §7.4, RFC 2544 §26.3; xlatperf)", fontsize=9)
    return save_figure(fig, path, dpi=100)


def procedure_delay_plot(bars: dict[str, dict[str, float]], path: Path) -> Path:
    """RFC 8219 §7.2 typical and worst-case latency and §7.3 PDV per configuration, ms, log scale; bars:
    {configuration: {"typical" | "worst" | "pdv": seconds}} (finite values only)."""
    names = (("typical", "typical latency (§7.2)"), ("worst", "worst-case latency (§7.2)"),
             ("pdv", "PDV (§7.3)"))
    labels = list(bars)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(labels) + 2), 3.8))
    for offset, (name, legend) in zip((-0.25, 0.0, 0.25), names, strict=True):
        heights = [1000 * bars[label].get(name, math.nan) for label in labels]
        ax.bar([i + offset for i in range(len(labels))], heights, 0.25, label=legend)
    ax.set_xlim(-0.7, len(labels) - 0.3)
    ax.set_xticks(list(range(len(labels))), ["\n".join(textwrap.wrap(label, 30)) for label in labels],
                  fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Latency (tagged queries) and PDV (whole trials) at the throughput rate, round trip\n"
                 "(medians over the trials; xlatperf)", fontsize=8)
    return save_figure(fig, path, dpi=100)
