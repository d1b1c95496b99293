"""A campaign's report: the paper's tables, a comparison across setups, figures and bottleneck verdicts,
written as Markdown + CSV + JSON + PNG into one directory, and as one self-contained report.html."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, replace
from pathlib import Path

from . import plots
from .agreement import agreement_table
from .bottleneck import Verdict, verdict
from .evidence import Evidence, Latency, latency_from
from .figures import idle_per_dut, latency_plot
from .html import Figure, dut_hosts_text, html_report, steal_text, write_html
from .joinkey import JoinKey
from .latency import latency_table, resolution_text
from .measured_bottleneck import Comparison, comparisons, measured_tables, point_at
from .mlrsearch import MLRSEARCH, mlrsearch_tables
from .procedures import latency_tables, procedure_figures
from .series import Campaign, load_campaign
from .sessions import sessions_tables, throughput_vs_sessions
from .stateful import stateful_tables
from .tables import Table, comparison_tables, throughput_table
from .tester_warnings import warnings_text


def tables_of(campaign: Campaign) -> list[Table]:
    # MLRsearch's conditional throughputs get tables of their own (per goal, analysis.mlrsearch); the
    # side-by-side ratios, the sessions tables and the bottleneck by measurement are per method and
    # [[search]] table, each labelled with its method, so they serve MLRsearch series too.
    rfc = [series for series in campaign.series if series.method != MLRSEARCH]
    tables = [throughput_table(series) for series in rfc]
    tables += mlrsearch_tables(campaign.series, campaign.records)
    tables += comparison_tables(campaign.series)
    agreement = agreement_table(campaign.series)
    tables += [agreement] if agreement is not None else []
    return (tables + sessions_tables(campaign.series, campaign.records)
            + measured_tables(campaign.series) + latency_tables(campaign.records)
            + stateful_tables(campaign.records))


def write_report(store: Path, out_dir: Path) -> tuple[Path, str]:
    """Write the report of `store` into `out_dir` (report.md, report.html, tables.csv, verdicts.json and the
    figures); return the Markdown file and its text."""
    campaign = load_campaign(store)
    records = campaign.records
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = tables_of(campaign)
    evidences = campaign.idle
    # The loopback self-test has no DUT to name.
    found = comparisons(campaign.series)
    verdicts = [_with_measurement(verdict(evidence), evidence, found) for evidence in evidences
                if evidence.topology != "loopback"]
    latencies = latency_from(records)
    latency = latency_table(latencies)
    figures = _figures(campaign, evidences, latencies, out_dir)

    with open(out_dir / "tables.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        for table in [*tables, *([latency] if latency else [])]:
            writer.writerows(table.csv_rows())
            writer.writerow([])
    (out_dir / "verdicts.json").write_text(json.dumps([asdict(v) for v in verdicts], indent=2) + "\n")

    all_tables = [*tables, *([latency] if latency else [])]
    text = _markdown(campaign, all_tables, verdicts, [f.path for f in figures])
    if latency is not None:
        text += f"\n{resolution_text(latencies)}\n"
    report = out_dir / "report.md"
    report.write_text(text)
    procedures = latency_tables(records)  # RFC 8219's procedures: a section of their own in report.html
    stateful = stateful_tables(records)  # RFC 9693's, too
    html = html_report(campaign, records, [t for t in tables if t not in procedures and t not in stateful],
                       verdicts, figures)
    html.latency, html.latency_note = latency, resolution_text(latencies)
    html.procedures = procedures
    html.stateful = stateful
    write_html(html, out_dir / "report.html")
    return report, text


def _with_measurement(found: Verdict, evidence: Evidence, measured: list[Comparison]) -> Verdict:
    """The verdict with the bottleneck by measurement of the same configuration beside it, when measured."""
    point = point_at(measured, JoinKey(evidence.setup, evidence.cores, evidence.sessions, evidence.search,
                                       evidence.method))
    return found if point is None else replace(found, by_measurement=point.summary())


def _figures(campaign: Campaign, evidences: list[Evidence], latencies: list[Latency],
             out_dir: Path) -> list[Figure]:
    figures = []
    made = plots.throughput_vs_cores(campaign.series, out_dir / "throughput-vs-cores.png")
    if made:
        figures.append(Figure("Median throughput against active DUT cores, minimum-maximum as bars", made,
                              True))
    made = throughput_vs_sessions(campaign.series, out_dir / "throughput-vs-sessions.png")
    if made:
        figures.append(Figure("Median throughput against tester sessions (source address x port)", made,
                              True))
    made = latency_plot(latencies, out_dir / "latency.png")
    if made:
        figures.append(Figure("Idle-capture latency at the median throughput rate (the idle runs, whole "
                              "trials; not RFC 8219 §7.2's procedure)", made, True))
    figures += [Figure(caption, path, True) for caption, path in procedure_figures(campaign.records, out_dir)]
    for evidence in evidences:
        per_dut = idle_per_dut(evidence, out_dir)
        figures += [Figure(caption, path) for caption, path in per_dut]
        if not per_dut:
            made = plots.idle_per_core(evidence, out_dir / f"idle-{evidence.setup}-cores{evidence.cores}.png")
            if made:
                figures.append(Figure(f"CPU idle time of every CPU, {evidence.setup}, {evidence.cores} DUT "
                                      "core(s)", made))
    return figures


def _markdown(campaign: Campaign, tables: list[Table], verdicts: list[Verdict], figures: list[Path]) -> str:
    host = campaign.host
    tester = campaign.tester
    duts = next((t for t in (dut_hosts_text(r.context) for r in campaign.records) if t), None)
    machine = (f"{host.get('cpu_model', '?')}, {host.get('cpus_online', '?')} CPUs online, kernel "
               f"{host.get('kernel', '?')}")
    lines = [
        f"# xlatbench report: campaign {campaign.name}",
        "",
        f"Store: `{campaign.path}`. "
        + (f"DUT hosts: {duts}. Controller: {machine}. " if duts else f"Host: {machine}. ") +
        f"Tester: {tester.get('tool', 'xlatperf')} {tester.get('version', '?')}.",
        "Throughput = the highest query rate the chain answered with at most the stated loss within the "
        "timeout (RFC 8219). Each table names the DUT implementation that produced it.",
        "",
    ]
    if len(campaign.provenances) > 1:
        lines[-1:-1] = ["Measured by more than one suite commit, tester build or host (cells marked ‡): "
                        + "; ".join(p.text() for p in campaign.provenances) + "."]
    steal = steal_text(campaign.records)
    if steal:
        lines[-1:-1] = [f"CPU steal (hypervisor) during trials: {steal}."]
    warned = warnings_text(campaign.records)
    if warned:
        lines[-1:-1] = ["Tester warnings (the loss of these trials means less than it seems):",
                        *[f"- {line}" for line in warned], ""]
    for table in tables:
        lines += [table.markdown(), ""]
    if verdicts:
        lines += ["## Bottleneck", ""]
        lines += ["```", *[v.text() for v in verdicts], "```", ""]
    labels = {r.context.setup_name: r.context.implementation for r in campaign.records}
    lines += ["## Conditions", "", "Titles and tables name each DUT implementation by a short tag; in full:",
              ""]
    lines += [f"- {setup}: {label}" for setup, label in labels.items()]
    lines.append("")
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{figure.stem}]({figure.name})" for figure in figures]
        lines.append("")
    return "\n".join(lines)
