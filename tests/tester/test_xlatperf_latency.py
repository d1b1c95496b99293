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
import os
from dataclasses import dataclass

import pytest

from .helpers import RELAXED_TIMING, check_consistency
from .peer import Peer, Query, answer_after, reply

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
    arrivals_ns: list[int]  # the kernel's receive time of each query at the peer, when recorded

    def peer(self, p: float) -> float:
        """Nearest-rank percentile of the peer's kept delays (as xlatperf ranks its samples)."""
        ordered = sorted(self.peer_delays_s)
        return ordered[max(1, math.ceil(p * len(ordered) - 1e-9)) - 1]


def measure(run_xlatperf, validator, delay_s: float, *extra: str, rate_qps: int = RATE_QPS,
            queries: int = QUERIES, record_arrivals: bool = False,
            peer_cpus: frozenset[int] = frozenset()) -> Measured:
    arrivals_ns: list[int] = []
    answer = answer_after(delay_s)

    def behaviour(peer: Peer, query: Query, source: tuple) -> None:
        if record_arrivals:
            arrivals_ns.append(peer.received_ns)
        answer(peer, query, source)

    with Peer("127.0.0.1", behaviour, rcvbuf=PEER_RCVBUF, cpus=peer_cpus) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", str(rate_qps),
                           "--queries", str(queries), "--timeout", str(TIMEOUT_S), *RELAXED_TIMING, *extra)
    assert not peer.errors
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    # Every query answered and every reply valid: both sides measured the same set of queries.
    assert run.result["totals"]["sent"] == queries
    assert run.result["totals"]["valid"] == queries == len(peer.delays_ns)
    return Measured(run.result["latency"], [d / 1e9 for d in peer.delays_ns], arrivals_ns)


