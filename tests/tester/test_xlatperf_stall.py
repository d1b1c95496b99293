"""A sender stalled inside a burst (LD_PRELOAD seam, dnsperf/tests/stall_shim.cpp) is judged tester-limited.

At 200 000 queries/s with a 1 ms tick, each wake-up sends about 200 queries in several full sendmmsg
batches; one full batch is held 50 ms. The burst then catches up, so the send window still ends on
time: only the per-call lag (or the retry count) can tell.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from xlatbench.zones import KnotConfig, KnotServer

from .helpers import RELAXED_TIMING, check_consistency
from .peer import Peer, answer_after

STALL_MS = 50


@pytest.fixture
def shim(xlatperf: Path) -> Path:
    path = xlatperf.parent / "libxlatperf_stall_shim.so"
    if not path.is_file():
        pytest.skip(f"{path} not built (configure with -DXLATBENCH_TESTS=ON)")
    return path


def run_stalled(xlatperf: Path, shim: Path, tmp_path: Path, mode: str) -> dict:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # never read: the queries only have to go out
    sink.bind(("127.0.0.1", 0))
    out = tmp_path / f"{mode}.json"
    env = dict(os.environ, LD_PRELOAD=str(shim), XLATPERF_SHIM_CALL="300", XLATPERF_SHIM_MS=str(STALL_MS),
               XLATPERF_SHIM_MODE=mode)
    try:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(sink.getsockname()[1]),
                               "--rate", "200000", "--queries", "100000", "--ports-per-thread", "1",
                               "--gso", "off",  # the seam wraps sendmmsg
                               "--timeout", "0.1", "--quiet", "--json", str(out)],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
    finally:
        sink.close()
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_a_stall_inside_a_burst_is_tester_limited(xlatperf, shim, tmp_path, validator):
    result = run_stalled(xlatperf, shim, tmp_path, "sleep")
    validator.validate(result)
    check_consistency(result)
    assert result["send"]["max_lag_s"] >= STALL_MS / 1000 * 0.9
    assert result["verdict"]["status"] == "tester-limited"
    assert any("behind its schedule" in reason for reason in result["verdict"]["reasons"])


def test_sends_retried_on_a_full_socket_are_tester_limited(xlatperf, shim, tmp_path, validator):
    result = run_stalled(xlatperf, shim, tmp_path, "eagain")
    validator.validate(result)
    assert result["send"]["would_block"] > 0
    assert result["send"]["max_retry_stall_s"] >= STALL_MS / 1000 * 0.9
    assert result["verdict"]["status"] == "tester-limited"
    assert any("send buffer full" in reason and "longest stall" in reason
               for reason in result["verdict"]["reasons"])


@pytest.mark.parametrize("failing", [1, 3])  # a receiver's start; a sender's after both receivers started
def test_a_thread_that_cannot_start_ends_the_run_with_exit_1(xlatperf, shim, failing):
    env = dict(os.environ, LD_PRELOAD=str(shim), XLATPERF_SHIM_FAIL_THREAD=str(failing))
    proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--threads", "2", "--queries", "100",
                           "--quiet"], capture_output=True, text=True, timeout=30, check=False, env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("xlatperf: cannot start thread xlp-") and proc.stderr.count("\n") == 1


def test_a_failed_run_leaves_an_earlier_json_file_untouched(xlatperf, tmp_path):
    out = tmp_path / "result.json"
    out.write_text('{"earlier": true}\n')
    args = ["--server", "127.0.0.1", "--bind", "10.255.255.1", "--queries", "10", "--quiet",
            "--json", str(out)]
    proc = subprocess.run([str(xlatperf), *args], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1
    assert out.read_text() == '{"earlier": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_every_port_carries_its_share_when_a_tick_needs_several_batches(xlatperf, tmp_path):
    # 200 000 queries/s, 1 ms tick, batch 64, 4 ports: about 200 queries a wake-up, more than 3 batches.
    # Sent round-robin by sendmmsg call, 3 ports would take a full batch each and the 4th the rest.
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    out = tmp_path / "spread.json"
    try:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(sink.getsockname()[1]),
                               "--rate", "200000", "--queries", "100000", "--ports-per-thread", "4",
                               "--timeout", "0.1", "--quiet", "--max-lag", "0", "--json", str(out)],
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        sink.close()
    assert proc.returncode == 0, proc.stderr
    per_port = json.loads(out.read_text())["threads"][0]["sent_per_port"]
    assert len(per_port) == 4 and sum(per_port) == 100_000
    assert max(per_port) - min(per_port) <= 64


def test_the_burst_offered_in_100_us_is_reported(xlatperf, tmp_path):
    # 10 000 queries/s with a 1 ms tick: each wake-up sends its 10 due queries in one sendmmsg.
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    out = tmp_path / "burst.json"
    try:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(sink.getsockname()[1]),
                               "--rate", "10000", "--queries", "5000", "--ports-per-thread", "1",
                               "--quiet", "--max-lag", "0", "--json", str(out)],
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        sink.close()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["send"]["max_queries_in_100us"] >= 10
    assert result["threads"][0]["max_queries_in_100us"] == result["send"]["max_queries_in_100us"]


UNREACHABLE_QPS = 4_000_000  # far above what loopback sendmmsg without GSO carries on this machine kind
BOUND_WINDOW_S = 3


def test_a_rate_the_tester_cannot_reach_ends_at_its_send_bound(xlatperf, tmp_path, validator):
    """Behind schedule, the senders stop at window + send tolerance + --max-lag (before: they sent the whole
    schedule, many times the window); the JSON says when and why, and the verdict is tester-limited."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # never read: the queries only have to go out
    sink.bind(("127.0.0.1", 0))
    out = tmp_path / "bound.json"
    started = time.monotonic()
    try:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(sink.getsockname()[1]),
                               "--rate", str(UNREACHABLE_QPS), "--duration", str(BOUND_WINDOW_S),
                               "--threads", "2", "--ports-per-thread", "64", "--gso", "off",
                               "--timeout", "0.1", "--quiet", "--json", str(out)],
                              capture_output=True, text=True, timeout=120, check=False)
    finally:
        sink.close()
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    validator.validate(result)
    check_consistency(result)
    assert elapsed < BOUND_WINDOW_S + 1.0, f"the trial ran {elapsed:.1f} s for a {BOUND_WINDOW_S} s window"
    stop = result["send"]["stop"]
    assert stop["reason"] == "send-bound"
    assert stop["bound_s"] == pytest.approx(BOUND_WINDOW_S + 0.002 + 0.02)
    assert stop["bound_s"] <= stop["at_s"] < stop["bound_s"] + 0.5
    assert any(t["stop_reason"] == "send-bound" for t in result["threads"])
    assert result["totals"]["sent"] < result["send"]["scheduled_queries"]
    assert result["verdict"]["status"] == "tester-limited"
    assert any("at the send bound" in reason for reason in result["verdict"]["reasons"])


