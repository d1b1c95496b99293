"""CPU sampling from /proc/stat: arithmetic on known counters, and a known load on a real CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlatbench.cpuload import (
    CpuSampler,
    mean_per_second,
    read_jiffies,
    steal_between,
    usage_between,
)
from xlatbench.data.records import steal_note

STAT_BEFORE = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n"
STAT_AFTER = "cpu  210 0 110 880 0 0 0 0 0 0\ncpu0 60 0 60 480 0 0 0 0 0 0\ncpu1 150 0 50 400 0 0 0 0 0 0\n"


def test_usage_from_known_counters(tmp_path: Path) -> None:
    before, after = tmp_path / "a", tmp_path / "b"
    before.write_text(STAT_BEFORE + "intr 1 2 3\n")
    after.write_text(STAT_AFTER)
    usage = usage_between(read_jiffies(before), read_jiffies(after))
    assert usage["0"]["usr"] == 10.0 and usage["0"]["sys"] == 10.0 and usage["0"]["idle"] == 80.0
    assert usage["1"]["usr"] == 100.0 and usage["1"]["idle"] == 0.0
    assert (usage["all"]["usr"], usage["all"]["sys"], usage["all"]["idle"]) == (55.0, 5.0, 40.0)
    assert set(usage["all"]) == {"usr", "nice", "sys", "idle", "iowait", "irq", "softirq", "steal"}


def test_steal_from_known_counters(tmp_path: Path) -> None:
    # CPU 0: 100 ticks pass, 12 of them stolen; CPU 1: 100 ticks, 1 stolen.
    before, after = tmp_path / "a", tmp_path / "b"
    before.write_text("cpu  0 0 0 0 0 0 0 0\ncpu0 10 0 0 100 0 0 0 5\ncpu1 10 0 0 100 0 0 0 5\n")
    after.write_text("cpu  0 0 0 0 0 0 0 0\ncpu0 30 0 0 168 0 0 0 17\ncpu1 30 0 0 179 0 0 0 6\n")
    steal = steal_between(read_jiffies(before), read_jiffies(after))
    assert steal == {"0": 12.0, "1": 1.0}
    assert steal_note(steal) == "CPU steal: the hypervisor took 12.0 % of CPU 0 during the trial"
    assert steal_note({"0": 1.9, "1": 0.0}) is None and steal_note(None) is None and steal_note({}) is None


def test_mean_per_second_averages_runs_second_by_second() -> None:
    run = [{"t_s": 1, "cpus": {"0": {c: 0.0 for c in ("usr", "nice", "sys", "idle", "iowait", "irq",
                                                      "softirq", "steal")}}}]
    run[0]["cpus"]["0"]["idle"] = 100.0
    other = [{"t_s": 1, "cpus": {"0": {**run[0]["cpus"]["0"], "idle": 50.0}}},
             {"t_s": 2, "cpus": {"0": {**run[0]["cpus"]["0"], "idle": 20.0}}}]
    mean = mean_per_second([run, other])
    assert mean[0]["cpus"]["0"]["idle"] == 75.0 and mean[0]["runs"] == 2
    assert mean[1]["cpus"]["0"]["idle"] == 20.0 and mean[1]["runs"] == 1


def _cpu_s(pid: int) -> float:
    """CPU-seconds (user + system) the process `pid` has used so far, from its own /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_busy_loop_on_cpu1_shows_as_cpu1_not_idle() -> None:
    """The busy loop's own CPU time (its /proc/PID/stat, whatever else loads the machine) must show as
    CPU 1's non-idle time: with nothing else running that is all of CPU 1; under other load it is the
    loop's share, never less."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    busy = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        start_s, start_cpu_s = time.monotonic(), _cpu_s(busy.pid)
        with CpuSampler(interval_s=1.0) as sampler:
            time.sleep(3.2)
        share = 100.0 * (_cpu_s(busy.pid) - start_cpu_s) / (time.monotonic() - start_s)
        samples = sampler.samples
    finally:
        busy.kill()
        busy.wait()
    assert len(samples) == 3
    idle1 = sum(s["cpus"]["1"]["idle"] for s in samples) / len(samples)
    assert 100.0 - idle1 >= share - 10.0, (
        f"the busy loop used {share:.1f} % of CPU 1 but CPU 1 looked {idle1:.1f} % idle")


def test_idle_samples_are_cut_to_the_testers_schedule() -> None:
    """The sampler also spans the tester's start-up, drain and counter reads: only samples whose interval's
    middle lies inside [start_utc, start_utc + duration] stay, t_s counted from the schedule's start."""
    import datetime as dt

    from xlatbench.cpuload import samples_within, trial_window

    start = dt.datetime.fromtimestamp(1000.0, dt.UTC).isoformat().replace("+00:00", "Z")
    window = trial_window({"header": {"start_utc": start}}, 3.0)
    assert window == (1000.0, 1003.0)
    samples = [{"t_s": t - 999.2, "t_wall": t, "cpus": {}} for t in (999.7, 1000.7, 1001.7, 1002.7, 1003.7)]
    kept = samples_within(samples, window, "t_wall", 1.0)  # middles 999.2, 1000.2 ... 1003.2
    assert [s["t_wall"] for s in kept] == [1000.7, 1001.7, 1002.7]
    assert [s["t_s"] for s in kept] == [0.7, 1.7, 2.7]
    assert trial_window(None, 3.0) is None and trial_window({"header": {}}, 3.0) is None
