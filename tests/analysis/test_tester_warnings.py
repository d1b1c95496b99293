"""xlatperf's warnings reach the report: a trial record keeps them (TrialResult.warnings), and the report
says them beside the conditions, one line per kind with the trials and configurations that carried it."""

from __future__ import annotations

import json
from pathlib import Path

import storefix

from xlatbench.analysis.report import write_report
from xlatbench.analysis.series import load_records
from xlatbench.analysis.tester_warnings import warnings_text

LINUX = {"topology": "baseline", "translators": {}, "kernel": {"implementation": "linux", "version": "4.19"}}
UNBOUND = ("veth0 has 4 receive queues and the tester bound 1: {n} replies landed on another queue and went "
           "to the kernel, so part of the loss is the tester's")


def result(valid: int, warnings: list[str] | None) -> dict:
    body = {"duration_s": 60.0, "sent": 1000, "valid": valid, "loss_ratio": 1 - valid / 1000,
            "tester_limited": bool(warnings), "reasons": ["unbound"] if warnings else [],
            "achieved_rate_qps": 1000.0, "dut_stats": None}
    return body if warnings is None else {**body, "warnings": warnings}


def store_with_warnings(tmp_path):
    one, two = storefix.context("baseline", 1, LINUX), storefix.context("baseline", 2, LINUX)
    records = [storefix.summary(one, 1000, 990, 1010), storefix.summary(two, 2000, 1990, 2010),
               storefix.trial(one, 0, 1000, "tester-limited", result(700, [UNBOUND.format(n=300)])),
               storefix.trial(two, 0, 1000, "tester-limited", result(750, [UNBOUND.format(n=250)])),
               storefix.trial(two, 1, 500, "pass", result(1000, []))]
    return storefix.write_store(tmp_path / "s.jsonl", records)


def test_warnings_of_a_kind_are_one_line_with_their_trials_and_configurations(tmp_path) -> None:
    lines = warnings_text(load_records(store_with_warnings(tmp_path)))
    assert lines == ["2 of 3 trials (baseline at 1 core(s), baseline at 2 core(s)): " + UNBOUND.format(n=300)]


def test_the_report_says_the_testers_warnings(tmp_path) -> None:
    report, text = write_report(store_with_warnings(tmp_path), tmp_path / "out")
    assert "Tester warnings" in text and UNBOUND.format(n=300) in text
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Tester warning" in html and "replies landed on another queue" in html


def test_a_store_without_warnings_says_none(tmp_path) -> None:
    ctx = storefix.context("baseline", 1, LINUX)
    records = [storefix.summary(ctx, 1000, 990, 1010),
               storefix.trial(ctx, 0, 1000, "pass", result(1000, None))]
    path = storefix.write_store(tmp_path / "s.jsonl", records)
    assert warnings_text(load_records(path)) == []
    _, text = write_report(path, tmp_path / "out")
    assert "Tester warnings" not in text
    assert json.loads(path.read_text().splitlines()[1])["trial"].get("warnings") is None


def test_a_trial_record_with_warnings_matches_the_store_schema(tmp_path) -> None:
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "data" / "schema" / "store.schema.json")
                        .read_text())
    trials = [json.loads(line) for line in store_with_warnings(tmp_path).read_text().splitlines()]
    trials = [t for t in trials if t["type"] == "trial"]
    for trial in trials:
        trial["search"]["settings"] = {"max_rate_qps": 1e6, "min_rate_qps": 0, "loss_ratio": 1e-4,
                                       "duration_s": 60, "rest_s": 10, "repetitions": 10}
        jsonschema.Draft202012Validator(schema).validate(trial)
    assert any(t["trial"]["warnings"] for t in trials)


def test_the_console_says_each_warning_of_a_trial() -> None:
    from xlatbench.scripts.campaign import warning_lines_of
    from xlatbench.scripts.trial import TrialResult

    said = TrialResult(rate_qps=1000, duration_s=1, sent=1000, valid=0, loss_ratio=1.0,
                       warnings=("most replies failed their UDP checksum (990 of 1000 datagrams): ...",))
    assert warning_lines_of("464xlat", 2, said) == [
        "464xlat, 2 core(s), trial at 1000 queries/s: xlatperf warns: most replies failed their UDP checksum "
        "(990 of 1000 datagrams): ..."]
    assert warning_lines_of("464xlat", 2, TrialResult(1000, 1, 1000, 1000, 0.0)) == []
