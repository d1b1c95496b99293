"""Bottleneck by measurement on synthetic stores whose right answer is known: a chain beside its two
devices measured alone."""

import json
from pathlib import Path

import pytest

from xlatbench.analysis.measured_bottleneck import comparisons, measured_tables, single_dut_of
from xlatbench.analysis.report import write_report
from xlatbench.analysis.series import load_campaign

ENVELOPE = {"schema": "xlatbench.results/3", "written_utc": "2026-01-01T00:00:00.000+00:00",
            "campaign": {"name": "m", "file": "m.toml", "sha256": "0" * 64}, "dut_cpus": None,
            "tester": {"tool": "xlatperf", "version": "t", "options": {"timeout_s": 0.25}},
            "host": {"cpu_model": "test", "cpus_online": 2, "kernel": "6"},
            "sessions": {"count": 4, "swept": False}}
ERROR_QPS = 2000


def summary(setup: str, topology: str, cores: int, median: float | None, method: str = "fast",
            status: str = "ok") -> dict:
    stats = None if median is None else {"n": 2, "median": median, "min": median, "max": median,
                                         "p1": None, "p99": None, "dispersion": None}
    return {
        **ENVELOPE, "key": f"summary:{setup}/cores{cores}/default/{method}", "type": "summary",
        "setup": {"name": setup, "kind": "chain", "topology": topology}, "cores": cores,
        "dut": {"topology": topology}, "implementation": f"{topology}: tayga 0.9.2",
        "summary": {"method": method, "status": status, "rfc8219_exact": method == "rfc8219-binary",
                    "summary": stats, "tester_limit_qps": None, "throughputs_qps": [], "trials": 0,
                    "elapsed_s": 0.0, "settings_name": "default", "describe": "",
                    "settings": {"duration_s": 4, "rest_s": 1, "loss_ratio": 1e-4, "repetitions": 2,
                                 "error_qps": ERROR_QPS, "error_ratio": None}},
    }


