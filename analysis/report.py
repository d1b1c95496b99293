"""A campaign's report: the paper's tables, a comparison across setups, figures and bottleneck verdicts,
written as Markdown + CSV + JSON + PNG into one directory."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from . import plots
from .bottleneck import Verdict, verdict
from .records import Campaign, load_campaign
from .tables import Table, comparison_table, throughput_table


def tables_of(campaign: Campaign) -> list[Table]:
    tables = [throughput_table(series) for series in campaign.series]
    for exact in (True, False):
        table = comparison_table(campaign.series, method_exact=exact)
        if table is not None and len(table.rows) > 1:
            tables.append(table)
    return tables


def write_report(store: Path, out_dir: Path) -> tuple[Path, str]:
    """Write the report of `store` into `out_dir`; return the Markdown file and its text."""
    campaign = load_campaign(store)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = tables_of(campaign)
    verdicts = [verdict(capture) for capture in campaign.idle]
    figures = _figures(campaign, out_dir)

    with open(out_dir / "tables.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        for table in tables:
            writer.writerows(table.csv_rows())
            writer.writerow([])
    (out_dir / "verdicts.json").write_text(json.dumps([asdict(v) for v in verdicts], indent=2) + "\n")

    text = _markdown(campaign, tables, verdicts, figures)
    report = out_dir / "report.md"
    report.write_text(text)
    return report, text


def _figures(campaign: Campaign, out_dir: Path) -> list[Path]:
    figures = []
    made = plots.throughput_vs_cores(campaign.series, out_dir / "throughput-vs-cores.png")
    if made:
        figures.append(made)
    for capture in campaign.idle:
        made = plots.idle_per_core(capture, out_dir / f"idle-{capture.setup}-cores{capture.cores}.png")
        if made:
            figures.append(made)
    return figures


def _markdown(campaign: Campaign, tables: list[Table], verdicts: list[Verdict], figures: list[Path]) -> str:
    host = campaign.host
    tester = campaign.tester
    lines = [
        f"# xlatbench report: campaign {campaign.name}",
        "",
        f"Store: `{campaign.path}`. Host: {host.get('cpu_model', '?')}, "
        f"{host.get('cpus_online', '?')} CPUs online, kernel {host.get('kernel', '?')}. "
        f"Tester: {tester.get('tool', 'xlatperf')} {tester.get('version', '?')}.",
        "Throughput = the highest query rate the chain answered with at most the stated loss within the "
        "timeout (RFC 8219). Each table names the DUT implementation that produced it.",
        "",
    ]
    for table in tables:
        lines += [table.markdown(), ""]
    if verdicts:
        lines += ["## Bottleneck", ""]
        lines += ["```", *[v.text() for v in verdicts], "```", ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{figure.stem}]({figure.name})" for figure in figures]
        lines.append("")
    return "\n".join(lines)
