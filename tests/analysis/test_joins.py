"""One join key (setup, cores, sessions, [[search]] name, method) for every analysis join, on hand-built
stores whose right answer is fixed in advance (issue 23, item 1)."""

from pathlib import Path

import storefix

from xlatbench.analysis.evidence import evidence_from, latency_from
from xlatbench.analysis.measured_bottleneck import comparisons
from xlatbench.analysis.series import load_campaign, load_records
from xlatbench.analysis.sessions import sessions_tables
from xlatbench.analysis.tables import comparison_tables
from xlatbench.data.records import RateOf

DUT = {"topology": "464xlat", "translators": {"dut1": {"implementation": "tayga", "version": "0.9.2"}}}
RFC_DEFAULT = RateOf("default", "rfc8219-binary", False, False)


def _idle(ctx, rate: float, p50: float) -> list:
    """Two idle runs and their mean at `rate`, each run's median latency p50 (s)."""
    raw = {"latency": {"p50": p50, "p999": 2 * p50, "resolution_s": 1e-9, "relative_resolution": 0.01,
                       "of": "valid replies"}}
    result = {"rate_qps": rate, "duration_s": 10, "dut_stats": None}
    return [storefix.idle_run(ctx, run, rate, result, raw=raw, rate_of=RFC_DEFAULT) for run in (1, 2)] + \
        [storefix.idle_mean(ctx, rate, 2, [], rate_of=RFC_DEFAULT)]


def test_a_sessions_sweep_keeps_its_idle_runs_and_latency_apart(tmp_path: Path) -> None:
    # Before: one row "100,000 | 5.500 ms" (1 and 1 024 sessions pooled by (setup, cores)).
    one = storefix.context("464xlat", 1, DUT, sessions=1, swept=True)
    many = storefix.context("464xlat", 1, DUT, sessions=1024, swept=True)
    records = load_records(storefix.write_store(tmp_path / "s.jsonl",
                                                _idle(one, 100_000, 0.001) + _idle(many, 50_000, 0.010)))
    latencies = sorted(latency_from(records), key=lambda lat: lat.sessions)
    assert [(lat.sessions, lat.rate_qps, lat.typical_s) for lat in latencies] == \
        [(1, 100_000, 0.001), (1024, 50_000, 0.010)]
    evidences = sorted(evidence_from(records), key=lambda e: e.sessions)
    assert [(e.sessions, e.rate_qps, e.search, e.method) for e in evidences] == \
        [(1, 100_000, "default", "rfc8219-binary"), (1024, 50_000, "default", "rfc8219-binary")]


def test_the_failing_trial_is_the_one_of_the_idle_search(tmp_path: Path) -> None:
    # A failed trial of another [[search]] table just above the rate is not this capture's evidence.
    ctx = storefix.context("464xlat", 1, DUT)
    failing = {"duration_s": 10, "loss_ratio": 0.2, "dut_stats": None}
    records = _idle(ctx, 100_000, 0.001) + [
        storefix.trial(ctx, 0, 100_500, "fail", failing, settings_name="other"),
        storefix.trial(ctx, 1, 110_000, "fail", failing)]
    (found,) = evidence_from(load_records(storefix.write_store(tmp_path / "s.jsonl", records)))
    assert found.failing is not None and found.failing.rate_qps == 110_000


def _summary(setup: str, topology: str, sessions: int, median: float, search: str = "default",
             cores: int = 1):
    ctx = storefix.context(setup, cores, {"topology": topology}, topology=topology, sessions=sessions,
                           swept=True)
    return storefix.summary(ctx, median, median, median, settings_name=search,
                            settings={**storefix.SETTINGS, "error_qps": 2000})


def test_each_session_count_is_divided_by_its_own_baseline(tmp_path: Path) -> None:
    # The baseline gives 200,000 at 1 session and 100,000 at 1,024; the chain 120,000 and 60,000: 0.60 at
    # both (before: 60,000 / 200,000 = 0.30 at 1,024). The loopback of 1,024 sessions is a reference, not
    # a chain divided by the baseline.
    records = [_summary("loopback", "loopback", 1, 400_000), _summary("loopback", "loopback", 1024, 300_000),
               _summary("baseline", "baseline", 1, 200_000), _summary("baseline", "baseline", 1024, 100_000),
               _summary("464xlat", "464xlat", 1, 120_000), _summary("464xlat", "464xlat", 1024, 60_000)]
    campaign = load_campaign(storefix.write_store(tmp_path / "c.jsonl", records))
    (table,) = comparison_tables(campaign.series)
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["464xlat, 1 tester sessions / baseline"] == ["0.60"]
    assert rows["464xlat, 1024 tester sessions / baseline"] == ["0.60"]
    assert rows["464xlat, 1024 tester sessions / loopback self-test"] == ["0.20"]
    assert rows["baseline, 1024 tester sessions / loopback self-test"] == ["0.33"]
    assert not any(name.startswith("loopback") and " / " in name for name in rows)


def test_tables_per_search_name(tmp_path: Path) -> None:
    # Two [[search]] tables of one sweep: two sessions tables and two comparison tables, none mixed.
    records = [_summary("464xlat", "464xlat", n, qps, search)
               for search, scale in (("short", 1.0), ("long", 0.5))
               for n, qps in ((1, 100_000 * scale), (64, 80_000 * scale))]
    records += [_summary("baseline", "baseline", n, 200_000, search) for search in ("short", "long")
                for n in (1, 64)]
    campaign = load_campaign(storefix.write_store(tmp_path / "c.jsonl", records))
    tables = [t for t in sessions_tables(campaign.series) if t.title.startswith("Throughput of 464xlat")]
    medians = sorted(tuple(t.rows[0][1:]) for t in tables)
    assert medians == [("100,000", "80,000"), ("50,000", "40,000")]
    compared = comparison_tables(campaign.series)
    assert sorted("'long'" in t.title for t in compared) == [False, True]
    ratios = {"'long'" in t.title: row[1] for t in compared for row in t.rows
              if row[0] == "464xlat, 64 tester sessions / baseline"}
    assert ratios == {False: "0.40", True: "0.20"}


def test_the_measured_bottleneck_pairs_devices_of_the_same_search(tmp_path: Path) -> None:
    # Search "a": chain 99,000, CLAT 100,000, PLAT 180,000; search "b" (other settings): CLAT 80,000. Before,
    # the last [[search]] won and the chain was "above it: 124 %".
    records = []
    for search, clat in (("a", 100_000), ("b", 80_000)):
        records += [_summary("464xlat", "464xlat", 4, 99_000 if search == "a" else 79_000, search),
                    _summary("clat", "clat", 4, clat, search), _summary("plat", "plat", 4, 180_000, search)]
    campaign = load_campaign(storefix.write_store(tmp_path / "c.jsonl", records))
    found = {c.chain.search: c for c in comparisons(campaign.series)}
    assert set(found) == {"a", "b"}
    for search, comparison in found.items():
        assert {s.search for s in comparison.devices} == {search}
        (point,) = comparison.points
        assert point.bottleneck == "clat" and point.outcome == "reaches"
