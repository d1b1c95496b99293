"""Resume that never mixes (issue 23, item 8): every record carries the suite's commit, the tester build and
the host; a resume that would add records of another is refused unless allowed, then the report marks
the mixed cells; summaries and idle means written on resume take the context of the records they summarize.
The stores are made by a simulated campaign and then edited as a kill or another build would leave them."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from test_campaign import fake_campaign

from xlatbench.analysis.series import load_campaign as load_report
from xlatbench.analysis.tables import throughput_table
from xlatbench.data.records import IdleMean, SummaryEntry, provenance
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaign import CampaignRun, MixedResume
from xlatbench.scripts.campaignfile import parse_campaign
from xlatbench.scripts.hostinfo import suite_build

OLD_SUITE = {"describe": "v0.1-3-gdeadbee", "dirty": False, "diff_sha256": None}


def campaign(store: Path) -> dict:
    data = fake_campaign(store)
    data["campaign"]["methods"] = ["rfc8219-binary"]
    return data


def run(store: Path, allow_mixed: bool = False) -> CampaignRun:
    done = CampaignRun(parse_campaign(campaign(store), "t.toml", store), progress=False,
                       allow_mixed=allow_mixed)
    done.run()
    return done


def rewrite(store: Path, keep, change) -> None:
    """Keep the lines `keep` accepts, each passed through `change`."""
    lines = [json.loads(line) for line in store.read_text().splitlines()]
    store.write_text("".join(json.dumps(change(r)) + "\n" for r in lines if keep(r)))


def test_every_record_carries_the_suites_commit_tester_and_host(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    found = {provenance(r.context) for r in ResultStore(store).records()}
    assert len(found) == 1
    (mine,) = found
    assert mine.suite is not None and mine.suite.startswith(suite_build()["describe"])
    assert mine.tester == "fake" and mine.host
    assert mine.library == importlib.metadata.version("MLRsearch")  # the search library's version too


def _cut_after_first_repetition_of_cores2(store: Path) -> None:
    """A kill during cores 2: its repetitions 2-3, summary and idle capture lost; the rest by OLD_SUITE."""
    def keep(r: dict) -> bool:
        return "cores2" not in r["key"] or (r["type"] in ("trial", "search") and "/rep1" in r["key"])

    rewrite(store, keep, lambda r: {**r, "suite": OLD_SUITE})


def test_a_resume_by_another_commit_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    _cut_after_first_repetition_of_cores2(store)
    before = store.read_text()
    with pytest.raises(MixedResume, match=r"v0\.1-3-gdeadbee.*this run would add records of suite "
                                          r".*--allow-mixed"):
        run(store)
    assert store.read_text() == before, "nothing was measured or written"


def test_allowed_mixing_is_marked_in_the_table(tmp_path: Path) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    _cut_after_first_repetition_of_cores2(store)
    assert run(store, allow_mixed=True).new_trials > 0
    report = load_report(store)
    (series,) = report.series
    assert (series.cells[1].mixed, series.cells[2].mixed) == (False, True)
    table = throughput_table(series)
    assert table.rows[0][2].endswith("‡") and not table.rows[0][1].endswith("‡")
    assert "‡ = its trials were measured by more than one suite commit" in table.title
    assert len(report.provenances) == 2


def test_summary_and_idle_mean_written_on_resume_take_their_records_context(tmp_path: Path) -> None:
    # A kill between the last trial (or idle run) of cores 1 and its summary (idle mean): the resume writes
    # them without measuring, so no environment comes up; they must say what the trials say.
    store = tmp_path / "r.jsonl"
    run(store)
    measured = {"implementation": "tayga 0.9.2-8 as measured", "dut_cpus": {"cpus": [1], "applied": {}}}

    def change(r: dict) -> dict:
        return {**r, **measured} if r["type"] in ("trial", "idle-run") and "cores1" in r["key"] else r

    rewrite(store, lambda r: not (r["type"] in ("summary", "idle-mean") and "cores1" in r["key"]), change)
    assert run(store).new_trials == 0
    written = [r for r in ResultStore(store).records()
               if isinstance(r, SummaryEntry | IdleMean) and r.context.cores == 1]
    assert len(written) == 2
    for record in written:  # before: the label and placement of an environment that never came up
        assert record.context.implementation == "tayga 0.9.2-8 as measured"
        assert record.context.dut_cpus == {"cpus": [1], "applied": {}}


@pytest.mark.parametrize("field, value, named", [
    ("tester", {"tool": "xlatperf", "version": "0.0.9+gold", "options": {}}, "tester 0.0.9+gold"),
    ("host", {"hostname": "other-host"}, "host other-host"),
])
def test_a_resume_with_another_tester_build_or_host_is_refused(tmp_path: Path, field: str, value: dict,
                                                              named: str) -> None:
    store = tmp_path / "r.jsonl"
    run(store)
    rewrite(store, lambda r: "cores2" not in r["key"], lambda r: {**r, field: {**r[field], **value}})
    with pytest.raises(MixedResume, match=re.escape(named)):
        run(store)


def test_a_resume_with_another_mlrsearch_library_version_is_refused(tmp_path: Path) -> None:
    # Same commit, tester and host; only the MLRsearch library differs (an upgrade between kill and resume):
    # refused before anything is measured, naming both versions, like a resume by another commit.
    store = tmp_path / "r.jsonl"
    run(store)
    rewrite(store, lambda r: "cores2" not in r["key"],
            lambda r: {**r, "suite": {**r["suite"], "mlrsearch": "0.9"}})
    before = store.read_text()
    installed = re.escape(importlib.metadata.version("MLRsearch"))
    with pytest.raises(MixedResume, match=r"MLRsearch library 0\.9.*this run would add records of .*"
                                          r"MLRsearch library " + installed):
        run(store)
    assert store.read_text() == before, "nothing was measured or written"
    assert run(store, allow_mixed=True).new_trials > 0
    assert len(load_report(store).provenances) == 2
