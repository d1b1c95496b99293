"""xlatperf against a real knotd on loopback: every query answered, every answer valid."""

import pytest

from xlatbench.zones import KnotConfig, KnotServer

from .helpers import RELAXED_TIMING, check_consistency

pytestmark = [pytest.mark.root, pytest.mark.slow]


def knot(tmp_path, port: int) -> KnotServer:
    return KnotServer(tmp_path / "knot", KnotConfig(listen=(("127.0.0.1", port),)))


def test_ten_thousand_queries_at_a_low_rate_are_all_valid(tmp_path, port, run_xlatperf, validator):
    with knot(tmp_path, port):
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(port), "--rate", "2000",
                           "--queries", "10000", "--threads", "2", "--ports-per-thread", "3", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["sent"] == 10_000
    assert totals["valid"] == 10_000
    assert result["loss_ratio"] == 0
    for bucket in ("late", "rcode_errors", "nodata", "truncated", "malformed", "unexpected", "duplicate",
                   "unanswered", "send_errors", "tester_receive_drops", "unread_at_end"):
        assert totals[bucket] == 0, bucket
    assert result["verdict"] == {"status": "ok", "reasons": []}
    assert result["send"]["achieved_rate_qps"] == pytest.approx(2000, rel=0.01)
    assert 0 < result["latency"]["min"] <= result["latency"]["p50"] <= result["latency"]["max"] < 0.25
    assert len(result["threads"]) == 2 and all(len(t["ports"]) == 3 for t in result["threads"])
    assert "loss 0.0000 %" in run.stdout


def test_names_outside_the_zone_count_as_nxdomain(tmp_path, port, run_xlatperf, validator):
    # The zone holds the names of 10.0.0.0/16; those of 10.1.0.0/16 do not exist.
    with knot(tmp_path, port):
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(port), "--rate", "2000",
                           "--queries", "1000", "--subnet", "10.1.0.0/16", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    totals = run.result["totals"]
    assert totals["rcode"]["NXDOMAIN"] == 1000
    assert totals["valid"] == 0
    assert run.result["loss_ratio"] == 1


def test_knot_echoes_the_epoch_letter_case_after_the_id_wraps(tmp_path, port, run_xlatperf, validator):
    # One socket, 140 000 queries: IDs wrap twice, so epochs 1 and 2 flip the case of the domain's first
    # letters (dNs64perf.test, DNs64perf.test); a server that echoes the question as asked answers all.
    with knot(tmp_path, port):
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(port), "--rate", "20000",
                           "--queries", "140000", "--ports-per-thread", "1", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    totals = run.result["totals"]
    # Loss at a loaded knotd is possible; a reply in the wrong case would be unexpected instead.
    assert totals["unexpected"] == 0 and totals["malformed"] == 0 and totals["duplicate"] == 0
    assert totals["valid"] > 1.5 * 65536  # epochs 1 and 2 matched (a loaded knotd may be late or lose some)
