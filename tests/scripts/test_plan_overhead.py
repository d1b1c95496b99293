"""`campaign plan`, and a running campaign's ETA, add each setup's measured per-trial overhead: here from a
store whose trials' wall times are set by hand to duration + 2 s (the known answer), and 0 s for a simulated
setup with no store."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from xlatbench.cli import main
from xlatbench.scripts.campaign import CampaignRun, Progress, estimate_search_s, estimate_search_trials
from xlatbench.scripts.campaignfile import load_campaign

CAMPAIGN = """
[campaign]
name = "overhead"
store = "{store}"
methods = ["rfc8219-binary"]
cores = [1]

[search]
max_rate_qps = 100000
error_qps = 5000
duration_s = 2
rest_s = 1
repetitions = 2

[idle]
runs = 0

[[setup]]
name = "sim"
kind = "fake"
capacity_qps = 30000
"""


def store_with_overhead(tmp_path: Path, extra_s: float) -> tuple[Path, Path, int]:
    """The campaign run once, its trials' wall times then set to duration + extra_s; (file, store, trials)."""
    store = tmp_path / "store.jsonl"
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(store=store))
    assert main(["campaign", "run", "--no-progress", str(path)]) == 0
    records = [json.loads(line) for line in store.read_text().splitlines()]
    for record in records:
        if record["type"] == "trial":
            record["trial"]["wall_s"] = record["trial"]["duration_s"] + extra_s
    store.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, store, sum(r["type"] == "trial" for r in records)


def test_the_running_eta_counts_the_stored_trials_overhead(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume with the bar shown: each search's estimate is its simulated trial time + 2 s x its simulated
    trials (what `campaign plan` adds), the trial time already done counts each stored trial's 2 s too, and
    the bar says it counts overhead."""
    path, _, stored = store_with_overhead(tmp_path, 2.0)
    started: list[tuple[list[float], float, float]] = []
    start = Progress.start

    def spy(self: Progress, name: str, estimates: list[float], idle_s: float, done_s: float) -> None:
        started.append((estimates, idle_s, done_s))
        start(self, name, estimates, idle_s, done_s)

    monkeypatch.setattr(Progress, "start", spy)
    out = io.StringIO()
    campaign = load_campaign(path)
    CampaignRun(campaign, out=out, progress=True).run()
    settings = campaign.settings("default")
    expected = estimate_search_s(settings, "rfc8219-binary") + 2.0 * estimate_search_trials(settings,
                                                                                            "rfc8219-binary")
    ((estimates, idle_s, done_s),) = started
    assert estimates == [pytest.approx(expected)] and idle_s == 0.0
    # Trials of 2 s with a 1 s rest between them (none before the first of each search).
    records = [json.loads(line) for line in campaign.store.read_text().splitlines()]
    trials = [r for r in records if r["type"] == "trial"]
    assert len(trials) == stored
    assert done_s == pytest.approx(sum(2.0 + 2.0 + r["trial"]["rest_before_s"] for r in trials))
    assert "s of trials and their overhead" in out.getvalue()


def test_plan_adds_the_stored_trials_overhead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store.jsonl"
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(store=store))
    assert main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "per-trial overhead of sim: 0.00 s (simulated time: trials take only their duration)" in out
    assert main(["campaign", "run", "--no-progress", str(path)]) == 0
    capsys.readouterr()
    lines = store.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    stored = 0
    for record in records:
        if record["type"] == "trial":
            record["trial"]["wall_s"] = record["trial"]["duration_s"] + 2.0
            stored += 1
    store.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert (f"per-trial overhead of sim: 2.00 s (median wall time minus duration of its {stored} trials in "
            f"{store})") in out, out
    campaign = load_campaign(path)
    trials = estimate_search_trials(campaign.settings("default"), "rfc8219-binary")
    extra = 2.0 * trials  # s; the line rounds it to whole seconds or minutes
    shown = f"{extra:.0f} s" if extra < 60 else f"{extra / 60:.0f} min"
    assert re.search(rf"search 'default', rfc8219-binary: 2 repetitions, ~\S+ \S+ of trials \+ ~{shown} "
                     "overhead", out), out
    assert f"overhead beyond the trials: ~{shown};" in out


def _hours_of(text: str, label: str) -> float:
    """A duration the plan's last line gives after `label` ('~3.9 h', '~52 min', '~40 s'), in hours."""
    number, unit = re.search(rf"{label}: ~([\d.]+) (h|min|s)\b", text).groups()
    return float(number) / {"h": 1, "min": 60, "s": 3600}[unit]


def test_plan_total_counts_idle_runs_opening_trials_and_a_stated_overhead(capsys) -> None:
    # The four-hour campaign on chains with no stored trials: before, its total was searches + idle runs only,
    # with the overhead "not measured" and left out and the opening trials above the tester's reach ignored.
    repo = Path(__file__).resolve().parents[2]
    campaign = repo / "campaigns" / "conditional-25s.toml"
    assert main(["campaign", "plan", str(campaign), "--dut-cores", "16"]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    parts = [_hours_of(last, label) for label in ("searches", "opening trials above the tester's reach",
                                                  "idle capture", "overhead beyond the trials")]
    assert all(part > 0 for part in parts), last
    # Each part is rounded to its unit; the total is their sum within that rounding.
    assert abs(_hours_of(last, "total") - sum(parts)) <= 0.1, last
    assert "per-trial overhead of 464xlat: 0.75 s (stated default for a chain setup, not measured" in out
    assert "not in the estimate" not in out