def test_a_schedule_sent_in_full_says_so(run_xlatperf):
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    try:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(sink.getsockname()[1]), "--rate", "10000",
                           "--queries", "2000", "--timeout", "0.1", "--quiet", *RELAXED_TIMING)
    finally:
        sink.close()
    assert run.returncode == 0, run.stderr
    stop = run.result["send"]["stop"]
    assert stop["reason"] == "schedule-sent" and 0.19 < stop["at_s"] < stop["bound_s"]
    # --send-tolerance-abs 0.5; --max-lag 0 turns the lag check off but not the bound: one more window
    assert stop["bound_s"] == pytest.approx(0.2 + 0.5 + 0.2)


# A receiver preempted near its end: 20 000 queries at 20 000/s to knotd over one socket, timeout 1 s (end
# time about 2 s after the start); the receiver's first read 0.2 s after the first reply sleeps 1.9 s, so
# about 16 000 replies, every one in time, wait at its end time. Its socket holds them (64 MiB, FORCE
# as root).
RECEIVER_STALL = {"XLATPERF_SHIM_RECV_AFTER_MS": "200", "XLATPERF_SHIM_RECV_MS": "1900"}


def run_receiver_stalled(xlatperf: Path, shim: Path, tmp_path: Path, port: int, extra_env: dict) -> dict:
    out = tmp_path / "receiver.json"
    env = dict(os.environ, LD_PRELOAD=str(shim), **RECEIVER_STALL, **extra_env)
    with KnotServer(tmp_path / "knot", KnotConfig(listen=(("127.0.0.1", port),))):
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(port), "--rate", "20000",
                               "--queries", "20000", "--ports-per-thread", "1", "--timeout", "1",
                               "--rcvbuf", str(64 << 20), "--quiet", "--json", str(out), *RELAXED_TIMING],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


