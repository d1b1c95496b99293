from __future__ import annotations

import json
import signal
import socket
import subprocess
import time

import pytest

from xlatbench.scripts.trial import TesterOutputError, TrialResult, result_from_xlatperf
from xlatbench.scripts.xlatperf import (
    MAX_OUTSTANDING_PER_SOCKET,
    TesterOptions,
    find_tester,
    outstanding_per_socket,
    run_trial,
    sockets_needed,
    xlatperf_argv,
    xlatperf_bound_s,
)


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


def test_the_testers_verdict_decides_alone() -> None:
    # The tester judges a short send itself (dnsperf/src/report.cpp judge); Python takes its verdict as it is.
    reason = "10000 of 100000 scheduled queries were not sent"
    r = result_from_xlatperf(doc(90_000, 90_000, "tester-limited", [reason]), 10_000, 10)
    assert r.tester_limited and r.reasons == (reason,) and not r.passed()
    assert not result_from_xlatperf(doc(99_999, 99_999), 10_000, 10).tester_limited


def test_a_short_send_of_the_real_tester_reads_as_tester_limited(tmp_path) -> None:
    """xlatperf interrupted after about 1 s of a 60 s schedule: its JSON says tester-limited with reasons."""
    out = tmp_path / "r.json"
    proc = subprocess.Popen([str(find_tester()), "--server", "127.0.0.1", "--port", "9", "--rate", "1000",
                             "--duration", "60", "--timeout", "0.1", "--json", str(out), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130
    r = result_from_xlatperf(json.loads(out.read_text()), 1000, 60)
    assert r.tester_limited and 0 < r.sent < 60_000
    assert any("not sent" in reason for reason in r.reasons)
    assert any("interrupted" in reason for reason in r.reasons)


def verdict_doc(verdict: object) -> dict:
    return {**doc(10, 10), "verdict": verdict}


@pytest.mark.parametrize("bad", [{}, {"totals": {"sent": 1}}, {"totals": {"sent": 1, "valid": 1}},
                                 {"totals": {"sent": 1, "valid": 1}, "verdict": {"status": "weird"}},
                                 verdict_doc(None), verdict_doc("ok"), verdict_doc({"status": "ok"}),
                                 verdict_doc({"status": "ok", "reasons": "none"}),
                                 verdict_doc({"status": "ok", "reasons": ["odd"]}),
                                 verdict_doc({"status": "tester-limited", "reasons": []}),
                                 verdict_doc({"status": "tester-limited", "reasons": [3]})])
def test_malformed_json_is_a_clear_error(bad: dict) -> None:
    with pytest.raises(TesterOutputError, match="xlatperf"):
        result_from_xlatperf(bad, 1, 1)


def test_round_trip_through_dict() -> None:
    r = TrialResult(1000, 2, 2000, 1999, 0.0005, False, (), 1000, raw={"x": 1}, dut_stats={"cpu_s": {"a": 1}},
                    host_steal_pct={"0": 3.5})
    again = TrialResult.from_dict(r.to_dict())
    assert again == r and again.raw == {"x": 1} and again.dut_stats == {"cpu_s": {"a": 1}}
    assert again.host_steal_pct == {"0": 3.5}


def test_argv_follows_the_contract() -> None:
    argv = xlatperf_argv("/x/xlatperf", "203.0.113.56", 3000, 2, TesterOptions(threads=2, sender_cpus="0"),
                         "/tmp/r.json")
    assert argv[:5] == ["/x/xlatperf", "--server", "203.0.113.56", "--port", "53"]
    assert argv[argv.index("--rate") + 1] == "3000" and argv[argv.index("--duration") + 1] == "2"
    assert argv[argv.index("--sender-cpus") + 1] == "0"
    assert argv[-3:] == ["--json", "/tmp/r.json", "--quiet"]


# (rate queries/s, sockets, timeout s): on both sides of the limit, and where float rounding decides.
OUTSTANDING_CASES = [(131_072, 1, 0.25), (131_073, 1, 0.25), (327_680, 1, 0.1), (327_679, 1, 0.1),
                     (262_144, 2, 0.25), (262_145, 2, 0.25), (1_000_000, 4, 0.25), (999_999, 31, 1.0),
                     (1_000_000, 30, 1.0), (98_304, 3, 1.0), (98_305, 3, 1.0)]


@pytest.mark.parametrize(("rate", "sockets", "timeout"), OUTSTANDING_CASES)
def test_outstanding_limit_is_the_testers(rate: float, sockets: int, timeout: float) -> None:
    """Python refuses a rate exactly when xlatperf does (ceil(rate / sockets x timeout) > 32 768)."""
    run = subprocess.run([str(find_tester()), "--server", "127.0.0.1", "--port", "9", "--queries", "1",
                          "--rate", str(rate), "--ports-per-thread", str(sockets), "--timeout", str(timeout),
                          "--quiet"], capture_output=True, text=True, timeout=30, check=False)
    refused = "outstanding per socket" in run.stderr
    assert refused == (outstanding_per_socket(rate, sockets, timeout) > MAX_OUTSTANDING_PER_SOCKET)
    needed = sockets_needed(rate, timeout)
    assert outstanding_per_socket(rate, needed, timeout) <= MAX_OUTSTANDING_PER_SOCKET
    assert needed == 1 or outstanding_per_socket(rate, needed - 1, timeout) > MAX_OUTSTANDING_PER_SOCKET


def test_the_harness_waits_for_the_testers_own_bound() -> None:
    plain = TesterOptions(timeout_s=0.25)
    assert xlatperf_bound_s(60, plain) == pytest.approx(60 + 0.002 + 0.02 + 0.5)
    assert xlatperf_bound_s(1000, plain) == pytest.approx(1000 + 0.01 + 0.02 + 0.5)  # 1e-5 x window > 2 ms
    lenient = TesterOptions(timeout_s=0.1, extra_args=("--max-lag", "45", "--send-tolerance-abs=0.5"))
    assert xlatperf_bound_s(10, lenient) == pytest.approx(10 + 0.5 + 45 + 0.2)


def test_a_rate_the_tester_cannot_reach_is_a_tester_limited_trial_within_its_window() -> None:
    """Far above what the tester can send (loopback, no GSO), the trial ends within window + 1 s as a
    tester-limited result with the senders' stop in it: a result to store, never a TesterError."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # never read: the queries only have to go out
    sink.bind(("127.0.0.1", 0))
    options = TesterOptions(port=sink.getsockname()[1], threads=2, ports_per_thread=64, timeout_s=0.1,
                            extra_args=("--gso", "off"))
    started = time.monotonic()
    try:
        doc = run_trial([], find_tester(), "127.0.0.1", 4_000_000, 3, options)
    finally:
        sink.close()
    assert time.monotonic() - started < 3 + 1.0
    result = result_from_xlatperf(doc, 4_000_000, 3)
    assert result.tester_limited and not result.passed()
    assert doc["send"]["stop"]["reason"] == "send-bound"
    assert any("send bound" in reason for reason in result.reasons)
