"""Idle runs left out of the idle mean (tester-limited, CPU steal) are left out of every figure of the
capture: the translator shares, the latency and the run count the verdict prints (issue 31, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import storefix

from xlatbench.analysis.bottleneck import verdict
from xlatbench.analysis.evidence import evidence_from, latency_from
from xlatbench.analysis.series import load_records
from xlatbench.data.records import IdleMean
from xlatbench.setups.backends import USER_SPACE_SINGLE_THREAD

TAYGA = {"implementation": "tayga", "tun_device": "nat64", "execution_model": USER_SPACE_SINGLE_THREAD}


def _store(tmp_path: Path, *, listed: bool) -> Path:
    """Three idle runs at 20,000 queries/s: run 1 counted (tayga 94 % of a core, 1 ms median latency), runs
    2 and 3 tester-limited (50 %, 50 ms). listed: the idle mean names them in `excluded` (else a record from
    before it did: the one rule, idle_run_exclusion, finds them)."""
    ctx = storefix.context("464xlat", 1, {"namespaces": {}, "translators": {"dut1": TAYGA, "dut2": TAYGA}})
    records = []
    runs = ((1, 94.0, 0.001, False), (2, 50.0, 0.05, True), (3, 50.0, 0.05, True))
    for run, share, latency, limited in runs:
        result = {"duration_s": 10.0, "sent": 200000, "valid": 200000, "tester_limited": limited,
                  "dut_stats": {"cpu_s": {"dut1": share / 10, "dut2": 0.4}}}
        raw = {"latency": {"p50": latency, "p999": 2 * latency}}
        records.append(storefix.idle_run(ctx, run, 20000.0, result, raw=raw))
    why = "tester-limited: the tester could not offer the rate"
    mean = IdleMean(key="idle-mean:464xlat/cores1", context=ctx, rate_qps=20000.0, runs=1, interval_s=1.0,
                    per_second=[], excluded=[{"run": 2, "why": why}, {"run": 3, "why": why}])
    data = mean.to_json()
    if not listed:
        del data["excluded"]
    return storefix.write_store(tmp_path / "s.jsonl", [*records, data])


@pytest.mark.parametrize("listed", [True, False])
def test_excluded_runs_are_excluded_everywhere(tmp_path: Path, listed: bool) -> None:
    records = load_records(_store(tmp_path, listed=listed))
    (evidence,) = evidence_from(records)
    assert evidence.runs == 1 and evidence.share_runs == 1
    assert evidence.translator_share["dut1"] == pytest.approx(94.0)
    text = verdict(evidence).text()
    assert "dut1 translator used 94.0 % of one CPU at the rate (mean of 1 run(s))" in text, text
    assert "run 2: tester-limited" in text and "run 3: tester-limited" in text
    (latency,) = latency_from(records)
    assert latency.trials == 1 and latency.typical_s == pytest.approx(0.001)
