from __future__ import annotations

import pytest

from xlatbench.scripts.trial import TesterOutputError, TrialResult, result_from_xlatperf
from xlatbench.scripts.xlatperf import TesterOptions, xlatperf_argv


def doc(sent: int, valid: int, status: str = "ok", reasons: list[str] | None = None) -> dict:
    return {"schema_version": 1, "header": {"tool": "xlatperf", "version": "0.1"},
            "totals": {"sent": sent, "valid": valid}, "loss_ratio": 1 - valid / sent if sent else 1.0,
            "send": {"achieved_rate_qps": sent / 10}, "verdict": {"status": status, "reasons": reasons or []}}


def test_ok_trial() -> None:
    r = result_from_xlatperf(doc(100_000, 99_995), rate_qps=10_000, duration_s=10)
    assert not r.tester_limited and r.lost == 5 and r.passed(1e-4)
    assert r.achieved_rate_qps == 10_000


def test_loss_above_criterion_fails() -> None:
    r = result_from_xlatperf(doc(100_000, 99_980), 10_000, 10)
    assert not r.passed(1e-4) and not r.tester_limited


def test_tester_limited_verdict_is_never_dut_loss() -> None:
    r = result_from_xlatperf(doc(100_000, 50_000, "tester-limited", ["send window 12 s > 10 s"]), 10_000, 10)
    assert r.tester_limited and not r.passed()
    assert r.reasons == ("send window 12 s > 10 s",)


def test_sending_short_of_the_schedule_is_tester_limited() -> None:
    r = result_from_xlatperf(doc(90_000, 90_000), 10_000, 10)
    assert r.tester_limited and "sent 90000 of 100000" in r.reasons[0]


@pytest.mark.parametrize("bad", [{}, {"totals": {"sent": 1}}, {"totals": {"sent": 1, "valid": 1}},
                                 {"totals": {"sent": 1, "valid": 1}, "verdict": {"status": "weird"}}])
def test_malformed_json_is_a_clear_error(bad: dict) -> None:
    with pytest.raises(TesterOutputError):
        result_from_xlatperf(bad, 1, 1)


def test_round_trip_through_dict() -> None:
    r = TrialResult(1000, 2, 2000, 1999, 0.0005, False, (), 1000, raw={"x": 1}, dut_stats={"cpu_s": {"a": 1}})
    again = TrialResult.from_dict(r.to_dict())
    assert again == r and again.raw == {"x": 1} and again.dut_stats == {"cpu_s": {"a": 1}}


def test_argv_follows_the_contract() -> None:
    argv = xlatperf_argv("/x/xlatperf", "203.0.113.56", 3000, 2, TesterOptions(threads=2, sender_cpus="0"),
                         "/tmp/r.json")
    assert argv[:5] == ["/x/xlatperf", "--server", "203.0.113.56", "--port", "53"]
    assert argv[argv.index("--rate") + 1] == "3000" and argv[argv.index("--duration") + 1] == "2"
    assert argv[argv.index("--sender-cpus") + 1] == "0"
    assert argv[-3:] == ["--json", "/tmp/r.json", "--quiet"]
