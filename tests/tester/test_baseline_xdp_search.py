"""dnsperf/bench/baseline_xdp_search.py without root: its per-thread scheduler figures (CPU time and run-queue
wait) read a known amount of CPU burnt by this test's own thread, and its deltas of hand-built readings are
exact."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

import pytest

from .helpers import bench_module

PR_SET_NAME = 15
BURN_NAME = "xlb-burn-test"  # at most 15 characters (the kernel's comm)


@pytest.fixture(scope="module")
def bench() -> Any:
    with bench_module("baseline_xdp_search") as module:
        yield module


def test_sched_changes_converts_to_ms_and_leaves_out_idle_threads(bench):
    before = {"knotd": {"run_ns": 1_000_000_000, "wait_ns": 5_000_000, "voluntary": 10, "involuntary": 1},
              "idle": {"run_ns": 7, "wait_ns": 0, "voluntary": 0, "involuntary": 0}}
    after = {"knotd": {"run_ns": 3_500_000_000, "wait_ns": 1_255_000_000, "voluntary": 110, "involuntary": 4},
             "idle": {"run_ns": 900_007, "wait_ns": 0, "voluntary": 3, "involuntary": 0}}
    assert bench.sched_changes(before, after) == {
        "knotd": {"run_ms": 2500.0, "runqueue_wait_ms": 1250.0, "voluntary": 100, "involuntary": 3}}


def test_thread_sched_sees_the_cpu_a_thread_burnt(bench):
    burnt, release = threading.Event(), threading.Event()

    def burn() -> None:
        # A name of its own: the figures are keyed by thread name, and in a long run (pid_max 32 768 here) a
        # new thread's id can be lower than the main thread's, which would then take the numbered key.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, BURN_NAME.encode(), 0, 0, 0)
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        burnt.set()
        release.wait(10)

    before = bench.thread_sched(os.getpid())
    worker = threading.Thread(target=burn)
    worker.start()
    try:
        assert burnt.wait(10)
        after = bench.thread_sched(os.getpid())
    finally:
        release.set()
        worker.join()
    assert BURN_NAME not in before and BURN_NAME in after, sorted(after)
    figures = after[BURN_NAME]
    assert 45e6 <= figures["run_ns"] < 5e9  # 50 ms of CPU, measured by the thread's own clock
    assert bench.changes({"a": 1, "b": 2}, {"a": 1, "b": 5, "c": 4}) == {"b": 3, "c": 4}
