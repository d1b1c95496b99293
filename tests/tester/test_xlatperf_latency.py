"""xlatperf's latency against a peer that answers a known time after each query arrived.

The known answer is not the nominal delay but the delay the peer really kept, measured by the peer
itself for every reply: from the kernel's receive timestamp of the query (SO_TIMESTAMPNS) to the clock
read just before its `sendto`. xlatperf measures from its own clock read before the query's `sendmmsg`
(earlier than the peer's start) to the kernel's receive timestamp of the reply (later than the peer's
end), so for every query xlatperf's latency = the peer's kept delay + a bias B >= 0. Hence each
percentile of xlatperf's latency lies in [the peer's same percentile, that + the largest B]: a
percentile of a sum with a non-negative term is never below, and never more than that term's maximum
above. B is the tester's send path (the time from its clock read until the kernel stamps the query,
including earlier messages of the same sendmmsg batch) plus the peer's send path (from its clock read
until the loopback stamps the reply).

Bounds are for a loaded 2-CPU machine shared with other jobs: a thread may lose its CPU for a few ms
between a clock read and the syscall after it, which moves single replies, not the median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from .helpers import RELAXED_TIMING, check_consistency
from .peer import Peer, answer_after

DELAY_S = 0.020
RATE_QPS = 1000  # one query per 1 ms send tick: batches of about one message, so B is the send path alone
QUERIES = 2000   # 2 s
TIMEOUT_S = 0.5  # 25 x the delay: no reply of this test is late unless the machine stalls for 0.5 s
PEER_RCVBUF = 4 << 20  # the Python peer may be descheduled for tens of ms; its socket must hold the queries

# Histogram: a percentile is its bucket's upper edge, at most 2^-10 of the value above the exact sample.
RELATIVE_RESOLUTION = 2 ** -10
# CLOCK_REALTIME may be slewed by NTP (at most 500 ppm): 10 µs over 20 ms. Both sides read that clock.
CLOCK_EPS_S = 50e-6
# The median B: two loopback send paths of one small datagram take a few µs each; 1 ms = 5 % of the delay
# leaves room for a loaded machine yet fails if B reached a send tick (a whole batch's worth of time).
BIAS_P50_BOUND_S = 1e-3
# p99 B: 1 % of replies may have had the tester or the peer preempted between a clock read and its syscall.
BIAS_P99_BOUND_S = 5e-3
# The peer must keep its delay closely enough that the run tests a 20 ms answer, not scheduling noise.
PEER_LATENESS_P50_BOUND_S = 2e-3
# Zero delay: the whole floor (tester send path, loopback both ways, the Python peer's handling) must be
# small against the 20 ms the test above resolves: 10 %.
FLOOR_P50_BOUND_S = 0.1 * DELAY_S


@dataclass(frozen=True)
class Measured:
    """xlatperf's latency figures and the delays the peer kept, all in s."""

    latency: dict
    peer_delays_s: list[float]

    def peer(self, p: float) -> float:
        """Nearest-rank percentile of the peer's kept delays (as xlatperf ranks its samples)."""
        ordered = sorted(self.peer_delays_s)
        return ordered[max(1, math.ceil(p * len(ordered) - 1e-9)) - 1]


def measure(run_xlatperf, validator, delay_s: float) -> Measured:
    with Peer("127.0.0.1", answer_after(delay_s), rcvbuf=PEER_RCVBUF) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", str(RATE_QPS),
                           "--queries", str(QUERIES), "--timeout", str(TIMEOUT_S), *RELAXED_TIMING)
    assert not peer.errors
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    # Every query answered and every reply valid: both sides measured the same set of queries.
    assert run.result["totals"]["sent"] == QUERIES
    assert run.result["totals"]["valid"] == QUERIES == len(peer.delays_ns)
    return Measured(run.result["latency"], [d / 1e9 for d in peer.delays_ns])


def report(label: str, m: Measured) -> None:
    """One line of figures (shown with pytest -s), so a run states the bias it found."""
    lat = m.latency
    print(f"\n{label}: {RATE_QPS} queries/s x {QUERIES}, loopback, 1 thread x 1 port; "
          f"peer kept min {m.peer(0) * 1e3:.3f} p50 {m.peer(0.5) * 1e3:.3f} p99 {m.peer(0.99) * 1e3:.3f} "
          f"max {max(m.peer_delays_s) * 1e3:.3f} ms; xlatperf min {lat['min'] * 1e3:.3f} "
          f"p50 {lat['p50'] * 1e3:.3f} p99 {lat['p99'] * 1e3:.3f} max {lat['max'] * 1e3:.3f} ms; "
          f"p50 bias {(lat['p50'] - m.peer(0.5)) * 1e6:.1f} µs, "
          f"p99 bias {(lat['p99'] - m.peer(0.99)) * 1e6:.1f} µs")


def within(value: float, low: float, high: float) -> bool:
    return low - CLOCK_EPS_S <= value <= high * (1 + RELATIVE_RESOLUTION) + CLOCK_EPS_S


@pytest.mark.slow
def test_latency_is_the_known_delay_plus_a_small_non_negative_bias(run_xlatperf, validator):
    m = measure(run_xlatperf, validator, DELAY_S)
    report(f"delay {DELAY_S * 1e3:g} ms", m)
    lat = m.latency
    # The peer never answers early (by construction) and kept its delay closely.
    assert m.peer(0) >= DELAY_S
    assert m.peer(0.5) - DELAY_S <= PEER_LATENESS_P50_BOUND_S, "the peer could not keep its delay"
    # No reply can be measured faster than the delay the peer kept for it.
    assert lat["min"] >= m.peer(0) - CLOCK_EPS_S >= DELAY_S - CLOCK_EPS_S
    assert within(lat["p50"], m.peer(0.5), m.peer(0.5) + BIAS_P50_BOUND_S), lat
    assert within(lat["p99"], m.peer(0.99), m.peer(0.99) + BIAS_P99_BOUND_S), lat
    assert lat["max"] >= max(m.peer_delays_s) - CLOCK_EPS_S


@pytest.mark.slow
def test_latency_floor_is_small_against_the_delay(run_xlatperf, validator):
    m = measure(run_xlatperf, validator, 0.0)
    report("delay 0", m)
    lat = m.latency
    # The peer's own handling (Python: receive, parse, build the reply) is part of the floor and measured;
    # xlatperf must not report less than it, nor more than the floor bound.
    assert within(lat["p50"], m.peer(0.5), m.peer(0.5) + BIAS_P50_BOUND_S), lat
    assert lat["p50"] <= FLOOR_P50_BOUND_S, lat
    assert lat["min"] >= m.peer(0) - CLOCK_EPS_S
