"""dnsperf/bench/xdp_bench.py without root: its searches find a known threshold, its schedule rule reads
hand-built xlatperf JSON, and its targets are judged from a hand-built run whose truth is fixed."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import bench_module


@pytest.fixture(scope="module")
def bench() -> Any:
    with bench_module("xdp_bench") as module:
        yield module


def test_bisection_finds_the_highest_rate_that_holds_to_one_step(bench):
    grid = bench.rate_grid("50000:650000:25000")
    search = bench.Bisection("g", bench.PASSES, grid)
    while not search.done:
        rate = search.next_rate()
        search.record(rate, rate <= 312_500)
    answer = search.answer()
    assert (answer["highest_qps"], answer["lowest_failing_qps"]) == (300_000, 325_000)
    assert len(answer["tried"]) <= bench.search_trials(grid) == 5


@pytest.mark.parametrize(("threshold", "highest", "text"), [
    (10**9, 650_000, "at least 650000 q/s (the top of the search's range held)"),
    (0, None, "below 50000 q/s (the search's lowest rate failed)"),
])
def test_bisection_says_when_the_answer_lies_outside_the_range(bench, threshold, highest, text):
    search = bench.Bisection("g", bench.PASSES, bench.rate_grid("50000:650000:25000"))
    while not search.done:
        rate = search.next_rate()
        search.record(rate, rate <= threshold)
    assert (search.answer()["highest_qps"], search.answer()["text"]) == (highest, text)


class FakeBench:
    """Trials of a generator that keeps its schedule up to `offers` q/s and passes up to `passes` q/s."""

    def __init__(self, offers: int, passes: int) -> None:
        self.knot_io, self.offers, self.passes = "xdp", offers, passes
        self.trials: dict[tuple[str, int], dict[str, Any]] = {}
        self.measured = 0

    def trial(self, name: str, rate: int) -> dict[str, Any]:
        if (name, rate) not in self.trials:
            self.measured += 1
            self.trials[(name, rate)] = {
                "on_schedule": rate <= self.offers, "verdict": "pass" if rate <= self.passes else "fail",
                "knotd_core_share": rate / 1e6, "cpu_busy_pct": {}, "sent": rate, "valid": rate,
                "cpu_s_per_million_sent": 1.0, "cpu_s_per_million_valid": 1.0}
        return self.trials[(name, rate)]


def test_both_searches_find_their_thresholds_and_share_trials(bench):
    fake = FakeBench(offers=400_000, passes=200_000)
    answers = bench.run_searches(fake, ["g"], bench.rate_grid("50000:650000:25000"))
    found = {a["criterion"]: a["highest_qps"] for a in answers}
    assert found == {bench.ON_SCHEDULE: 400_000, bench.PASSES: 200_000}
    tried = sum(len(a["tried"]) for a in answers)
    assert fake.measured < tried  # the first midpoint (350 000) was measured once for both
    assert answers[1]["at_highest"]["knotd_core_share"] == pytest.approx(0.2)


def xlatperf_doc(sent: int, scheduled: int, max_lag_s: float, excess_s: float, egress: int = 0) -> dict:
    return {"totals": {"sent": sent, "tester_egress_drops": egress},
            "send": {"scheduled_queries": scheduled, "max_lag_s": max_lag_s, "excess_s": excess_s,
                     "tolerance_s": 0.002, "window_s": 2 + excess_s, "scheduled_window_s": 2.0},
            "config": {"max_lag_s": 0.02}}


@pytest.mark.parametrize(("doc", "on_schedule"), [
    (xlatperf_doc(400_000, 400_000, 0.005, 0.005), True),  # its own 2 ms window check is left out
    (xlatperf_doc(400_000, 400_000, 0.0301, 0.001), False),  # later than --max-lag
    (xlatperf_doc(399_000, 400_000, 0.001, 0.0), False),  # queries left unsent
    (xlatperf_doc(400_000, 400_000, 0.001, 0.0, egress=3), False),  # dropped on the way out
])
def test_xlatperf_schedule_is_read_from_its_json(bench, doc, on_schedule):
    assert bench.xlatperf_on_schedule(doc)[0] is on_schedule


def test_kxdpgun_slack_is_xlatperfs_tolerance_plus_max_lag(bench):
    assert bench.schedule_slack(200_000, 2) == 4400  # 200 000 q/s x (2 ms + 20 ms)


def run_trial(generator: str, rate: int, cpu_sent: float, cpu_valid: float, share: float) -> dict[str, Any]:
    return {"generator": generator, "rate_qps": rate, "cpu_s_per_million_sent": cpu_sent,
            "cpu_s_per_million_valid": cpu_valid, "on_schedule": True, "knotd_core_share": share,
            "sent": rate * 2, "valid": rate * 2, "cpu_busy_pct": {"1": 50.0}}


def search(generator: str, criterion: str, highest: int, failing: int, share: float) -> dict[str, Any]:
    return {"generator": generator, "criterion": criterion, "highest_qps": highest,
            "lowest_failing_qps": failing, "text": f"{highest} q/s", "tried": [],
            "at_highest": {"knotd_core_share": share, "cpu_busy_pct": {"1": 60.0}}}


def test_targets_are_judged_from_the_figures(bench):
    trials = [run_trial("kxdpgun", 100_000, 3.0, 3.0, 0.3), run_trial("xlatperf-xdp", 100_000, 2.7, 2.8, 0.3),
              run_trial("kxdpgun", 200_000, 2.0, 2.5, 0.5), run_trial("xlatperf-xdp", 200_000, 2.0, 2.2, 0.5),
              {**run_trial("kxdpgun", 325_000, 2.0, 2.0, 0.9), "links": {"server_end": {"rx_dropped": 1234}}}]
    searches = [search("kxdpgun", bench.ON_SCHEDULE, 375_000, 400_000, 0.6),
                search("xlatperf-xdp", bench.ON_SCHEDULE, 350_000, 375_000, 0.6),
                search("kxdpgun", bench.PASSES, 300_000, 325_000, 0.55),
                search("xlatperf-xdp", bench.PASSES, 250_000, 275_000, 0.4)]
    text = bench.targets([{"knot_io": "xdp", "trials": trials, "searches": searches}], [100_000, 200_000])
    assert text[0].startswith("(a) Knot xdp")
    assert "100,000 q/s: 2.80 vs 3.00 CPU-s per million (0.93 x, met)" in text[0]
    assert "200,000 q/s: 2.20 vs 2.00 CPU-s per million (1.10 x, not met)" in text[0]
    assert text[1].endswith("kxdpgun 375000 q/s: not met.")
    assert "highest passing rate 300,000 q/s (kxdpgun); knotd used 0.55 of a core" in text[2]
    assert ": met (threshold 0.8 of a core); at 325,000 q/s, which failed" in text[2]
    assert "knotd used 0.90, the server's veth end dropped 1,234 on receive" in text[2]


@pytest.mark.parametrize("argv", [["--search", "1:2"], ["--search", "9:5:1"], ["--generators", "x"],
                                  ["--knot-io", "xdp,xdp"], ["--rates", "1e5"], ["--duration", "0"]])
def test_bad_options_get_one_line_and_exit_2(bench, argv, capsys):
    assert bench.main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xdp_bench: ") and err.count("\n") == 1


def test_dry_run_prints_the_plan_without_measuring(bench, capsys):
    assert bench.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "9 trials at fixed rates [100000, 200000, 300000] q/s and at most 30 search trials" in out


def test_report_merges_out_files_into_tables_and_targets(bench, tmp_path, capsys):
    made = {"script": "dnsperf/bench/xdp_bench.py", "repo_commit": "abc", "kernel": "6.18", "cpus_online": 2,
            "xlatperf": {"version": "xlatperf 0.1.0", "path": "/x"}, "knotd": "knotd 3.2.6",
            "kxdpgun": "kxdpgun 3.2.6"}
    cond = {"knot": "knotd, 1 UDP worker", "generators_cpu": 0, "trial_s": 2, "rest_s": 1.0,
            "xlatperf": "1x64", "kxdpgun": "one thread", "fixed_rates_qps": [100_000],
            "search": {"method": "bisection", "low_qps": 50_000, "high_qps": 650_000,
                       "resolution_qps": 25_000, "max_trials_per_search": 5}}
    paths = []
    for io in ("socket", "xdp"):
        trials = [{**run_trial(name, 100_000, 3.0, 3.0, 0.3), "knot_io": io, "verdict": "pass",
                   "generator_user_s": 0.1, "generator_system_s": 0.5}
                  for name in ("kxdpgun", "xlatperf-xdp")]
        searches = [search(name, criterion, 300_000, 325_000, 0.4) for name in ("kxdpgun", "xlatperf-xdp")
                    for criterion in (bench.ON_SCHEDULE, bench.PASSES)]
        run = {"knot_io": io, "started_utc": "t0", "ended_utc": "t1",
               "load_average": {"before": [1, 1, 1], "after": [2, 2, 2]}, "trials": trials,
               "searches": searches}
        paths.append(tmp_path / f"{io}.json")
        paths[-1].write_text(bench.json.dumps({"produced_by": made, "conditions": cond, "runs": [run]}))
    assert bench.main(["--report", *map(str, paths), "--markdown", str(tmp_path / "out.md")]) == 0
    text = (tmp_path / "out.md").read_text()
    row = "| socket | 100,000 | kxdpgun | 200,000 | 200,000 | yes | pass | 0.60 (0.10) | 3.00 | 3.00 | 0.30 |"
    assert row in text
    assert "| xdp | xlatperf-xdp | 300000 q/s | 300000 q/s | 0.40 | 0 |" in text
    assert "(c) Knot in XDP mode: highest passing rate 300,000 q/s" in text
    paths[0].write_text("{}")
    assert bench.main(["--report", str(paths[0])]) == 1
    assert "is no xdp_bench --out document" in capsys.readouterr().err
