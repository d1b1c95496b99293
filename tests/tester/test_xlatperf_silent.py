"""xlatperf against a port where nothing listens: no valid reply, a normal end, valid JSON."""

from .helpers import RELAXED_TIMING, check_consistency


def test_nothing_listening_is_total_loss_and_a_normal_end(port, run_xlatperf, validator):
    run = run_xlatperf("--server", "127.0.0.1", "--port", str(port), "--rate", "1000", "--queries", "500",
                       "--timeout", "0.1", "--threads", "2", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["sent"] == 500
    assert totals["valid"] == 0
    assert totals["received"] == 0
    assert totals["unanswered"] == 500
    assert totals["send_errors"] == 0  # ICMP port unreachable must not turn into send errors
    assert result["loss_ratio"] == 1
    assert result["verdict"]["status"] == "ok"  # the tester did its part: the loss is the server's
    assert result["latency"]["count"] == 0 and result["latency"]["p50"] is None
    assert "loss 100.0000 %" in run.stdout


def test_ipv6_works_the_same(run_xlatperf, validator):
    run = run_xlatperf("--server", "::1", "--port", "9", "--rate", "1000", "--queries", "100",
                       "--timeout", "0.05", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    assert run.result["config"]["server"] == "::1"
    assert run.result["totals"]["sent"] == 100
