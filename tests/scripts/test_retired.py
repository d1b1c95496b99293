"""The retired fast search: no campaign file or command runs it (one line says why and what to write
instead), while stores that hold its records still read, label them and refuse to resume in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_campaign import REPO
from test_store import DATA, lines, simulated_campaign_data

from xlatbench.analysis.series import load_campaign as load_report
from xlatbench.analysis.tables import throughput_table
from xlatbench.data.records import FAST_LABEL, SummaryEntry
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaignfile import CampaignFileError, load_campaign, parse_campaign
from xlatbench.scripts.clock import SimClock
from xlatbench.scripts.fakes import FakeDut
from xlatbench.scripts.search import SearchSettings, TrialRunner, repeat_search

RETIRED = "the fast search was retired on 2026-11-25 in favour of MLRsearch"


def xlatbench(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from xlatbench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)


@pytest.mark.parametrize("table", ['[campaign]\nname = "x"\nmethods = ["rfc8219-binary", "fast"]\n',
                                   '[campaign]\nname = "x"\n\n[idle]\nmethod = "fast"\n'])
def test_a_campaign_file_naming_the_fast_search_is_refused_in_one_line(tmp_path: Path, table: str) -> None:
    path = tmp_path / "old.toml"
    path.write_text(table + '\n[search]\nmax_rate_qps = 1000\nerror_qps = 10\nshort_duration_s = 1\n'
                    'short_rest_s = 0.5\n\n[[setup]]\nname = "s"\nkind = "fake"\ncapacity_qps = 500\n')
    with pytest.raises(CampaignFileError, match=RETIRED) as err:
        load_campaign(path)
    assert "write 'mlrsearch' instead" in str(err.value) and "\n" not in str(err.value)
    for action in ("run", "plan"):
        done = xlatbench("campaign", action, str(path), *(["--no-progress"] if action == "run" else []))
        assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert RETIRED in done.stderr and "Traceback" not in done.stderr


def test_the_search_command_and_repeat_search_refuse_the_fast_search() -> None:
    done = xlatbench("search", "--dut", "fake", "--repetitions", "1", "--method", "fast")
    assert done.returncode == 2 and RETIRED in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(ValueError, match=RETIRED):
        clock = SimClock()
        repeat_search(TrialRunner(FakeDut(1000, clock=clock), clock=clock),
                      SearchSettings(max_rate_qps=2000, error_qps=10), "fast", "x")


def test_short_trial_settings_of_old_campaign_files_still_read() -> None:
    # short_duration_s and short_rest_s were the fast search's; MLRsearch uses them (initial trials, the
    # "short" goal, the rest after a trial shorter than duration_s): an old file's values still count.
    data = simulated_campaign_data(("rfc8219-binary",))
    data["search"] = {**data["search"], "short_duration_s": 2, "short_rest_s": 0.5}
    settings = parse_campaign(data, "t.toml").searches[0][1]
    assert [g.initial_trial_duration_s for g in settings.mlr_goals()] == [2, 1]
    assert settings.rest_after(2) == 0.5 and settings.rest_after(settings.duration_s) == settings.rest_s


def test_a_store_with_fast_search_records_still_reads_and_labels_them() -> None:
    store = DATA / "store-v1-simulated.jsonl"
    summaries = [r for r in ResultStore(store).records() if isinstance(r, SummaryEntry)]
    fast = [s for s in summaries if s.method == "fast"]
    assert len(fast) == 2 and all(not s.rfc8219_exact and s.stats is not None for s in fast)
    report = load_report(store)
    labels = {series.method: throughput_table(series).title for series in report.series}
    assert FAST_LABEL == "fast search (retired, not RFC 8219 exact)"
    assert FAST_LABEL in labels["fast"] and FAST_LABEL not in labels["rfc8219-binary"]
    # The medians are the stored ones (34 750 queries/s at 2 cores, from the store's summary record).
    cells = next(s for s in report.series if s.method == "fast").cells
    assert cells[2].median == 34_750.0


def test_resuming_a_store_of_a_campaign_with_the_fast_search_is_refused_in_one_line(tmp_path: Path) -> None:
    store = tmp_path / "old.jsonl"
    store.write_bytes((DATA / "store-v1-simulated.jsonl").read_bytes())
    before = store.read_bytes()
    path = tmp_path / "t.toml"
    path.write_text(toml(simulated_campaign_data()))
    with pytest.raises(CampaignFileError, match=RETIRED):
        parse_campaign(simulated_campaign_data(), "t.toml", store)
    done = xlatbench("campaign", "run", str(path), "--store", str(store), "--no-progress")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert RETIRED in done.stderr
    assert store.read_bytes() == before and len(lines(store)) == 55


def toml(data: dict) -> str:
    """A campaign dict as a TOML file (tables of scalars and lists, an array of setup tables)."""
    out = []
    for name, table in data.items():
        rows = table if isinstance(table, list) else [table]
        for row in rows:
            out.append(f"[[{name}]]" if isinstance(table, list) else f"[{name}]")
            out += [f"{key} = {json.dumps(value)}" for key, value in row.items()]
    return "\n".join(out) + "\n"
