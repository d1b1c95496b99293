"""Latency over all queries, late and lost counted as infinite (issue 23, item 6), on idle runs whose truth is
fixed in advance: a peer that answers 99 % of queries in about 1 ms and 1 % after 300 ms (past the 0.25 s
timeout, so those replies are late)."""

import math
from pathlib import Path

import storefix

from xlatbench.analysis.evidence import all_queries_percentile, latency_from
from xlatbench.analysis.latency import latency_table
from xlatbench.analysis.series import load_records

COLUMNS = ("Typical latency (ms)", "Worst-case latency (ms)", "Late or lost (% of queries)")
VALID = {"p50": 0.001, "p90": 0.0012, "p99": 0.0015, "p999": 0.002, "max": 0.003}


def _store(tmp_path: Path, sent: int, valid: int) -> list:
    ctx = storefix.context("464xlat", 1, {"topology": "464xlat"})
    raw = {"latency": {**VALID, "resolution_s": 1e-9, "relative_resolution": 0.001, "of": "valid replies"},
           "config": {"timeout_s": 0.25}}
    result = {"rate_qps": 10_000, "duration_s": 10, "sent": sent, "valid": valid, "dut_stats": None}
    records = [storefix.idle_run(ctx, run, 10_000, result, raw=raw) for run in (1, 2, 3)]
    return load_records(storefix.write_store(tmp_path / "l.jsonl", records))


def test_one_percent_answered_after_300_ms_shows_in_the_worst_case(tmp_path: Path) -> None:
    # Before: worst case 2.000 ms (the 99.9th percentile of the replies that came in time).
    (lat,) = latency_from(_store(tmp_path, 100_000, 99_000))
    assert math.isinf(lat.worst_s) and math.isclose(lat.unanswered_ratio or 0, 0.01)
    table = latency_table([lat])
    row = dict(zip(table.header, table.rows[0], strict=True))
    assert [row[name] for name in COLUMNS] == ["≥ 1.000", "> 250 (timeout)", "1.00"]
    assert "late and lost ones counted as infinite" in latency_table([lat]).title


def test_without_late_or_lost_queries_the_percentiles_are_the_testers(tmp_path: Path) -> None:
    (lat,) = latency_from(_store(tmp_path, 100_000, 100_000))
    assert (lat.typical_s, lat.worst_s, lat.typical_bound, lat.worst_bound) == (0.001, 0.002, False, False)
    table = latency_table([lat])
    row = dict(zip(table.header, table.rows[0], strict=True))
    assert [row[name] for name in COLUMNS] == ["1.000", "2.000", "0.00"]


def test_the_percentile_of_all_queries() -> None:
    # 0.05 % unanswered: the 99.9th percentile of all is the valid replies' 99.95th: between p999 and max.
    assert all_queries_percentile(VALID, 100_000, 99_950, 0.999) == (0.002, True)
    # 0.2 % unanswered: more than the 0.1 % the 99.9th percentile leaves out.
    assert all_queries_percentile(VALID, 100_000, 99_800, 0.999) == (math.inf, False)
    # 60 % unanswered: even the median is infinite.
    assert all_queries_percentile(VALID, 100, 40, 0.5) == (math.inf, False)
    assert all_queries_percentile(VALID, 100, 100, 0.5) == (0.001, False)
