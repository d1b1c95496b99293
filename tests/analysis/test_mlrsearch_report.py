"""MLRsearch (RFC 9971) series in the report: the same value and mark path as RFC 8219 cells (n of R, †, ‡, ≥,
the tester limit), the goal in the table, and the side-by-side ratios, labelled as conditional throughput."""

from __future__ import annotations

from pathlib import Path

from test_report import summary_record, write_store

from xlatbench.analysis.report import tables_of
from xlatbench.analysis.series import load_campaign

GOAL = {"name": "rfc8219-25s", "loss_ratio": 1e-4, "exceed_ratio": 0.0, "relative_width": 0.0075,
        "initial_trial_duration_s": 3.0, "final_trial_duration_s": 25.0, "duration_sum_s": 25.0,
        "preceding_targets": 1, "expansion_coefficient": 2}


def mlr_summary(setup: str, cores: int, median: float | None, low: float | None, high: float | None,
                n: int = 10, status: str = "ok", tester_limit: float | None = None) -> dict:
    record = summary_record(setup, cores, median, low, high, method="mlrsearch", status=status)
    record["summary"]["summary"] = None if median is None else {**record["summary"]["summary"], "n": n}
    record["summary"]["tester_limit_qps"] = tester_limit
    record["summary"]["settings"]["duration_s"] = 25
    return record


def mlr_search(setup: str, cores: int, rep: int, value: float | None) -> dict:
    record = summary_record(setup, cores, value, value, value, method="mlrsearch")
    record.pop("summary")
    record["key"] = f"search:{setup}/cores{cores}/mlrsearch/rep{rep}"
    record["type"] = "search"
    record["search"] = {"search_id": f"{setup}/{cores}/{rep}", "method": "mlrsearch", "status": "ok",
                        "throughput_qps": value, "lower_qps": value, "upper_qps": value,
                        "tester_limit_qps": None, "trials": 1, "elapsed_s": 1.0, "trial_time_s": 1.0,
                        "rfc8219_exact": False, "settings_name": "default", "describe": "",
                        "settings": {"duration_s": 25, "rest_s": 10, "loss_ratio": 1e-4, "repetitions": 10},
                        "goals": [{"name": GOAL["name"], "goal": GOAL, "status": "ok",
                                   "conditional_throughput_qps": value, "relevant_lower_bound_qps": value,
                                   "relevant_upper_bound_qps": value, "max_load_qps": 4e6}]}
    return record


def test_mlrsearch_cells_carry_the_rfc_marks_the_goal_and_the_tester_limit(tmp_path: Path) -> None:
    records = [mlr_summary("464xlat", 1, 140_000, 139_000, 141_000, n=9, tester_limit=1_500_000),
               mlr_summary("464xlat", 2, 250_000, 249_000, 251_000, status="upper-bound-not-failed"),
               mlr_search("464xlat", 1, 1, 140_000)]
    campaign = load_campaign(write_store(tmp_path / "s.jsonl", records))
    (table,) = [t for t in tables_of(campaign) if t.title.startswith("Conditional throughput")]
    rows = {row[0].split(":")[0] if row[0].startswith("goal") else row[0]: row[1:] for row in table.rows}
    assert rows["goal 'rfc8219-25s'"] == ["140,000 † (139,000–141,000)", "≥ 250,000 (249,000–251,000)"]
    assert rows["Searches with a result"] == ["9 of 10", "10 of 10"]
    assert rows["Tester limit (queries/s)"] == ["1,500,000", "-"]
    assert rows["Proportion: current/previous (first goal)"] == ["-", "≥ 1.79 †"]
    goal = table.rows[0][0]
    assert "width 0.75 %" in goal and "trials 3 s then 25 s" in goal and "exceed ratio 0 %" in goal
    assert "timeout 0.25 s" in table.title and "25 s trials" in table.title and "not RFC 8219" in table.title
    assert "† = not every search gave a number" in table.title and "≥ = a search never failed" in table.title


def test_mlrsearch_series_get_the_side_by_side_ratios_labelled_as_conditional_throughput(tmp_path) -> None:
    records = [mlr_summary("baseline", 1, 400_000, 399_000, 401_000),
               mlr_summary("464xlat", 1, 160_000, 159_000, 161_000)]
    tables = tables_of(load_campaign(write_store(tmp_path / "s.jsonl", records)))
    (side,) = [t for t in tables if t.title.startswith("Medians side by side")]
    assert "conditional throughput" in side.title and "RFC 8219 exact)" in side.title
    assert {row[0]: row[1:] for row in side.rows}["464xlat / baseline"] == ["0.40"]


def test_a_report_with_both_methods_on_a_cell_says_whether_mlrsearch_lies_inside_the_rfc_range(tmp_path):
    records = [summary_record("464xlat", 1, 165_403, 163_280, 167_041),
               summary_record("464xlat", 2, 236_869, 236_185, 237_553),
               mlr_summary("464xlat", 1, 164_540, 163_000, 166_000),
               mlr_summary("464xlat", 2, 235_000, 234_000, 236_000)]
    tables = tables_of(load_campaign(write_store(tmp_path / "s.jsonl", records)))
    (table,) = [t for t in tables if t.title.startswith("MLRsearch against the RFC 8219 search")]
    rows = {row[0]: row[1:] for row in table.rows}
    # 164 540 lies inside [163 280, 167 041]: -0.52 % of 165 403; 235 000 lies below 236 185: -0.79 %.
    assert rows["464xlat, 1 DUT core(s)"][2] == "yes (-0.52 % of the RFC median)"
    assert rows["464xlat, 2 DUT core(s)"][2] == "**no** (-0.79 % of the RFC median)"
    assert rows["464xlat, 1 DUT core(s)"][0] == "165,403 [163,280, 167,041] over 10"
