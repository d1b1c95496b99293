"""The side-by-side search benchmark: both searches find the fake DUT's known capacity; progress is shown."""

import io

from xlatbench.scripts.bench import compare, median_agrees, print_comparison, simulated
from xlatbench.scripts.clock import SimClock
from xlatbench.scripts.fakes import FakeDut
from xlatbench.scripts.search import SearchSettings

SETTINGS = SearchSettings(min_rate_qps=0, max_rate_qps=400_000, error_qps=500, duration_s=60, rest_s=10,
                          repetitions=3, short_duration_s=5, short_rest_s=2)


def test_both_searches_find_the_known_capacity() -> None:
    c = simulated(165_000, noise=0.0, buffer_queries=0, settings=SETTINGS, seed=1)
    assert c.rfc.summary is not None and c.mlr.summary is not None
    assert abs(c.rfc.summary.median - 165_000) <= 500
    # MLRsearch's conditional throughput: its relevant lower bound, within the goal width (error_qps /
    # max_rate_qps = 0.125 % of the bound there), less its trial's loss (none below capacity).
    assert abs(c.mlr.summary.median - 165_000) <= 500
    assert c.same_answer


def test_progress_names_every_search_and_trial() -> None:
    clock = SimClock()
    out = io.StringIO()
    c = compare("fake", lambda: FakeDut(50_000, clock=clock, sleep=True), SETTINGS, clock, progress=out)
    lines = out.getvalue().splitlines()
    assert sum("search, repetition" in line for line in lines) == 2 * SETTINGS.repetitions
    assert sum(line.lstrip().startswith("trial ") for line in lines) == c.rfc.trials + c.mlr.trials
    assert any("-> pass" in line for line in lines) and any("-> fail" in line for line in lines)


def test_each_method_runs_its_own_settings_and_the_range_criterion_is_printed() -> None:
    # The chain comparison's shape: the RFC search with one campaign's settings, MLRsearch with another's.
    mlr = SearchSettings(max_rate_qps=400_000, error_ratio=0.01, duration_s=20, rest_s=5, repetitions=2,
                         short_duration_s=2, short_rest_s=1)
    c = simulated(50_000, noise=0.01, buffer_queries=0, settings=SETTINGS, seed=3, mlr_settings=mlr)
    assert len(c.rfc.outcomes) == 3 and len(c.mlr.outcomes) == 2
    assert {t.result.duration_s for o in c.rfc.outcomes for t in o.trials} == {60}
    assert max(t.result.duration_s for o in c.mlr.outcomes for t in o.trials) == 20
    rfc = [o.throughput_qps for o in c.rfc.outcomes]
    median = sorted(o.throughput_qps for o in c.mlr.outcomes)
    assert c.inside_rfc_range == (min(rfc) <= sum(median) / 2 <= max(rfc))
    out = io.StringIO()
    print_comparison(c, out)
    text = out.getvalue()
    assert "RFC 8219 bounds 0-400000 queries/s, error 500 queries/s" in text
    assert "MLRsearch bounds 0-400000 queries/s, error 1 % of the result" in text
    assert "full trials 20 s" in text
    verdict = "yes" if c.inside_rfc_range else "NO"
    assert f"(within the first goal's width where that is a point): {verdict}" in text


def test_the_range_criterion_on_hand_built_answers() -> None:
    assert median_agrees([100.0, 110.0], [104.0, 108.0, 120.0], 0.01)  # median 108 inside [100, 110]
    assert not median_agrees([100.0, 110.0], [90.0, 99.0, 120.0], 0.01)  # median 99 below 100
    assert median_agrees([100.0, 100.0], [100.9], 0.01) and not median_agrees([100.0, 100.0], [101.1], 0.01)
    assert median_agrees([], [1.0], 0.01) is None
