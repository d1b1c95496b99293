"""The side-by-side search benchmark: both searches find the fake DUT's known capacity; progress is shown."""

import io

from xlatbench.scripts.bench import compare, simulated
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
