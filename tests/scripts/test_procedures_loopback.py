"""campaigns/procedures-loopback.toml cut down to under a minute (root, under the machine lock): xlatperf
against Knot on 127.0.0.1, a short RFC 8219 search, then the latency, PDV and FLR procedures at its median;
the report shows the three tables, and each figure agrees with the tester's own JSON of its trials."""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from pathlib import Path

import pytest

from xlatbench.analysis.procedures import latency_tables
from xlatbench.analysis.report import write_report
from xlatbench.data.records import ProcedureTrial, SummaryEntry
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaign import CampaignRun
from xlatbench.scripts.campaignfile import parse_campaign

pytestmark = pytest.mark.root
REPO = Path(__file__).resolve().parents[2]


def cut_down(port: int) -> dict:
    data = tomllib.loads((REPO / "campaigns" / "procedures-loopback.toml").read_text())
    data["search"].update(duration_s=1, rest_s=0.2, repetitions=1, max_rate_qps=120_000, error_ratio=0.1)
    data["tester"]["port"] = port
    data["procedure"] = [{"kind": "latency", "repetitions": 2, "duration_s": 2, "rest_s": 0.2},
                         {"kind": "pdv", "repetitions": 2, "duration_s": 2, "rest_s": 0.2},
                         {"kind": "flr", "repetitions": 1, "duration_s": 1, "rest_s": 0.2,
                          "fractions": [1.0, 0.5, 0.1]}]
    return data


def test_a_loopback_campaign_reports_latency_pdv_and_flr(tmp_path: Path, port: int) -> None:
    store = tmp_path / "procedures.jsonl"
    CampaignRun(parse_campaign(cut_down(port), "procedures-loopback.toml", store), progress=False).run()
    records = list(ResultStore(store).records())
    summary = next(r for r in records if isinstance(r, SummaryEntry))
    assert summary.stats is not None, summary.describe
    trials = [r for r in records if isinstance(r, ProcedureTrial)]
    assert [(t.procedure, t.fraction) for t in trials] == [
        ("latency", 1.0), ("latency", 1.0), ("pdv", 1.0), ("pdv", 1.0), ("flr", 1.0), ("flr", 0.5),
        ("flr", 0.1)]
    for t in trials:  # each at its fraction of the search's median, as the tester's own JSON says
        assert t.throughput_qps == round(summary.stats.median)
        assert t.raw is not None and t.raw["config"]["rate_qps"] == round(t.fraction * t.throughput_qps)
        assert t.raw["totals"]["sent"] == t.result["sent"] and t.raw["totals"]["valid"] == t.result["valid"]

    _, text = write_report(store, tmp_path / "report")
    assert "RFC 8219 §7.2 latency" in text and "RFC 8219 §7.3 packet delay variation" in text
    assert "Frame loss rate (RFC 8219 §7.4" in text
    assert "not RFC 8219 §7.2 compliant: 2 repetitions of 2 s" in text
    assert (tmp_path / "report" / "flr.png").exists()
    latency_table, _, flr_table = latency_tables(records)
    assert all(row[0] in text for row in latency_table.rows + flr_table.rows)

    # Typical latency: the median of the per-trial medians, between the fastest reply any trial saw and
    # the tester's timeout (loopback answers in well under one).
    latency = [t for t in trials if t.procedure == "latency"]
    timeout = latency[0].raw["config"]["timeout_s"]
    typical_ms = float(latency_table.rows[0][4].removeprefix("≥ "))
    fastest = min(t.raw["latency"]["min"] for t in latency)
    assert 1000 * fastest <= typical_ms < 1000 * timeout
    # FLR per step: (sent - valid) / sent from the tester's totals, or tester-limited.
    for cell, t in zip(flr_table.rows[0][4:7], [t for t in trials if t.procedure == "flr"], strict=True):
        totals = t.raw["totals"]
        if t.result["tester_limited"]:
            assert cell == "tester-limited"
        else:
            assert cell == f"{100 * (totals['sent'] - totals['valid']) / totals['sent']:.4f}"
    # PDV: each trial's 99.9th percentile minus its minimum is positive (or a lost tail: infinite).
    pdv = [t for t in trials if t.procedure == "pdv"]
    values = [t.raw["latency"]["p999"] - t.raw["latency"]["min"] for t in pdv]
    assert all(v > 0 or math.isinf(v) for v in values) and statistics.median(values) > 0
    json.dumps([t.to_json() for t in trials])  # plain JSON all through
