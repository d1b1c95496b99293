"""The report against known answers: the paper's own Tables 2 and 3 fed through the store format."""

import copy
import json
from pathlib import Path

import pytest

from xlatbench.analysis.report import write_report
from xlatbench.analysis.series import ReportError, load_campaign
from xlatbench.analysis.tables import throughput_table

CORES = [1, 2, 4, 8, 16]
# Lencse & Nagy 2022, Table 1 (baseline), Table 2 (Jool 464XLAT) and Table 3 (Jool MAP-T): median, minimum,
# maximum (qps) and the published "Proportion: current/previous" row.
PAPER = {
    # Table 1: Linux kernel IPv4 forwarding (the baseline).
    "baseline": ([420055, 732441, 1469081, 2028763, 2009385], [416256, 722655, 1445306, 2011487, 1981189],
                 [420322, 734943, 1479493, 2031865, 2032509], ["-", "1.74", "2.01", "1.38", "0.99"]),
    "464xlat": ([165403, 236869, 425021, 510155, 530064], [163280, 236185, 420311, 499999, 529881],
                [167041, 237553, 425782, 510321, 530222], ["-", "1.43", "1.79", "1.20", "1.04"]),
    "mapt": ([143498, 250858, 475051, 835180, 1183615], [140624, 245311, 470311, 812499, 1179686],
             [145314, 251953, 475818, 837295, 1184387], ["-", "1.75", "1.89", "1.76", "1.42"]),
}
JOOL = {"topology": "464xlat",
        "translators": {"dut1": {"implementation": "jool_siit", "version": "4.2.0-rc2"},
                        "dut2": {"implementation": "jool", "version": "4.2.0-rc2"}}}


# A version-1 envelope (stores written before the implementation label was stored): the label is made
# from "dut" when the store is read.
ENVELOPE = {"schema": "xlatbench.results/1", "written_utc": "2026-01-01T00:00:00.000+00:00",
            "campaign": {"name": "paper", "file": "paper.toml", "sha256": "0" * 64}, "dut_cpus": None,
            "tester": {"tool": "xlatperf", "version": "t", "options": {"timeout_s": 0.25}},
            "host": {"cpu_model": "Xeon E5-2683", "cpus_online": 32, "kernel": "4.19"}}
REPO = Path(__file__).resolve().parents[2]
LINUX = {"topology": "baseline", "translators": {},
         "kernel": {"implementation": "linux", "version": "4.19"}}


def summary_record(setup, cores, median, low, high, method="rfc8219-binary", status="ok"):
    return {
        **copy.deepcopy(ENVELOPE), "key": f"summary:{setup}/cores{cores}/{method}", "type": "summary",
        "setup": {"name": setup, "kind": "chain", "topology": setup}, "cores": cores,
        "dut": LINUX if setup == "baseline" else JOOL,
        "summary": {"method": method, "status": status, "rfc8219_exact": method == "rfc8219-binary",
                    "summary": {"n": 10, "median": median, "min": low, "max": high,
                                "p1": None, "p99": None, "dispersion": None},
                    "tester_limit_qps": None, "throughputs_qps": [], "trials": 0, "elapsed_s": 0.0,
                    "settings_name": "default", "describe": "",
                    "settings": {"duration_s": 60, "rest_s": 10, "loss_ratio": 1e-4, "repetitions": 10}},
    }