@pytest.mark.root
def test_a_receiver_behind_at_its_end_reads_every_reply_that_came_in_time(xlatperf, shim, tmp_path, port,
                                                                         validator):
    """Before, the final read took at most 64 recvmmsg calls of 64 per socket (4 096 datagrams, 8 192 with the
    loop's last read): about 7 800 replies that came in time stayed unread and counted as unanswered."""
    result = run_receiver_stalled(xlatperf, shim, tmp_path, port, {})
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["sent"] == 20_000
    assert totals["tester_receive_drops"] == 0
    assert totals["unanswered"] == 0 and totals["valid"] == 20_000
    assert result["receive"]["final_drain"] > 8192  # more than the old bound could read
    assert result["receive"]["unread_at_end"] == totals["unread_at_end"] == 0
    assert result["verdict"]["status"] == "ok", result["verdict"]["reasons"]


@pytest.mark.root
def test_a_final_read_that_cannot_finish_within_the_timeout_is_tester_limited(xlatperf, shim, tmp_path, port,
                                                                             validator):
    """The same receiver, now 20 ms per recvmmsg call after its stall: 16 000 pending replies would take 5 s,
    so its final read stops one timeout after the end time and the unread replies make the trial
    tester-limited."""
    started = time.monotonic()
    result = run_receiver_stalled(xlatperf, shim, tmp_path, port, {"XLATPERF_SHIM_RECV_EACH_MS": "20"})
    validator.validate(result)
    check_consistency(result)
    assert time.monotonic() - started < 15
    unread = result["receive"]["unread_at_end"]
    assert unread == result["totals"]["unread_at_end"] == sum(t["unread_at_end"] for t in result["threads"])
    assert 0.9 < result["receive"]["final_drain_s"] < 1.5
    # The replies set aside unread are among the unanswered queries: the tester's share of them, counted.
    assert 0 < unread <= result["totals"]["unanswered"]
    assert result["verdict"]["status"] == "tester-limited"
    assert any(f"{unread} datagrams still waited one timeout" in reason
               for reason in result["verdict"]["reasons"])


def test_time_spent_inside_the_last_send_call_counts_as_lag(xlatperf, shim, tmp_path, validator):
    """The call carrying the last query stalls 50 ms inside sendmmsg. No later call can show the delay, so
    before, the lag was measured only at the call's start and the verdict was ok."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    out = tmp_path / "last.json"
    env = dict(os.environ, LD_PRELOAD=str(shim), XLATPERF_SHIM_STALL_AT_QUERY="2000",
               XLATPERF_SHIM_MS=str(STALL_MS))
    try:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(sink.getsockname()[1]),
                               "--rate", "10000", "--queries", "2000", "--ports-per-thread", "1",
                               "--gso", "off", "--timeout", "0.1", "--quiet", "--json", str(out)],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
    finally:
        sink.close()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    validator.validate(result)
    assert result["totals"]["sent"] == 2000
    assert result["send"]["max_lag_s"] >= STALL_MS / 1000 * 0.9
    assert result["verdict"]["status"] == "tester-limited"
    assert any("behind its schedule" in reason for reason in result["verdict"]["reasons"])


@pytest.mark.parametrize("step_s", [10, -10])
def test_a_wall_clock_step_mid_trial_moves_no_interval(xlatperf, shim, tmp_path, validator, step_s):
    """CLOCK_REALTIME steps by 10 s one second into a 2 s trial (the seam moves the clock and the kernel's
    receive stamps alike). A peer answers each query 50 ms after it arrived, so about 100 queries are in
    flight at the step. Before, send times were REALTIME: those replies came out 10 s late (or before their
    query, unexpected); with CLOCK_MONOTONIC intervals every reply is valid and no latency is near the
    step."""
    out = tmp_path / "step.json"
    env = dict(os.environ, LD_PRELOAD=str(shim), XLATPERF_SHIM_STEP_S=str(step_s),
               XLATPERF_SHIM_STEP_AFTER_MS="1000")
    with Peer("127.0.0.1", answer_after(0.05), rcvbuf=8 << 20) as peer:
        proc = subprocess.run([str(xlatperf), "--server", "127.0.0.1", "--port", str(peer.port),
                               "--rate", "2000", "--queries", "4000", "--quiet", "--json", str(out),
                               *RELAXED_TIMING],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert peer.queries == 4000
    assert totals["late"] == 0 and totals["unexpected"] == 0
    assert totals["valid"] == 4000
    assert result["latency"]["max"] < 0.25
