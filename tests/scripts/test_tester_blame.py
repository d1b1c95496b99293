"""DUT loss before tester blame (issue 23, item 3): a trial the tester flagged is still a DUT failure when its
loss exceeds what the tester's own shortfall (unsent, egress drops, buffer drops, late sends) accounts for.
The simulated DUT's capacity and the tester's shortfall are fixed in advance; the results go through the
tester's own JSON (result_from_xlatperf), as a real trial's do."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xlatbench.scripts.clock import SimClock
from xlatbench.scripts.search import (
    OK,
    TESTER_LIMITED,
    SearchSettings,
    TrialRunner,
    mlrsearch_search,
    rfc8219_search,
)
from xlatbench.scripts.search.runner import FAIL, PASS, verdict
from xlatbench.scripts.trial import result_from_xlatperf

CAPACITY = 70_000.0  # queries/s the simulated DUT answers
SETTINGS = SearchSettings(max_rate_qps=200_000, error_qps=500, duration_s=10, rest_s=0, repetitions=1,
                          short_duration_s=2, short_rest_s=0)


def doc(rate: float, duration: float, valid: int, *, lag_s: float = 0.0, unsent: int = 0,
        buffer_drops: int = 0, egress_drops: int = 0, limited: bool = False) -> dict:
    sent = round(rate * duration) - unsent
    return {"totals": {"sent": sent, "valid": valid, "unsent": unsent, "tester_buffer_drops": buffer_drops,
                       "tester_egress_drops": egress_drops},
            "send": {"achieved_rate_qps": sent / duration, "max_lag_s": lag_s},
            "loss_ratio": 1 - valid / sent,
            "verdict": {"status": "tester-limited" if limited else "ok",
                        "reasons": [f"send lag {1000 * lag_s:.0f} ms > tolerance"] if limited else []}}


@dataclass
class StarvedTester:
    """A DUT of CAPACITY whose overload starves the tester: more than 5 % above CAPACITY every trial has one
    31 ms send stall, enough for the tester to flag it, while the DUT answers only CAPACITY queries/s."""

    trials: int = 0

    def measure(self, duration_s: float, rate_qps: float):
        self.trials += 1
        sent = round(rate_qps * duration_s)
        valid = min(sent, round(CAPACITY * duration_s))
        over = rate_qps > 1.05 * CAPACITY
        return result_from_xlatperf(doc(rate_qps, duration_s, valid, lag_s=0.031 if over else 0.0,
                                        limited=over), rate_qps, duration_s)


def test_thirty_percent_loss_with_a_31_ms_lag_is_the_duts() -> None:
    # Before: "tester-limited" (one tester flag hid 30 % loss).
    result = result_from_xlatperf(doc(100_098, 1, 70_069, lag_s=0.031, limited=True), 100_098, 1)
    assert result.tester_limited and result.tester_shortfall == 3_104  # ceil(100 098 x 0.031)
    assert verdict(result, 1e-4) == FAIL


@pytest.mark.parametrize("field,amount", [("buffer_drops", 30_000), ("egress_drops", 30_000)])
def test_loss_the_testers_own_drops_explain_stays_the_testers(field: str, amount: int) -> None:
    result = result_from_xlatperf(doc(100_000, 1, 70_000, limited=True, **{field: amount}), 100_000, 1)
    assert verdict(result, 1e-4) == TESTER_LIMITED


def test_unsent_queries_and_late_sends_explain_their_share_only() -> None:
    # 10 000 never sent, a 50 ms stall at 100 000/s (5 000 late): 14 000 lost are within that, 16 000 not.
    explained = result_from_xlatperf(doc(100_000, 1, 76_000, unsent=10_000, lag_s=0.05, limited=True),
                                     100_000, 1)
    assert explained.tester_shortfall == 15_000 and verdict(explained, 1e-4) == TESTER_LIMITED
    beyond = result_from_xlatperf(doc(100_000, 1, 74_000, unsent=10_000, lag_s=0.05, limited=True),
                                  100_000, 1)
    assert verdict(beyond, 1e-4) == FAIL


def test_a_lossless_flagged_trial_stays_tester_limited_and_a_clean_one_passes() -> None:
    flagged = result_from_xlatperf(doc(50_000, 1, 50_000, lag_s=0.031, limited=True), 50_000, 1)
    assert verdict(flagged, 1e-4) == TESTER_LIMITED
    assert verdict(result_from_xlatperf(doc(50_000, 1, 50_000), 50_000, 1), 1e-4) == PASS


@pytest.mark.parametrize("search", [rfc8219_search, mlrsearch_search])
def test_a_search_finds_the_dut_that_starves_the_tester(search) -> None:
    # Before: "tester limit reached at 100 000, no throughput" while the DUT lost 30 %.
    outcome = search(TrialRunner(StarvedTester(), clock=SimClock()), SETTINGS, "s")
    assert outcome.status == OK and outcome.tester_limit_qps is None
    assert CAPACITY - SETTINGS.error_qps <= outcome.throughput_qps <= CAPACITY