def write_store(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def paper_store(tmp_path):
    records = []
    for setup, (medians, lows, highs, _) in PAPER.items():
        records += [summary_record(setup, c, m, lo, hi)
                    for c, m, lo, hi in zip(CORES, medians, lows, highs, strict=True)]
    return write_store(tmp_path / "paper.jsonl", records)


@pytest.mark.parametrize("setup", PAPER)
def test_table_reproduces_the_papers_rows(paper_store, setup):
    series = next(s for s in load_campaign(paper_store).series if s.setup == setup)
    table = throughput_table(series)
    medians, lows, highs, proportions = PAPER[setup]
    rows = {row[0]: row[1:] for row in table.rows}
    assert table.header[1:] == [str(c) for c in CORES]
    assert rows["Median (queries/s)"] == [f"{m:,}" for m in medians]
    assert rows["Minimum (queries/s)"] == [f"{m:,}" for m in lows]
    assert rows["Maximum (queries/s)"] == [f"{m:,}" for m in highs]
    # The paper's scale-up row, recomputed here from its medians.
    assert rows["Proportion: current/previous"] == proportions
    assert "RFC 8219" in table.title
    assert ("linux forwarding" if setup == "baseline" else "jool_siit 4.2.0-rc2") in table.title


def test_report_writes_tables_figures_and_names_the_dut(paper_store, tmp_path):
    report, text = write_report(paper_store, tmp_path / "out")
    assert report.exists() and (tmp_path / "out" / "throughput-vs-cores.png").stat().st_size > 10_000
    html = (tmp_path / "out" / "report.html").read_text()
    assert "1,183,615" in html and "data:image/png;base64," in html
    assert "1,183,615" in text and "jool 4.2.0-rc2" in text
    csv_text = (tmp_path / "out" / "tables.csv").read_text()
    assert "Proportion: current/previous,-,1.43,1.79,1.20,1.04" in csv_text


def test_tester_limit_is_shown_as_such_not_as_a_number(tmp_path):
    record = summary_record("464xlat", 1, None, None, None, status="tester-limited")
    record["summary"]["summary"] = None
    record["summary"]["tester_limit_qps"] = 250000.0
    table = throughput_table(load_campaign(write_store(tmp_path / "s.jsonl", [record])).series[0])
    assert table.rows[0][1] == "tester limit at 250,000"


def test_an_empty_or_unfinished_store_says_what_to_do(tmp_path):
    with pytest.raises(ReportError, match="no records"):
        load_campaign(write_store(tmp_path / "empty.jsonl", []))
    trial_only = json.loads((REPO / "tests/scripts/data/store-v1-chain.jsonl").read_text().splitlines()[0])
    assert trial_only["type"] == "trial"
    with pytest.raises(ReportError, match="no finished search summary"):
        load_campaign(write_store(tmp_path / "t.jsonl", [trial_only]))


def test_comparison_flags_results_near_the_testers_own_ceiling(tmp_path):
    from xlatbench.analysis.tables import comparison_table

    loopback = summary_record("loopback", 1, 100000, 98000, 101000)
    loopback["setup"] = {"name": "loopback", "kind": "loopback"}
    records = [loopback,
               summary_record("baseline", 1, 95000, 94000, 96000),
               summary_record("464xlat", 1, 19000, 18000, 20000),
               summary_record("mapt", 1, 90000, 89000, 91000)]
    table = comparison_table(load_campaign(write_store(tmp_path / "c.jsonl", records)).series)
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["loopback self-test, tester + Knot alone (queries/s)"] == ["100,000"]
    assert rows["baseline / loopback self-test"] == ["0.95 !"]
    assert rows["464xlat / loopback self-test"] == ["0.19"]
    assert rows["464xlat / baseline"] == ["0.20"]
    assert rows["baseline: median (queries/s)"] == ["95,000"]
    # A translator chain this close to the baseline may be measuring the test system, not itself.
    assert rows["mapt / baseline"] == ["0.95 !"]


def test_several_search_tables_stay_separate(tmp_path):
    short = summary_record("464xlat", 1, 15000, 14000, 16000)
    full = summary_record("464xlat", 1, 16000, 15500, 16500)
    short["summary"]["settings_name"], full["summary"]["settings_name"] = "short", "full"
    full["key"] += "/full"
    series = load_campaign(write_store(tmp_path / "s.jsonl", [short, full])).series
    assert sorted((s.search, s.cells[1].median) for s in series) == [("full", 16000), ("short", 15000)]
    titles = [throughput_table(s).title for s in series]
    assert any("search 'short'" in t for t in titles) and any("search 'full'" in t for t in titles)


def test_a_median_over_fewer_searches_than_were_run_is_marked(tmp_path):
    record = summary_record("464xlat", 1, 165403, 163280, 167041)
    record["summary"]["summary"]["n"] = 7  # 3 of the 10 searches found no number
    table = throughput_table(load_campaign(write_store(tmp_path / "s.jsonl", [record])).series[0])
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Median (queries/s)"] == ["165,403 †"]
    assert rows["Searches with a result"] == ["7 of 10"]
    assert "† = not every search gave a number" in table.title


def test_dut_cores_shared_with_the_tester_are_said_so(tmp_path):
    shared = summary_record("464xlat", 2, 20000, 19000, 21000)
    shared["dut_cpus"] = {"cores": 2, "cpus": [0, 1],
                          "applied": {"dut1": {"cpus": [0, 1]}, "dut2": {"cpus": [0, 1]}}}
    shared["tester"]["options"].update({"sender_cpus": "0", "receiver_cpus": "0"})
    shared["setup"]["options"] = {"knot_cpus": [0]}
    apart = summary_record("464xlat", 1, 15000, 14000, 16000)
    apart["dut_cpus"] = {"cores": 1, "cpus": [1], "applied": {"dut1": {"cpus": [1]}, "dut2": {"cpus": [1]}}}
    apart["tester"]["options"].update({"sender_cpus": "0", "receiver_cpus": "0"})
    table = throughput_table(load_campaign(write_store(tmp_path / "s.jsonl", [apart, shared])).series[0])
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["DUT CPUs also running the tester/Knot"] == ["none", "0"]
    assert "'DUT cores' are not the DUTs' alone" in table.title


def test_sharing_the_placement_recorded_is_said_too(tmp_path):
    """An unpinned tester: the placement rule took it to be on CPU 0 and recorded DUT CPU 0 as shared."""
    record = summary_record("464xlat", 2, 20000, 19000, 21000)
    record["dut_cpus"] = {"cores": 2, "cpus": [0, 1], "placement": "with-test-system",
                          "shared_with_test_system": [0],
                          "applied": {"dut1": {"cpus": [0, 1]}, "dut2": {"cpus": [0, 1]}}}
    table = throughput_table(load_campaign(write_store(tmp_path / "s.jsonl", [record])).series[0])
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["DUT CPUs also running the tester/Knot"] == ["0"]


def test_a_scale_up_across_a_placement_change_is_marked(tmp_path):
    """16 CPUs, tester on 0, Knot on 1: 1-4 cores give each DUT its own CPUs, 8 cores make the DUTs share
    theirs. The 8/4 ratio then compares 8 CPUs for both with 4 for each: marked, and the placement shown."""
    records = []
    for cores, median, placement in ((2, 30000, "per-dut"), (4, 60000, "per-dut"), (8, 60000, "shared-duts")):
        record = summary_record("464xlat", cores, median, median - 1000, median + 1000)
        record["dut_cpus"] = {"cores": cores, "cpus": list(range(16 - cores, 16)), "placement": placement}
        records.append(record)
    table = throughput_table(load_campaign(write_store(tmp_path / "s.jsonl", records)).series[0])
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Proportion: current/previous"] == ["-", "2.00", "1.00 §"]
    assert rows["DUT CPU placement"] == ["per-dut", "per-dut", "shared-duts"]
    assert "§ = the DUTs' CPU placement changed" in table.title
    same = throughput_table(load_campaign(write_store(tmp_path / "t.jsonl", records[:2])).series[0])
    assert "DUT CPU placement" not in {row[0] for row in same.rows}
