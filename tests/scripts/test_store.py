"""The results store against its schema (data/schema/store.schema.json): stores written by real campaign
runs validate line by line, every record survives a read/write round trip, and a store written before the
records change (tests/scripts/data/store-v1-*.jsonl, written by the campaign code of that time) still reads,
reports and resumes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fakechain
import jsonschema
import pytest
from test_campaign import chain_campaign, fake_campaign

from xlatbench.analysis.series import load_campaign as load_report
from xlatbench.data.records import (
    SCHEMA,
    IdleRun,
    SummaryEntry,
    TrialEntry,
    campaign_sha256,
    record_from_json,
)
from xlatbench.data.store import ResultStore, StoreError
from xlatbench.scripts.campaign import CampaignRun
from xlatbench.scripts.campaignfile import parse_campaign

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
TYPES = {"trial", "search", "summary", "idle-run", "idle-mean"}


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / "data" / "schema" / "store.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def lines(store: Path) -> list[dict]:
    return [json.loads(line) for line in store.read_text().splitlines()]


def assert_valid(validator: jsonschema.Draft202012Validator, store: Path) -> list[dict]:
    """Every line of the file as written validates; returns them."""
    written = lines(store)
    for record in written:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(record)]
        assert not errors, (record["key"], errors[:3])
    return written


def simulated_campaign_data(methods: tuple[str, ...] = ("rfc8219-binary", "fast")) -> dict:
    """The campaign that wrote tests/scripts/data/store-v1-simulated.jsonl (same sha256; its second method is
    the fast search, since retired); with other methods, the same campaign as the suite runs it now."""
    data = fake_campaign(Path("unused"))
    data["search"] = {**data["search"], "repetitions": 2, "error_qps": 4000}
    data["campaign"] = {**data["campaign"], "cores": [1, 2], "methods": list(methods)}
    data["idle"] = {"runs": 1}
    return data


def test_a_simulated_campaign_store_matches_the_schema(tmp_path: Path, validator) -> None:
    store = tmp_path / "s.jsonl"
    data = simulated_campaign_data(("rfc8219-binary", "mlrsearch"))
    CampaignRun(parse_campaign(data, "t.toml", store), progress=False).run()
    written = assert_valid(validator, store)
    assert {r["type"] for r in written} == TYPES
    assert {r["schema"] for r in written} == {SCHEMA}
    assert {r["implementation"] for r in written} == {"fake n/a"}


def test_an_emulated_chain_store_matches_the_schema(tmp_path: Path, monkeypatch, validator) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    for key, value in fakechain.env_with_fake_tester(tmp_path, 5000, FAKE_REALTIME="1").items():
        monkeypatch.setenv(key, value)
    store = tmp_path / "c.jsonl"
    CampaignRun(parse_campaign(chain_campaign(store, idle_runs=1), "c.toml", store), progress=False).run()
    written = assert_valid(validator, store)
    assert {r["type"] for r in written} == TYPES
    trial = next(r for r in written if r["type"] == "trial")
    assert trial["raw"]["header"]["tool"] == "xlatperf" and trial["trial"]["dut_stats"]["cpu_s"]
    # Steal measured over each trial, for every CPU of this host (the fake tester ran for real).
    steal = trial["trial"]["host_steal_pct"]
    assert set(steal) == {str(cpu) for cpu in range(os.cpu_count() or 1)}
    assert all(0 <= v <= 100 for v in steal.values())
    assert next(r for r in written if r["type"] == "idle-run")["samples"], "a real-time run has CPU samples"


@pytest.mark.parametrize("name", ["simulated", "chain"])
def test_every_record_survives_a_round_trip(name: str) -> None:
    for line in lines(DATA / f"store-v1-{name}.jsonl"):
        record = record_from_json(line)
        assert record_from_json(record.to_json()) == record
        added = ("schema", "implementation", "sessions", "suite")
        written = {k: v for k, v in record.to_json().items() if k not in added}
        assert written.pop("hosts", None) is None, "fields added since read as None (no per-host samples)"
        assert written.pop("excluded", None) is None, "an old idle mean names no run it left out"
        assert written.pop("rate_of", None) is None, "an old idle record names its search in rate_source"
        assert written == {k: v for k, v in line.items() if k != "schema"}, \
            "reading loses nothing of a version-1 record"
        # Without "sessions" a record had the tester options' own flows: 1 thread x 4 ports here.
        assert (record.context.sessions, record.context.swept) == (4, False)


@pytest.mark.parametrize("name", ["simulated", "chain"])
def test_a_store_written_before_the_records_change_still_reads(name: str, validator) -> None:
    stored = list(ResultStore(DATA / f"store-v1-{name}.jsonl").records())
    assert {r.TYPE for r in stored} == TYPES
    # The label the old analysis made from "dut" when reading is now made once, when the record is read.
    labels = {r.context.implementation for r in stored}
    assert labels == ({"fake n/a"} if name == "simulated" else {"baseline"})
    for record in stored:  # written back, an old record is a valid current one
        errors = list(validator.iter_errors(record.to_json()))
        assert not errors, (record.key, errors[0].message)
    report = load_report(DATA / f"store-v1-{name}.jsonl")
    assert [sorted(s.cells) for s in report.series] == ([[1, 2], [1, 2]] if name == "simulated" else [[1, 2]])
    assert len(report.idle) == 2


def test_an_old_store_resumes_without_measuring_again(tmp_path: Path) -> None:
    # The v1 store's campaign also ran the fast search, since retired: its file is refused
    # (tests/scripts/test_retired.py). Its RFC 8219 records and idle runs (taken at the RFC 8219 median), as
    # the same campaign without the fast search would have written them (that file's sha256), still resume.
    data = simulated_campaign_data(("rfc8219-binary",))
    sha = campaign_sha256(data)
    store = tmp_path / "old.jsonl"
    kept = [record for record in lines(DATA / "store-v1-simulated.jsonl") if "/fast" not in record["key"]]
    assert len(kept) < len(lines(DATA / "store-v1-simulated.jsonl"))
    store.write_text("".join(json.dumps({**r, "campaign": {**r["campaign"], "sha256": sha}}) + "\n"
                             for r in kept))
    before = store.read_bytes()
    run = CampaignRun(parse_campaign(data, "t.toml", store), progress=False)
    results = run.run()
    assert run.new_trials == 0 and store.read_bytes() == before
    summaries = {r.key: r for r in ResultStore(store).records() if isinstance(r, SummaryEntry)}
    for result in results:
        stored = summaries[result.key.summary_key]
        assert stored.stats is not None and result.repeated.summary is not None
        assert stored.stats.median == result.repeated.summary.median


def test_the_schema_refuses_what_the_reader_refuses(tmp_path: Path, validator) -> None:
    record = lines(DATA / "store-v1-chain.jsonl")[0]
    current = record_from_json(record).to_json()
    assert validator.is_valid(current)
    assert not validator.is_valid(record), "a version-1 record is not a current one (no label)"
    assert not validator.is_valid({**current, "surprise": 1})
    assert not validator.is_valid({**current, "trial": {**current["trial"], "verdict": "maybe"}})
    broken = {k: v for k, v in current.items() if k != "search"}
    assert not validator.is_valid(broken)
    store = tmp_path / "b.jsonl"
    store.write_text(json.dumps(current) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(StoreError, match=r"b.jsonl:2: record 'trial:fc/cores1/default/rfc8219-binary/rep1:0' "
                                         r"lacks 'search'"):
        list(ResultStore(store).records())


def test_a_store_of_an_unknown_version_is_refused_in_one_line(tmp_path: Path) -> None:
    record = {**lines(DATA / "store-v1-chain.jsonl")[0], "schema": "xlatbench.results/9"}
    store = tmp_path / "new.jsonl"
    store.write_text(json.dumps(record) + "\n")
    with pytest.raises(StoreError) as err:
        list(ResultStore(store).records())
    message = str(err.value)
    assert "\n" not in message and "xlatbench.results/9" in message and "newer xlatbench" in message


def test_typed_records_carry_what_the_campaign_measured() -> None:
    stored = list(ResultStore(DATA / "store-v1-chain.jsonl").records())
    trial = next(r for r in stored if isinstance(r, TrialEntry))
    assert trial.search.step == 0 and trial.search.method == "rfc8219-binary" and trial.verdict in (
        "pass", "fail")
    assert trial.time_s == pytest.approx(trial.result["duration_s"] + trial.rest_before_s)
    idle = next(r for r in stored if isinstance(r, IdleRun))
    assert idle.context.cores == 1 and idle.samples and idle.rate_qps > 0
