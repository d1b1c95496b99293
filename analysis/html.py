"""The report as one self-contained HTML file (report.html): the tables, the latency, every figure embedded as
a base64 PNG, the verdicts with their evidence, the conditions (implementations and versions, tester, machine,
CPU placement) and the exact campaign file. Nothing is loaded from elsewhere: it can be mailed or archived.
"""

from __future__ import annotations

import base64
import tomllib
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ..cpulist import format_cpu_list
from ..data.records import (
    STEAL_NOTE_PCT,
    Context,
    IdleMean,
    Record,
    SummaryEntry,
    TrialEntry,
    campaign_sha256,
    provenance,
)
from .bottleneck import Verdict
from .evidence import dut_cpu_sets, shared_with_test_system, tester_cpus
from .tables import Table, median_text, series_label
from .tester_warnings import warnings_text

STYLE = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d2430;
 background:#f4f6f9;margin:0}
main{max-width:1120px;margin:0 auto;padding:28px 32px 60px;background:#fff;box-shadow:0 0 12px #0001}
header{border-bottom:3px solid #2f6fb3;margin-bottom:18px;padding-bottom:10px}
h1{font-size:26px;margin:0 0 4px} h2{font-size:20px;margin:32px 0 10px;color:#2f6fb3}
.sub{color:#5a6473;font-size:14px} nav a{margin-right:14px;font-size:14px;color:#2f6fb3}
table{border-collapse:collapse;margin:6px 0 4px;font-size:13.5px;font-variant-numeric:tabular-nums}
.tt{font-weight:600;margin:18px 0 6px;font-size:14px} .tbl{overflow-x:auto}
.tbls{display:grid;grid-template-columns:1fr 1fr;gap:0 28px}
th,td{border:1px solid #d5dbe3;padding:4px 9px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left} thead th{background:#eaf1f9;white-space:normal;
 vertical-align:bottom} tbody th{white-space:normal;min-width:11em}
tbody tr:nth-child(even){background:#f8fafc}
td.mark{background:#fff4d6}
td.long{white-space:normal;text-align:left;min-width:260px;font-size:12.5px}
td.txt{white-space:normal;min-width:7em}
.note{color:#5a6473;font-size:13px;margin:2px 0 16px}
.glance ul{margin:0;padding-left:20px} .glance li{margin:2px 0}
.verdict{border-left:5px solid #9aa5b4;background:#f8fafc;padding:8px 14px;margin:10px 0}
.verdict.named{border-color:#c0392b} .verdict h3{margin:0 0 4px;font-size:15px}
.verdict ul{margin:4px 0 0;padding-left:20px;font-size:13.5px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;font-size:14px} dt{font-weight:600}
figure{margin:14px 0 22px} figure img{max-width:100%;border:1px solid #e1e5eb}
figcaption{font-size:13px;color:#5a6473} .figs{display:grid;grid-template-columns:1fr 1fr;gap:10px 20px}
pre{background:#f3f5f8;border:1px solid #e1e5eb;padding:10px;font-size:12.5px;overflow-x:auto}
"""

# After loading, the body says how many embedded images decoded and which table cells or table boxes are
# narrower than their content, i.e. clipped (a test reads both from the DOM at several window widths).
SCRIPT = ("addEventListener('load',()=>{const b=document.body;"
          "b.setAttribute('data-images-decoded',"
          "[...document.images].filter(i=>i.complete&&i.naturalWidth>0).length);"
          "const c=[...document.querySelectorAll('.tbl,td,th')].filter(e=>e.scrollWidth>e.clientWidth+1);"
          "b.setAttribute('data-clipped',c.length);"
          "b.setAttribute('data-clipped-text',c.slice(0,5).map(e=>e.textContent.slice(0,60)).join(' | '))})")


@dataclass(frozen=True)
class Figure:
    """caption: what the figure shows and what produced it. path: its PNG. wide: spans the page."""

    caption: str
    path: Path
    wide: bool = False


@dataclass
class HtmlReport:
    """Everything report.html shows, in reading order."""

    title: str
    lead: list[str]
    conditions: list[tuple[str, str]]
    tables: list[Table]
    latency: Table | None
    latency_note: str
    verdicts: list[Verdict]
    figures: list[Figure]
    campaign_file: str
    campaign_note: str
    table_notes: dict[str, str] = field(default_factory=dict)
    glance: list[str] = field(default_factory=list)
    procedures: list[Table] = field(default_factory=list)  # RFC 8219 latency, PDV, FLR (analysis.procedures)
    stateful: list[Table] = field(default_factory=list)  # RFC 9693's four measurements (analysis.stateful)


def table_html(table: Table, note: str = "") -> str:
    head = "".join(f"<th>{escape(cell)}</th>" for cell in table.header)
    body = []
    for row in table.rows:
        cells = [f"<th>{escape(row[0])}</th>"] if row else []
        for cell in row[1:]:
            classes = [name for name, on in (
                ("mark", any(sign in cell for sign in ("†", "≥", "!", "limit", "bound"))),
                ("long", len(cell) > 40),
                ("txt", 12 < len(cell) <= 40 and any(ch.isalpha() for ch in cell))) if on]
            cells.append(f"<td{' class=' + repr(' '.join(classes)) if classes else ''}>{escape(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    extra = f'<p class="note">{escape(note)}</p>' if note else ""
    return (f'<div class="tbl"><p class="tt">{escape(table.title)}</p>'
            f'<table data-table="{escape(table.title, quote=True)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{extra}</div>")


def verdict_html(verdict: Verdict) -> str:
    lines = [*verdict.evidence, *([verdict.measured_line()] if verdict.by_measurement else [])]
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    named = " named" if verdict.bottleneck else ""
    return (f'<div class="verdict{named}" data-verdict><h3>{escape(verdict.setup)}, {verdict.cores} DUT '
            f"core(s), at {escape(verdict.rate_label or f'{verdict.rate_qps:,.0f}')} queries/s: "
            f"{escape(verdict.headline())}</h3>"
            f'<div class="sub">{escape(verdict.implementation)}</div><ul>{items}</ul></div>')


def figure_html(figure: Figure) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure data-figure="{escape(figure.path.name, quote=True)}">'
            f'<img alt="{escape(figure.caption, quote=True)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(figure.caption)}</figcaption></figure>")


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{body}</section>'


def render(report: HtmlReport) -> str:
    sections = []
    if report.glance:
        items = "".join(f"<li>{escape(line)}</li>" for line in report.glance)
        sections.append(f'<section id="glance" class="glance"><h2>At a glance</h2><ul>{items}</ul></section>')
    narrow = all(len(t.header) <= 3 for t in report.tables)  # one or two core counts: two tables a row
    tables = "".join(table_html(t, report.table_notes.get(t.title, "")) for t in report.tables)
    if report.tables or not report.stateful:  # RFC 9693 procedures alone have no throughput search
        sections.append(_section("throughput", "Throughput",
                                 f'<div class="tbls">{tables}</div>' if narrow else tables))
    if report.latency is not None:
        sections.append(_section("latency", "Latency", table_html(report.latency, report.latency_note)))
    if report.procedures:
        sections.append(_section("procedures", "RFC 8219 latency, PDV and frame loss rate",
                                 "".join(table_html(t) for t in report.procedures)))
    if report.stateful:
        sections.append(_section("stateful", "RFC 9693: stateful NAT (connection establishment rate, "
                                 "throughput over N connections, tear-down rate, table capacity)",
                                 "".join(table_html(t) for t in report.stateful)))
    if report.verdicts:
        sections.append(_section("bottleneck", "Bottleneck verdicts",
                                 "".join(verdict_html(v) for v in report.verdicts)))
    wide = "".join(figure_html(f) for f in report.figures if f.wide)
    grid = "".join(figure_html(f) for f in report.figures if not f.wide)
    if report.figures:
        grid = f'<div class="figs">{grid}</div>' if grid else ""
        sections.append(_section("figures", "Figures", wide + grid))
    conditions = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in report.conditions)
    sections.append(_section("conditions", "Conditions", f"<dl>{conditions}</dl>"))
    sections.append(_section("campaign", "Campaign file",
                             f'<p class="note">{escape(report.campaign_note)}</p>'
                             f"<pre>{escape(report.campaign_file)}</pre>"))
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("throughput", "Throughput"), ("latency", "Latency"),
        *((("procedures", "RFC 8219 procedures"),) if report.procedures else ()),
        *((("stateful", "RFC 9693"),) if report.stateful else ()),
        ("bottleneck", "Bottleneck"), ("figures", "Figures"), ("conditions", "Conditions"),
        ("campaign", "Campaign file")))
    lead = "".join(f'<p class="sub">{escape(p)}</p>' for p in report.lead)
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(report.title)}</title>"
            f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head>'
            f"<body><main>"
            f"<header><h1>{escape(report.title)}</h1>{lead}<nav>{nav}</nav></header>{''.join(sections)}"
            f"</main><script>{SCRIPT}</script></body></html>\n")


def write_html(report: HtmlReport, path: Path) -> Path:
    path.write_text(render(report), encoding="utf-8")
    return path


def _cpus(cpus: Any) -> str:
    return format_cpu_list(cpus) if cpus else "not pinned"


def placement_text(context: Context) -> str:
    """Where the DUTs, the tester and Knot ran for one configuration, one line."""
    duts = dut_cpu_sets(context)
    parts = [f"{dut} CPU {_cpus(cpus)}" for dut, cpus in duts.items()] or ["DUTs not pinned"]
    parts.append(f"tester + Knot CPU {_cpus(tester_cpus(context))}")
    mode = (context.dut_cpus or {}).get("placement")
    if mode:
        parts.append(f"placement {mode}")
    shared = shared_with_test_system(context)
    if shared:
        parts.append(f"DUT CPU {_cpus(shared)} shared with the tester/Knot: 'DUT cores' are not the DUTs' "
                     "alone")
    return "; ".join(parts)


def dut_hosts_text(context: Context) -> str | None:
    """On a real testbed, each DUT host's CPU model, CPU count, kernel and hostname from the preflight the
    record carries (the DUTs run there, not on the controller); None elsewhere."""
    found = ((context.dut.get("preflight") or {}).get("hosts") or {})
    duts = [d for d in ("dut1", "dut2") if isinstance(found.get(d), dict)]
    if not duts:
        return None
    return "; ".join(f"{d} {found[d].get('cpu_model', '?')}, {found[d].get('cpus', '?')} CPUs, kernel "
                     f"{found[d].get('kernel', '?')}, hostname {found[d].get('hostname', '?')}" for d in duts)


def tester_io_text(context: Context, records: list[Record]) -> str:
    """How the tester's queries left and its replies arrived: the [tester] io its options recorded (UDP
    sockets in a store written before io was recorded, the only way then) and, with AF_XDP, the attach modes
    and interfaces xlatperf's own `io` blocks (each trial's raw JSON) name."""
    io = (context.tester.get("options") or {}).get("io", "socket")
    if io == "socket":
        return "UDP sockets"
    blocks = [r.raw["io"] for r in records if isinstance(r, TrialEntry) and isinstance(r.raw, dict)
              and isinstance(r.raw.get("io"), dict) and r.raw["io"].get("mode") == io]
    seen = sorted({f"{b.get('xdp_mode', '?')} XDP on {b.get('interface', '?')}"
                   + (", zero-copy" if b.get("zero_copy") else ", copy mode") for b in blocks})
    return f"AF_XDP (xlatperf --io {io}" + (f": {'; '.join(seen)})" if seen else ")")


def _machine_and_tester(context: Context, io_text: str) -> list[tuple[str, str]]:
    host, tester = context.host, context.tester
    options = tester.get("options") or {}
    duts = dut_hosts_text(context)
    return [*([("DUT hosts", duts)] if duts else []),
            ("Controller (runs the campaign)" if duts else "Machine",
             f"{host.get('cpu_model', '?')}, {host.get('cpus_online', '?')} CPUs online, "
             f"{host.get('machine', '?')}, kernel {host.get('kernel', '?')}, hostname "
             f"{host.get('hostname', '?')}"),
            ("Tester", f"{tester.get('tool', 'xlatperf')} {tester.get('version', '?')}: "
                       f"{options.get('threads', '?')} thread pair(s) × "
                       f"{options.get('ports_per_thread', '?')} "
                       f"source ports, timeout {options.get('timeout_s', '?')} s, {io_text}")]


def conditions_of(records: list[Record]) -> list[tuple[str, str]]:
    """Machine, tester, per-setup implementation and per-configuration CPU placement from the store."""
    contexts = [r.context for r in records if isinstance(r, SummaryEntry | IdleMean)]
    if not contexts:
        return []
    out = _machine_and_tester(contexts[0], tester_io_text(contexts[0], records))
    measured_by = list(dict.fromkeys(provenance(r.context) for r in records))
    out.append(("Measured by" + (" (cells marked ‡ mix them)" if len(measured_by) > 1 else ""),
                "; ".join(p.text() for p in measured_by)))
    seen: set[tuple[str, int | None]] = set()
    for context in contexts:
        setup = context.setup_name
        if (setup, None) not in seen:
            seen.add((setup, None))
            knot = context.dut.get("knot") or {}
            text = context.implementation
            if knot:
                text += f"; DNS server {knot.get('implementation', 'knot')} {knot.get('version', '?')}"
            out.append((f"{setup}: implementation", text))
        if (setup, context.cores) not in seen:
            seen.add((setup, context.cores))
            out.append((f"{setup}, {context.cores} DUT core(s): placement", placement_text(context)))
    steal = steal_text(records)
    if steal:
        out.append(("CPU steal (hypervisor) during trials", steal))
    out += [("Tester warning", line) for line in warnings_text(records)]
    return out


def steal_text(records: list[Record]) -> str:
    """How many of the trial records lost STEAL_NOTE_PCT % or more of a CPU of the suite's host to the
    hypervisor, and the worst; empty when no trial measured it (fake DUTs, older stores)."""
    measured = [r.result["host_steal_pct"] for r in records
                if isinstance(r, TrialEntry) and r.result.get("host_steal_pct")]
    if not measured:
        return ""
    worst_cpu, worst = max(((cpu, pct) for steal in measured for cpu, pct in steal.items()),
                           key=lambda item: item[1])
    hit = sum(1 for steal in measured if max(steal.values()) >= STEAL_NOTE_PCT)
    if not hit:
        return (f"below {STEAL_NOTE_PCT:g} % of every CPU in all {len(measured)} trials that measured it "
                f"(at most {worst:.1f} %, CPU {worst_cpu})")
    return (f"{hit} of {len(measured)} trials lost {STEAL_NOTE_PCT:g} % or more of a CPU to the hypervisor "
            f"(at most {worst:.1f} %, CPU {worst_cpu}): their figures may be low for a reason that is "
            "neither the DUT nor the tester")


def campaign_file_of(records: list[Record]) -> tuple[str, str]:
    """The campaign file's text and a note saying whether it is still the one the store was measured with
    (its normalized hash, recorded in every record, is compared with the file's now)."""
    name = records[0].context.campaign.file if records else ""
    recorded = records[0].context.campaign.sha256 if records else None
    if not name:
        return "", "The store does not name its campaign file."
    path = Path(name)
    try:
        text = path.read_text()
    except OSError as err:
        return "", f"{path}: cannot be read now ({err.strerror}); the store recorded sha256 {recorded}."
    try:
        now = campaign_sha256(tomllib.loads(text))
    except tomllib.TOMLDecodeError as err:
        return text, f"{path}: no longer parses as TOML ({err}); shown as it is now, unverified."
    if recorded and now != recorded:
        return text, (f"{path} has CHANGED since the measurement (sha256 of its content {now}, recorded "
                      f"{recorded}): the text below is not what was run.")
    return text, f"{path}, unchanged since the measurement (sha256 of its normalized content {recorded})."


def html_report(campaign: Any, records: list[Record], tables: list[Table], verdicts: list[Verdict],
                figures: list[Figure]) -> HtmlReport:
    """The HtmlReport of a loaded campaign (analysis.records.Campaign) and its store's records."""
    text, note = campaign_file_of(records)
    emulated = any("namespaces" in r.context.dut for r in records if isinstance(r, SummaryEntry))
    lead = [f"Results store {campaign.path}; written from {len(records)} records.",
            "Throughput is the highest query rate the chain answered with at most the stated loss within the "
            "timeout (RFC 8219); each table names the DUT implementation that produced it."]
    if emulated:
        lead.append("Emulated testbed: the DUTs are network namespaces on one machine and share its CPUs "
                    "with the tester and Knot; compare ratios measured in the same run rather than absolute "
                    "rates.")
    return HtmlReport(title=f"xlatbench report: campaign {campaign.name}", lead=lead,
                      conditions=conditions_of(records), tables=tables, latency=None, latency_note="",
                      verdicts=verdicts, figures=figures, campaign_file=text, campaign_note=note,
                      glance=glance_lines(campaign.series, verdicts))


def glance_lines(all_series: list[Any], verdicts: list[Verdict]) -> list[str]:
    """One line per setup and search: its medians by core count; then one line per verdict."""
    lines = []
    for series in all_series:
        cells = [f"{cores} core(s) {median_text(cell)}" for cores, cell in sorted(series.cells.items())]
        lines.append(f"{series.setup} ({series_label(series)}): {', '.join(cells)} queries/s")
    lines += [f"{v.setup}, {v.cores} DUT core(s): {v.headline()}" for v in verdicts]
    return lines
