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
from xlatbench.scripts.trial import TrialResult, result_from_xlatperf

CAPACITY = 70_000.0  # queries/s the simulated DUT answers
SETTINGS = SearchSettings(max_rate_qps=200_000, error_qps=500, duration_s=10, rest_s=0, repetitions=1,
                          short_duration_s=2, short_rest_s=0)


def doc(rate: float, duration: float, valid: int, *, lag_s: float = 0.0, unsent: int = 0,
        buffer_drops: int = 0, egress_drops: int = 0, limited: bool = False) -> dict:
    """A version-1 document (tester_buffer_drops): older stores keep them and still read."""
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


def doc_v2(rate: float, valid: int, *, unread: int = 0, receive_drops: int = 0, unbound: int = 0,
           overruns: int = 0, warnings: tuple[str, ...] = ()) -> dict:
    """A version-2 document of a 1 s trial: every loss the tester attributes to itself is a count."""
    sent = round(rate)
    limited = bool(unread or receive_drops or unbound or overruns)
    return {"schema_version": 2,
            "totals": {"sent": sent, "valid": valid, "unsent": 0, "tester_egress_drops": 0,
                       "tester_receive_drops": receive_drops, "unread_at_end": unread,
                       "unbound_queue_replies": unbound},
            "send": {"achieved_rate_qps": sent, "max_lag_s": 0.0, "ring_overruns": overruns},
            "receive": {"final_drain": 0, "final_drain_s": 0.0, "unread_at_end": unread},
            "loss_ratio": 1 - valid / sent, "warnings": list(warnings),
            "verdict": {"status": "tester-limited" if limited else "ok",
                        "reasons": ["the tester's own loss"] if limited else []}}


def test_ten_thousand_replies_left_unread_are_the_testers_not_a_dut_failure() -> None:
    # Before: the shortfall ignored them (allowance 200 of 2 000 000 at 0.01 %): "fail", the DUT blamed.
    result = result_from_xlatperf(doc_v2(2_000_000, 1_990_000, unread=10_000), 2_000_000, 1)
    assert result.tester_shortfall == 10_000
    assert verdict(result, 1e-4) == TESTER_LIMITED
    # 10 000 unread cannot explain 30 000 lost: the rest is the DUT's.
    beyond = result_from_xlatperf(doc_v2(2_000_000, 1_970_000, unread=10_000), 2_000_000, 1)
    assert verdict(beyond, 1e-4) == FAIL


@pytest.mark.parametrize("field", ["receive_drops", "unbound", "overruns"])
def test_every_loss_the_tester_counts_as_its_own_stays_its_own(field: str) -> None:
    result = result_from_xlatperf(doc_v2(100_000, 90_000, **{field: 10_000}), 100_000, 1)
    assert result.tester_shortfall == 10_000
    assert verdict(result, 1e-4) == TESTER_LIMITED


def test_a_version_1_document_with_a_cut_final_read_leaves_the_share_unknown() -> None:
    old = doc(100_000, 1, 90_000, limited=True)
    old["receive"] = {"final_drain": 5, "final_drain_s": 0.3, "final_drain_cut": True}
    result = result_from_xlatperf(old, 100_000, 1)
    assert result.tester_shortfall is None and verdict(result, 1e-4) == TESTER_LIMITED
    old["receive"]["final_drain_cut"] = False
    assert result_from_xlatperf(old, 100_000, 1).tester_shortfall == 0


def test_xlatperf_warnings_travel_with_the_trial_result() -> None:
    said = ("most replies failed their UDP checksum (990 of 1000 datagrams): ...",)
    result = result_from_xlatperf(doc_v2(1000, 10, warnings=said), 1000, 1)
    assert result.warnings == said
    stored = result.to_dict(with_raw=False)
    assert stored["warnings"] == list(said)
    assert TrialResult.from_dict(stored).warnings == said
    # A record stored before warnings were kept reads them from its raw document.
    older = result.to_dict()
    del older["warnings"]
    assert TrialResult.from_dict(older).warnings == said
