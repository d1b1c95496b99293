"""Bounds and partial medians carried into every derived figure (issue 23, item 2), on hand-built stores whose
right answer is fixed in advance."""

from pathlib import Path

import storefix

from xlatbench.analysis.bottleneck import verdict
from xlatbench.analysis.bounded import EXACT, LOWER, UPPER, Value
from xlatbench.analysis.evidence import evidence_from, latency_from
from xlatbench.analysis.latency import latency_table
from xlatbench.analysis.measured_bottleneck import comparisons, measured_tables
from xlatbench.analysis.series import load_campaign, load_records
from xlatbench.analysis.sessions import sessions_tables
from xlatbench.analysis.tables import comparison_tables, throughput_table
from xlatbench.data.records import RateOf

NEVER_FAILED = "upper-bound-not-failed"
SETTINGS = {**storefix.SETTINGS, "error_qps": 2000}


def test_a_ratio_keeps_what_its_terms_are() -> None:
    assert Value(150, LOWER).over(Value(100)).text() == "≥ 1.50"
    assert Value(150).over(Value(100, LOWER)).text() == "≤ 1.50"
    assert Value(150, LOWER).over(Value(100, LOWER)).text() == "unknown"
    assert Value(150, LOWER).over(Value(100, UPPER)).text() == "≥ 1.50"
    assert Value(150, partial=True).over(Value(100)).text() == "1.50 †"
    assert Value(None).over(Value(100)).text() == "-"
    assert Value(150).over(Value(100)).side == EXACT


def _summary(setup: str, cores: int, median: float, status: str = "ok", n: int = 10, sessions: int = 0,
             topology: str | None = None):
    ctx = storefix.context(setup, cores, {"topology": topology or setup}, topology=topology,
                           sessions=sessions, swept=bool(sessions))
    return storefix.summary(ctx, median, median, median, status=status, n=n, settings=SETTINGS)


def test_the_scale_up_row_carries_a_bound_and_a_partial_median(tmp_path: Path) -> None:
    # 1 core: 100,000 (exact); 2 cores: ≥ 150,000 (never failed); 4 cores: 300,000 over 9 of 10 searches.
    # Before: "1.50 | 2.00", as if both were measured throughputs.
    records = [_summary("464xlat", 1, 100_000), _summary("464xlat", 2, 150_000, NEVER_FAILED),
               _summary("464xlat", 4, 300_000, n=9)]
    (series,) = load_campaign(storefix.write_store(tmp_path / "s.jsonl", records)).series
    table = throughput_table(series)
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Median (queries/s)"] == ["100,000", "≥ 150,000", "300,000 †"]
    assert rows["Proportion: current/previous"] == ["-", "≥ 1.50", "≤ 2.00 †"]
    assert "≥ = a search never failed" in table.title and "†" in table.title


def test_side_by_side_and_sessions_ratios_carry_bounds(tmp_path: Path) -> None:
    records = [_summary("baseline", 1, 200_000, sessions=1), _summary("baseline", 1, 100_000, NEVER_FAILED,
                                                                        sessions=64),
               _summary("464xlat", 1, 120_000, NEVER_FAILED, sessions=1),
               _summary("464xlat", 1, 60_000, NEVER_FAILED, sessions=64)]
    campaign = load_campaign(storefix.write_store(tmp_path / "c.jsonl", records))
    (table,) = comparison_tables(campaign.series)
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["464xlat, 1 tester sessions / baseline"] == ["≥ 0.60"]
    assert rows["464xlat, 64 tester sessions / baseline"] == ["unknown"]
    sessions = {t.title.split(" against")[0]: t for t in sessions_tables(campaign.series)}
    base = {row[0]: row[1:] for row in sessions["Throughput of baseline"].rows}
    assert base["Median (queries/s)"] == ["200,000", "≥ 100,000"]
    assert base["Proportion to 1 session(s)"] == ["1.00", "≥ 0.50"]
    xlat = {row[0]: row[1:] for row in sessions["Throughput of 464xlat"].rows}
    assert xlat["Proportion to 1 session(s)"] == ["unknown", "unknown"]


def test_no_bottleneck_is_named_from_a_lower_bound(tmp_path: Path) -> None:
    # The CLAT never failed at 100,000: its throughput may be above the PLAT's 110,000.
    records = [_summary("464xlat", 1, 99_000), _summary("clat", 1, 100_000, NEVER_FAILED),
               _summary("plat", 1, 110_000)]
    campaign = load_campaign(storefix.write_store(tmp_path / "b.jsonl", records))
    (point,) = comparisons(campaign.series)[0].points
    assert point.bottleneck is None and point.outcome is None
    rows = {row[0]: row[1:] for row in measured_tables(campaign.series)[0].rows}
    assert rows["clat alone (queries/s)"] == ["≥ 100,000"]
    assert rows["Bottleneck (lowest throughput alone)"] == \
        ["not determined: clat's figure is a lower bound (its search never failed)"]


def test_a_chain_that_never_failed_at_least_reaches_its_device(tmp_path: Path) -> None:
    records = [_summary("464xlat", 1, 99_000, NEVER_FAILED), _summary("clat", 1, 100_000),
               _summary("plat", 1, 180_000)]
    campaign = load_campaign(storefix.write_store(tmp_path / "b.jsonl", records))
    (point,) = comparisons(campaign.series)[0].points
    assert (point.bottleneck, point.outcome) == ("clat", "reaches-or-above")


def test_the_idle_and_latency_rate_of_a_bounded_search_is_marked(tmp_path: Path) -> None:
    dut = {"topology": "464xlat", "translators": {"dut1": {"implementation": "tayga", "version": "0.9.2"}},
           "namespaces": {}}
    ctx = storefix.context("464xlat", 1, dut)
    source = RateOf("default", "rfc8219-binary", lower_bound=True, partial=False)
    raw = {"latency": {"p50": 0.001, "p999": 0.002}}
    result = {"rate_qps": 100_000, "duration_s": 10, "dut_stats": {"cpu_s": {"dut1": 9.8}}}
    records = [storefix.idle_run(ctx, 1, 100_000, result, raw=raw, rate_of=source),
               storefix.idle_mean(ctx, 100_000, 1, [], rate_of=source)]
    loaded = load_records(storefix.write_store(tmp_path / "i.jsonl", records))
    table = latency_table(latency_from(loaded))
    assert table is not None and "lower bound" in table.title
    assert dict(zip(table.header, table.rows[0], strict=True))["Rate (queries/s)"] == "≥ 100,000"
    (evidence,) = evidence_from(loaded)
    found = verdict(evidence)
    # tayga at 98 % of a core would name dut1; at a rate that is only a lower bound nothing is named.
    assert found.bottleneck is None and "lower bound" in found.reason
    assert "at ≥ 100,000 queries/s" in found.text()