def report(label: str, m: Measured) -> None:
    """One line of figures (shown with pytest -s), so a run states the bias it found."""
    lat = m.latency
    print(f"\n{label}, loopback; "
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


# Big batches without GSO (on loopback `--gso auto` would send each batch as one UDP_SEGMENT call, whose
# datagrams arrive together): 10 000 queries/s with a 10 ms send tick is 100 queries per sendmmsg call.
BATCH_ARGS = ("--send-tick", "0.01", "--batch", "100", "--ports-per-thread", "1", "--gso", "off")
BATCH_RATE_QPS = 10_000
BATCH_QUERIES = 10_000
BURST_GAP_NS = 1_000_000  # the peer sees a call's queries within well under a ms, calls 10 ms apart
# The batch may add at most this share of what one stamp per call added (the time the kernel spent on a
# query's earlier messages in its call, as the peer saw it: the 5x).
BATCH_BIAS_SHARE = 0.2


def burst_offsets_ns(arrivals_ns: list[int]) -> list[int]:
    """For each query, its kernel arrival at the peer minus that of the first query of its burst."""
    offsets, first, previous = [], arrivals_ns[0], arrivals_ns[0]
    for at in arrivals_ns:
        if at - previous > BURST_GAP_NS:
            first = at
        offsets.append(at - first)
        previous = at
    return offsets


# The sender alone on CPU 0; its receiver and the peer on CPU 1. A peer woken on the sender's CPU would
# preempt a sendmmsg call between two messages, and the later ones would be stamped early (the stamps
# follow the call's CPU time): the test is of the stamps, not of a shared CPU.
SENDER_CPU, OTHERS_CPU = 0, 1
PLACEMENT_ARGS = ("--sender-cpus", str(SENDER_CPU), "--receiver-cpus", str(OTHERS_CPU))
# A preemption that the placement cannot prevent (a kernel thread, another job) moves one pair of runs:
# the cut is judged on a majority of up to three pairs.
ATTEMPTS, NEEDED = 3, 2


def batch_bias_cut(run_xlatperf, validator) -> tuple[float, float, float]:
    """One pair of runs: the median bias at ~1 and at 100 queries per call, and what one stamp per call
    would add, s."""
    placed = {"peer_cpus": frozenset({OTHERS_CPU})}
    base = measure(run_xlatperf, validator, 0.0, *PLACEMENT_ARGS, **placed)
    batched = measure(run_xlatperf, validator, 0.0, *BATCH_ARGS, *PLACEMENT_ARGS, rate_qps=BATCH_RATE_QPS,
                      queries=BATCH_QUERIES, record_arrivals=True, **placed)
    report("delay 0, about 1 query per call", base)
    report("delay 0, 100 queries per call", batched)
    # Never below the peer's kept delay.
    assert within(batched.latency["p50"], batched.peer(0.5), batched.peer(0.5) + BIAS_P50_BOUND_S)
    offsets = sorted(burst_offsets_ns(batched.arrivals_ns))
    return (base.latency["p50"] - base.peer(0.5), batched.latency["p50"] - batched.peer(0.5),
            offsets[len(offsets) // 2] / 1e9)


@pytest.mark.slow
@pytest.mark.skipif(not {SENDER_CPU, OTHERS_CPU} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1")
def test_a_big_batch_adds_little_latency_bias(run_xlatperf, validator):
    # Zero delay (resolution ~1 µs at the ~1 ms the Python peer takes for a burst). Per reply, xlatperf's
    # latency = the peer's kept delay + the tester's send path + the peer's send path. Within a burst the
    # kept delay grows with a query's place (the peer answers in arrival order), and so would a bias from
    # one stamp per call, so the medians sit at the same place and their difference is the median bias.
    # One stamp per call adds, to a query, the kernel time of its call's earlier messages: its arrival at
    # the peer minus the arrival of its call's first query. Its median is the known answer the per-message
    # stamps must cut by 5x (2026-11-25: one stamp per call added 274 µs against a 196 µs median spread;
    # per-message stamps 4.6 and 8.7 µs against 141 and 143 µs; 2026-11-26, CI, unpinned: one pair of
    # runs added 41.4 µs against 184.7 µs, a 4.5x cut, which is why the runs are now placed and judged
    # on a majority).
    passed, seen = 0, []
    for _ in range(ATTEMPTS):
        base_bias, batch_bias, one_stamp_bias = batch_bias_cut(run_xlatperf, validator)
        assert one_stamp_bias > 20e-6, "the calls did not carry big batches: nothing to cut"
        print(f"median bias {base_bias * 1e6:.1f} µs at about 1 query per call, {batch_bias * 1e6:.1f} µs "
              f"at 100: the batch adds {(batch_bias - base_bias) * 1e6:.1f} µs; one stamp per call would "
              f"add {one_stamp_bias * 1e6:.1f} µs")
        seen.append((batch_bias - base_bias, one_stamp_bias))
        passed += batch_bias - base_bias <= BATCH_BIAS_SHARE * one_stamp_bias
        if passed >= NEEDED or passed + (ATTEMPTS - len(seen)) < NEEDED:
            break
    # The batch's share cut by 5x in a majority of the pairs.
    assert passed >= NEEDED, f"(batch adds, one stamp per call adds) per pair of runs, s: {seen}"


# --latency-from: RFC 8219 §7.2 times only the tagged queries, those sent after a given second. The peer keeps
# a long delay for the queries of the first 0.9 s and a short one after: the tagged figures must hold none of
# the long ones, and count exactly the valid replies the per-second series gives for the tagged seconds.
LONG_DELAY_S = 0.100
SHORT_DELAY_S = 0.001
LONG_QUERIES = 900  # at 1000 queries/s: those sent in the first 0.9 s


def _delay_by_index(peer: Peer, query: Query, source: tuple) -> None:
    delay = LONG_DELAY_S if query.index() < LONG_QUERIES else SHORT_DELAY_S
    peer.send_timed(reply(query), source, round(delay * 1e9))


@pytest.mark.parametrize("tagged_after_s", [0, 1])
def test_latency_from_times_only_the_queries_sent_after_it(run_xlatperf, validator, tagged_after_s):
    with Peer("127.0.0.1", _delay_by_index, rcvbuf=PEER_RCVBUF) as peer:
        extra = ("--latency-from", str(tagged_after_s)) if tagged_after_s else ()
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", str(RATE_QPS),
                           "--queries", str(QUERIES), "--timeout", str(TIMEOUT_S), *RELAXED_TIMING, *extra)
    assert not peer.errors
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    lat, series = run.result["latency"], run.result["series"]
    assert lat["from_s"] == tagged_after_s and run.result["config"]["latency_from_s"] == tagged_after_s
    tagged_valid = sum(row["valid"] for row in series if row["second"] > tagged_after_s)
    assert lat["count"] == tagged_valid
    assert run.result["totals"]["valid"] == QUERIES  # every query answered in time: the known answer
    if tagged_after_s:
        assert 0 < lat["count"] <= QUERIES - LONG_QUERIES
        # None of the long delays is among the tagged queries (a 90 ms margin for a stalled machine).
        assert lat["max"] < LONG_DELAY_S - 0.01, lat
    else:
        assert lat["count"] == QUERIES and lat["max"] >= LONG_DELAY_S - CLOCK_EPS_S, lat


def test_latency_from_at_or_beyond_the_schedule_is_refused(run_xlatperf):
    run = run_xlatperf("--server", "127.0.0.1", "--port", "9", "--rate", "1000", "--duration", "2",
                       "--latency-from", "2")
    assert run.returncode != 0 and "--latency-from" in run.stderr and "\n" not in run.stderr.strip()