def store(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def xlat_records(chain_qps: list[float]) -> list[dict]:
    """464XLAT: CLAT alone 100,000 and 150,000, PLAT alone 180,000 and 170,000 queries/s at 1 and 2 cores."""
    records = []
    alone = zip((1, 2), chain_qps, (100_000, 150_000), (180_000, 170_000), strict=True)
    for cores, chain, clat, plat in alone:
        records += [summary("464xlat", "464xlat", cores, chain), summary("clat", "clat", cores, clat),
                    summary("plat", "plat", cores, plat)]
    return records


def test_the_topologies_know_their_chain() -> None:
    assert [single_dut_of(t) for t in ("plat", "clat", "ce", "br", "mapt", "fake")] == \
        ["464xlat", "464xlat", "mapt", "mapt", None, None]


def test_the_slowest_device_alone_is_the_bottleneck_and_the_chain_reaches_it(tmp_path: Path) -> None:
    # 1 core: the chain 99,000 is within 2 x 2,000 of the CLAT's 100,000; 2 cores: 120,000 is 80 % of the
    # CLAT's 150,000 (still below the PLAT's 170,000), beyond the error.
    found = comparisons(load_campaign(store(tmp_path, xlat_records([99_000, 120_000]))).series)
    assert len(found) == 1
    one, two = found[0].points
    assert (one.bottleneck, one.reaches, one.error_qps) == ("clat", True, 2 * ERROR_QPS)
    assert (two.bottleneck, two.reaches) == ("clat", False)
    table = measured_tables(load_campaign(store(tmp_path, xlat_records([99_000, 120_000]))).series)[0]
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Bottleneck (lowest throughput alone)"] == ["clat", "clat"]
    assert rows["The chain reaches it (within the search error)"] == \
        ["yes (99% of it, error ± 4,000)", "no: 80% of it (error ± 4,000)"]
    assert rows["plat alone (queries/s)"] == ["180,000", "170,000"]


def test_the_plat_is_named_when_it_is_the_slower(tmp_path: Path) -> None:
    records = [summary("464xlat", "464xlat", 1, 95_000), summary("clat", "clat", 1, 200_000),
               summary("plat", "plat", 1, 96_500), summary("mapt", "mapt", 1, 60_000),
               summary("ce", "ce", 1, 90_000), summary("br", "br", 1, 61_000)]
    found = {c.chain.setup: c.points[0] for c in comparisons(load_campaign(store(tmp_path, records)).series)}
    assert (found["464xlat"].bottleneck, found["464xlat"].reaches) == ("plat", True)
    assert (found["mapt"].bottleneck, found["mapt"].reaches) == ("br", True)


@pytest.mark.parametrize("records", [
    [summary("464xlat", "464xlat", 1, 90_000), summary("clat", "clat", 1, 100_000)],  # one device only
    [summary("464xlat", "464xlat", 1, 90_000), summary("clat", "clat", 1, 100_000),
     summary("plat", "plat", 1, 100_000, method="rfc8219-binary")],  # the other device by another method
    [summary("mapt", "mapt", 1, 90_000), summary("clat", "clat", 1, 100_000),
     summary("plat", "plat", 1, 100_000)],  # devices of another chain
])
def test_no_verdict_without_both_devices_measured_alike(tmp_path: Path, records: list[dict]) -> None:
    assert measured_tables(load_campaign(store(tmp_path, records)).series) == []


def test_a_device_without_a_number_is_not_named(tmp_path: Path) -> None:
    records = [summary("464xlat", "464xlat", 1, 90_000), summary("clat", "clat", 1, None,
                                                                  status="tester-limited"),
               summary("plat", "plat", 1, 150_000)]
    point = comparisons(load_campaign(store(tmp_path, records)).series)[0].points[0]
    assert (point.bottleneck, point.reaches) == (None, None)  # the CLAT, without a number, may be slower
    table = measured_tables(load_campaign(store(tmp_path, records)).series)[0]
    assert table.rows[-2][1] == "not determined: a device has no throughput"


def test_a_chain_above_its_slower_device_is_flagged(tmp_path: Path) -> None:
    records = [summary("464xlat", "464xlat", 1, 150_000), summary("clat", "clat", 1, 100_000),
               summary("plat", "plat", 1, 180_000)]
    point = comparisons(load_campaign(store(tmp_path, records)).series)[0].points[0]
    assert (point.bottleneck, point.outcome) == ("clat", "above")
    table = measured_tables(load_campaign(store(tmp_path, records)).series)[0]
    assert table.rows[-1][1].startswith("above it: 150% (error ± 4,000; the measurements disagree")


def test_the_report_shows_it(tmp_path: Path) -> None:
    _, text = write_report(store(tmp_path, xlat_records([99_000, 120_000])), tmp_path / "out")
    assert "**Bottleneck by measurement: 464xlat beside each of its devices alone" in text
    assert "| The chain reaches it (within the search error) | yes (99% of it, error ± 4,000) |" in text
    assert "Bottleneck by measurement" in (tmp_path / "out" / "tables.csv").read_text()


def test_devices_within_their_searches_errors_name_none(tmp_path: Path) -> None:
    # CLAT 10,000 and PLAT 10,050 queries/s, each search stopping within ± 2,000: their order is not known.
    records = [summary("464xlat", "464xlat", 1, 9_900), summary("clat", "clat", 1, 10_000),
               summary("plat", "plat", 1, 10_050)]
    point = comparisons(load_campaign(store(tmp_path, records)).series)[0].points[0]
    assert point.bottleneck is None and point.outcome is None
    assert point.why == ("the two differ by less than their searches' errors (clat 10,000, plat 10,050 "
                         "queries/s, ± 4,000)")
    table = measured_tables(load_campaign(store(tmp_path, records)).series)[0]
    assert table.rows[-2][1].startswith("not determined: the two differ by less than their searches' errors")


def test_it_stands_beside_the_idle_verdict(tmp_path: Path) -> None:
    """verdicts.json and the report's verdict section carry the bottleneck by measurement of the same
    configuration beside the idle-time verdict."""
    idle_mean = {**summary("464xlat", "464xlat", 1, 99_000), "key": "idle-mean:464xlat/cores1",
                 "type": "idle-mean", "rate_qps": 99_000, "runs": 1, "interval_s": 1.0, "per_second": []}
    del idle_mean["summary"]
    out = tmp_path / "out"
    _, text = write_report(store(tmp_path, [*xlat_records([99_000, 120_000]), idle_mean]), out)
    (stored,) = json.loads((out / "verdicts.json").read_text())
    assert stored["by_measurement"]["bottleneck"] == "clat"
    assert stored["by_measurement"]["devices_qps"] == {"clat": 100_000, "plat": 180_000}
    section = text.split("## Bottleneck", 1)[1]
    assert ("bottleneck by measurement (each device alone): clat (clat alone 100,000, plat alone 180,000; "
            "the chain 99,000 queries/s; the chain reaches it: yes (99% of it, error ± 4,000))") in section
    assert "bottleneck by measurement (each device alone): clat" in (out / "report.html").read_text()
