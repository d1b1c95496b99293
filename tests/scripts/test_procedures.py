"""RFC 8219's latency (§7.2), PDV (§7.3) and frame loss rate (§7.4) procedures of a campaign ([[procedure]],
scripts.procedures; analysis.procedures): the arithmetic against known answers (a simulated DUT whose loss at
each fraction of the rate is known; latency statistics from known per-trial numbers), the records against the
store schema, a resume that measures nothing twice, and bad tables refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from xlatbench.analysis.procedures import delay_figures, latency_tables, procedure_figures
from xlatbench.analysis.report import write_report
from xlatbench.data.records import (
    CampaignRef,
    Context,
    ProcedureTrial,
    RateOf,
    procedure_key,
    record_from_json,
)
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaign import CampaignRun
from xlatbench.scripts.campaignfile import CampaignFileError, load_campaign, parse_campaign

REPO = Path(__file__).resolve().parents[2]
CAPACITY = 20_000
START_LOSS = 10  # queries the simulated DUT loses at the start of every trial


def campaign_data(**procedure_overrides: object) -> dict:
    """One simulated DUT of known capacity and fixed per-trial loss, 1 and 2 cores, three procedures."""
    return {
        "campaign": {"name": "procs", "methods": ["rfc8219-binary"], "cores": [1, 2]},
        "search": {"max_rate_qps": 100_000, "error_qps": 200, "duration_s": 60, "rest_s": 1,
                   "repetitions": 3},
        "procedure": [
            {"kind": "latency", "repetitions": 3, "duration_s": 5},
            {"kind": "pdv", "repetitions": 2, "duration_s": 5},
            {"kind": "flr", "repetitions": 2, "duration_s": 10, "fractions": [1.2, 1.0, 0.5, 0.1],
             **procedure_overrides},
        ],
        "setup": [{"name": "sim", "kind": "fake", "capacity_qps": CAPACITY, "trial_start_loss": START_LOSS,
                   "cores_available": 2}],
    }


def run(store: Path, data: dict | None = None) -> CampaignRun:
    campaign = CampaignRun(parse_campaign(data or campaign_data(), "procs.toml", store), progress=False)
    campaign.run()
    return campaign


def procedure_records(store: Path) -> list[ProcedureTrial]:
    return [r for r in ResultStore(store).records() if isinstance(r, ProcedureTrial)]


def known_flr(rate: float, duration: float, capacity: float) -> float:
    """The simulated DUT's loss at a rate (FakeDut, no noise): it forwards at most capacity x duration
    queries and loses START_LOSS of them at the start of every trial."""
    sent = round(rate * duration)
    valid = min(sent, round(capacity * duration)) - START_LOSS
    return (sent - valid) / sent


def test_frame_loss_rate_equals_the_simulated_loss_at_every_fraction(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    flr = [r for r in procedure_records(store) if r.procedure == "flr"]
    # 2 core counts x 2 repetitions x 4 steps, each at its fraction of the search's median, highest first.
    assert len(flr) == 16
    assert [r.fraction for r in flr[:4]] == [1.2, 1.0, 0.5, 0.1]
    for record in flr:
        capacity = CAPACITY * record.context.cores  # scaling 1
        assert record.rate_qps == round(record.fraction * record.throughput_qps)
        assert abs(record.throughput_qps - capacity) <= 200  # the search's own known answer
        sent, valid = record.result["sent"], record.result["valid"]
        assert (sent - valid) / sent == pytest.approx(known_flr(record.rate_qps, 10, capacity), abs=1e-12)
    table = next(t for t in latency_tables(ResultStore(store).records()) if t.title.startswith("Frame loss"))
    assert table.header[4:8] == ["FLR at 120 % (%)", "FLR at 100 % (%)", "FLR at 50 % (%)", "FLR at 10 % (%)"]
    for row in table.rows:
        cores = int(row[1])
        throughput = next(r.throughput_qps for r in flr if r.context.cores == cores)
        expected = [known_flr(round(f * throughput), 10, CAPACITY * cores) for f in (1.2, 1.0, 0.5, 0.1)]
        assert row[4:8] == [f"{100 * e:.4f}" for e in expected]
        assert row[8] == "not RFC 8219 §7.4 compliant: 2 repetitions of 10 s"
    # 10 lost of 10 s at 10 % of 20 000 queries/s: 10 / 20 000 = 0.05 %, a figure checkable by hand.
    assert table.rows[0][7] == f"{100 * 10 / round(0.1 * flr[0].throughput_qps * 10):.4f}"


def trial(procedure: str, repetition: int, latency: dict | None, sent: int = 100_000, valid: int = 100_000,
          repetitions: int = 3, duration: float = 5.0, tester_limited: bool = False) -> ProcedureTrial:
    context = Context(CampaignRef("c", "c.toml", "0" * 64), {"name": "chain", "kind": "chain"}, 1, None,
                      {"implementation": "impl", "version": "1"}, "impl 1", {"options": {}}, {})
    spec = {"kind": procedure, "repetitions": repetitions, "duration_s": duration, "rest_s": None,
            "search": "default", "method": "rfc8219-binary", "fractions": [1.0]}
    result = {"rate_qps": 20_000.0, "duration_s": duration, "sent": sent, "valid": valid,
              "loss_ratio": 1 - valid / sent, "tester_limited": tester_limited, "reasons": [],
              "achieved_rate_qps": 20_000.0, "dut_stats": None, "rest_before_s": 0.0, "wall_s": duration}
    return ProcedureTrial(key=procedure_key("chain", 1, None, "default", "rfc8219-binary", procedure,
                                            repetition),
                          context=context, procedure=procedure, repetition=repetition, fraction=1.0,
                          throughput_qps=20_000.0, rate_qps=20_000.0, duration_s=duration, spec=spec,
                          result=result, raw=None if latency is None else {"latency": latency},
                          rate_of=RateOf("default", "rfc8219-binary", False, False))


def latency_doc(minimum: float, p50: float, p999: float) -> dict:
    return {"min": minimum, "p50": p50, "p90": p50, "p99": p999, "p999": p999, "max": p999 * 2}


def test_latency_and_pdv_are_medians_of_known_per_trial_figures() -> None:
    # Three trials: medians 1, 3, 2 ms; 99.9th percentiles 10, 30, 20 ms; minima 0.5, 0.2, 0.1 ms.
    docs = [latency_doc(0.0005, 0.001, 0.010), latency_doc(0.0002, 0.003, 0.030),
            latency_doc(0.0001, 0.002, 0.020)]
    trials = [trial("latency", i + 1, d) for i, d in enumerate(docs)]
    trials += [trial("pdv", i + 1, d) for i, d in enumerate(docs)]
    latency = delay_figures(trials, "latency")[0]
    assert latency.typical == pytest.approx(0.002)  # median of 1, 3, 2 ms
    assert latency.worst == pytest.approx(0.020)  # median of 10, 30, 20 ms
    pdv = delay_figures(trials, "pdv")[0]
    assert sorted(pdv.pdv_s) == pytest.approx([0.0095, 0.0199, 0.0298])  # p99.9 - min per trial
    assert pdv.pdv == pytest.approx(0.0199)
    tables = latency_tables(trials)
    lat_row = tables[0].rows[0]
    assert lat_row[4:7] == ["2.000", "20.000", "3 of 3"]
    # These records predate the tag (no from_s, no tagged_after_s): the whole trial, and the row says so.
    assert lat_row[7] == "not RFC 8219 §7.2 compliant: 3 repetitions of 5 s; whole trials, no warm-up cut"
    assert tables[1].rows[0][4:7] == ["19.900", "9.500", "29.800"]
    assert "tagged queries" in tables[0].title


def test_lost_queries_make_the_worst_case_infinite_and_tester_limited_trials_stay_out() -> None:
    # 0.2 % of the queries unanswered: the 99.9th percentile of all queries is a lost one (RFC 8219 §7.2
    # counts a lost frame as infinitely late); the tester-limited trial is not the DUT's.
    trials = [trial("latency", 1, latency_doc(0.0001, 0.001, 0.01), sent=100_000, valid=99_800),
              trial("latency", 2, latency_doc(0.0001, 0.001, 0.01), sent=100_000, valid=99_800),
              trial("latency", 3, latency_doc(0.0001, 0.009, 0.09), tester_limited=True)]
    figures = delay_figures(trials, "latency")[0]
    assert math.isinf(figures.worst) and figures.tester_limited == 1 and len(figures.typical_s) == 2
    row = latency_tables(trials)[0].rows[0]
    assert row[5] == "> timeout" and row[6] == "2 of 3 (1 tester-limited, left out)"


def test_rfc_compliant_settings_say_so() -> None:
    trials = [trial("latency", i, latency_doc(0.0001, 0.001, 0.01), repetitions=20, duration=120)
              for i in range(1, 21)]
    assert latency_tables(trials)[0].rows[0][7] == "20 × 120 s (RFC 8219 §7.2); whole trials, no warm-up cut"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / "data" / "schema" / "store.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def test_procedure_records_validate_and_round_trip(tmp_path: Path,
                                                   validator: jsonschema.Draft202012Validator) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    lines = [json.loads(line) for line in store.read_text().splitlines()]
    procedures = [line for line in lines if line["type"] == "procedure-trial"]
    assert len(procedures) == 2 * (3 + 2 + 8)
    for line in procedures:
        errors = [e.message for e in validator.iter_errors(line)]
        assert not errors, (line["key"], errors[:3])
        assert record_from_json(line).to_json() == line
    assert len({line["key"] for line in lines}) == len(lines)
    broken = {**procedures[0], "procedure": "jitter"}
    assert list(validator.iter_errors(broken))


def test_a_resume_measures_no_procedure_trial_twice(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    whole = store.read_text().splitlines(keepends=True)
    again = run(store)
    assert again.new_trials == 0 and store.read_text().splitlines(keepends=True) == whole
    # Cut the store after the first core count's latency trials: the resume measures only what is missing,
    # and the store ends as the uninterrupted one did (same keys, same figures).
    cut = next(i for i, line in enumerate(whole) if '"procedure":"pdv"' in line)
    store.write_text("".join(whole[:cut]))
    run(store)
    resumed = [json.loads(line) for line in store.read_text().splitlines()]
    first = [json.loads(line) for line in whole]
    assert [r["key"] for r in resumed] == [r["key"] for r in first]
    assert [r.get("trial", {}).get("valid") for r in resumed] == \
        [r.get("trial", {}).get("valid") for r in first]


def test_the_report_shows_the_procedure_tables_and_figures(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    _, text = write_report(store, tmp_path / "report")
    assert "RFC 8219 §7.2 latency" in text and "RFC 8219 §7.3 packet delay variation" in text
    assert "Frame loss rate (RFC 8219 §7.4" in text and "(simulated DUT: no latency)" in text
    assert "not RFC 8219 §7.2 compliant: 3 repetitions of 5 s" in text
    assert (tmp_path / "report" / "flr.png").stat().st_size > 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert '<section id="procedures"><h2>RFC 8219 latency, PDV and frame loss rate' in html
    captions = [c for c, _ in procedure_figures(ResultStore(store).records(), tmp_path)]
    assert captions[0].startswith("Frame loss")


@pytest.mark.parametrize(("table", "says"), [
    ({"kind": "jitter"}, "kind must be one of ['latency', 'pdv', 'flr'], got 'jitter'"),
    ({"kind": "latency", "repetitions": 0}, "repetitions must be an integer >= 1, got 0"),
    ({"kind": "latency", "repetitions": 2.5}, "repetitions must be an integer >= 1"),
    ({"kind": "pdv", "duration_s": -1}, "duration_s must be a number > 0, got -1"),
    ({"kind": "pdv", "rest_s": -1}, "rest_s must be a number >= 0"),
    ({"kind": "latency", "fractions": [0.5]}, "fractions is for kind = \"flr\" only"),
    ({"kind": "flr", "fractions": [0, 0.5]}, "fractions must be a non-empty list of numbers in (0, 2]"),
    ({"kind": "flr", "fractions": [0.5, 0.5]}, "fractions has repeated values"),
    ({"kind": "flr", "search": "nope"}, "search 'nope' names no [[search]] table"),
    ({"kind": "flr", "method": "mlrsearch"}, "method 'mlrsearch' is not one of the campaign's methods"),
    ({"kind": "flr", "duration": 5}, "unknown key(s) ['duration']"),
    ({"kind": "pdv", "tagged_after_s": 10}, "tagged_after_s is for kind = \"latency\" only"),
    ({"kind": "latency", "duration_s": 5, "tagged_after_s": 5}, "tagged_after_s must be a whole number"),
    ({"kind": "latency", "tagged_after_s": 1.5}, "tagged_after_s must be a whole number"),
])
def test_bad_procedure_tables_are_refused_in_one_line(tmp_path: Path, table: dict, says: str) -> None:
    data = campaign_data()
    data["procedure"] = [table]
    with pytest.raises(CampaignFileError) as caught:
        parse_campaign(data, "procs.toml", tmp_path / "r.jsonl")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_same_procedure_twice_and_a_lone_table_are_refused(tmp_path: Path) -> None:
    data = campaign_data()
    data["procedure"] = [{"kind": "pdv"}, {"kind": "pdv"}]
    with pytest.raises(CampaignFileError, match="the same kind twice"):
        parse_campaign(data, "procs.toml", tmp_path / "r.jsonl")
    data["procedure"] = {"kind": "pdv"}
    with pytest.raises(CampaignFileError, match=r"\[\[procedure\]\] tables"):
        parse_campaign(data, "procs.toml", tmp_path / "r.jsonl")


def test_rfc_defaults_and_the_loopback_campaign_file() -> None:
    data = campaign_data()
    data["procedure"] = [{"kind": "latency"}, {"kind": "pdv"}, {"kind": "flr"}]
    latency, pdv, flr = parse_campaign(data, "procs.toml", Path("unused.jsonl")).procedures
    assert (latency.repetitions, latency.duration_s, latency.tagged_after_s) == (20, 120.0, 60)
    assert pdv.tagged_after_s == 0
    assert (pdv.repetitions, pdv.duration_s) == (20, 60.0)
    assert flr.steps() == [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    demo = load_campaign(REPO / "campaigns" / "procedures-loopback.toml")
    assert [p.kind for p in demo.procedures] == ["latency", "pdv", "flr"]
    assert len(demo.procedures[2].fractions) == 10


def test_until_lossless_stops_a_repetition_after_that_many_clean_steps(tmp_path: Path) -> None:
    # RFC 2544 §26.3: step down until two successive trials lose nothing. The simulated DUT (no start loss
    # here) loses exactly what exceeds its capacity: the steps above it lose, the first two below it end
    # the repetition.
    data = campaign_data(until_lossless=2, fractions=[1.3, 1.2, 1.1, 0.9, 0.8, 0.7, 0.6])
    data["setup"][0]["trial_start_loss"] = 0
    data["campaign"]["cores"] = [1]
    store = tmp_path / "r.jsonl"
    run(store, data)
    flr = [r for r in procedure_records(store) if r.procedure == "flr"]
    expected = [(rep, f) for rep in (1, 2) for f in (1.3, 1.2, 1.1, 0.9, 0.8)]
    assert [(r.repetition, r.fraction) for r in flr] == expected
    assert all((r.result["sent"] > r.result["valid"]) == (r.fraction > 1) for r in flr)
    before = store.read_text()
    assert run(store, data).new_trials == 0 and store.read_text() == before
    data["procedure"][2]["until_lossless"] = -1
    with pytest.raises(CampaignFileError, match="until_lossless must be an integer >= 0"):
        parse_campaign(data, "procs.toml", store)


def test_latency_counts_only_the_tagged_seconds_and_says_so() -> None:
    # Three seconds of a trial: 1000 queries each; the first second lost 500 (a warm-up), the tagged seconds
    # (after 1 s) none. The tester's histogram (from_s = 1) holds only tagged replies; the all-queries
    # percentile must count the tagged queries only: the 99.9th percentile is then a measured delay, where
    # over the whole trial (1/6 lost) it would be infinite.
    tagged = trial("latency", 1, {**latency_doc(0.0001, 0.001, 0.01), "from_s": 1.0}, sent=3000, valid=2500)
    tagged.raw["series"] = [{"second": 1, "sent": 1000, "valid": 500},
                            {"second": 2, "sent": 1000, "valid": 1000},
                            {"second": 3, "sent": 1000, "valid": 1000}]
    figures = delay_figures([tagged], "latency")[0]
    assert figures.worst == pytest.approx(0.01) and figures.typical == pytest.approx(0.001)
    assert latency_tables([tagged])[0].rows[0][7] == ("not RFC 8219 §7.2 compliant: 3 repetitions of 5 s; "
                                                      "queries sent after 1 s")


def test_latency_trials_ask_the_tester_for_the_tag_and_the_others_do_not(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    data = campaign_data()
    data["procedure"][0]["tagged_after_s"] = 3
    run(store, data)
    records = procedure_records(store)
    by_kind = {kind: {r.context.tester["options"]["latency_from_s"] for r in records if r.procedure == kind}
               for kind in ("latency", "pdv", "flr")}
    assert by_kind == {"latency": {3.0}, "pdv": {0.0}, "flr": {0.0}}
    assert {r.spec["tagged_after_s"] for r in records if r.procedure == "latency"} == {3}


def test_the_tag_reaches_xlatperfs_command_line() -> None:
    from xlatbench.scripts.xlatperf import TesterOptions, xlatperf_argv

    argv = xlatperf_argv("xlatperf", "127.0.0.1", 1000, 120, TesterOptions(latency_from_s=60), "/tmp/x.json")
    assert argv[argv.index("--latency-from") + 1] == "60"
    plain = xlatperf_argv("xlatperf", "127.0.0.1", 1000, 2, TesterOptions(), "/tmp/x.json")
    assert "--latency-from" not in plain
