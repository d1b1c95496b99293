"""Per-core CPU use sampled from /proc/stat once a second: the columns dstat shows, without its broken
`--output` (shared NOTES). Each sample gives, per CPU, the share of the interval spent in each state, in %.

It lives in the foundation (xlatbench/, beside procs and xdp) because both sides read it: the measurement
(scripts/: the campaign's idle captures, the measurers' steal) and the testbed (setups/testbed/remote_idle,
whose remote samples take this module's shape); setups/ never imports scripts/.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# /proc/stat per-CPU columns (proc(5)); guest and guest_nice are already counted in user and nice.
COLUMNS = ("usr", "nice", "sys", "idle", "iowait", "irq", "softirq", "steal")
PROC_STAT = Path("/proc/stat")


def read_jiffies(path: Path = PROC_STAT) -> dict[str, tuple[int, ...]]:
    """Cumulative ticks per CPU ("0", "1", ...; "all" for the total line), in COLUMNS order."""
    ticks: dict[str, tuple[int, ...]] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("cpu"):
            continue
        name, *values = line.split()
        key = "all" if name == "cpu" else name[3:]
        numbers = tuple(int(v) for v in values[:len(COLUMNS)])
        ticks[key] = numbers + (0,) * (len(COLUMNS) - len(numbers))
    return ticks


def usage_between(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> dict:
    """Per CPU, % of the interval in each state (sums to 100 per CPU; a CPU without ticks is skipped)."""
    usage: dict[str, dict[str, float]] = {}
    for cpu, now in after.items():
        if cpu not in before:
            continue
        delta = [b - a for a, b in zip(before[cpu], now, strict=True)]
        total = sum(delta)
        if total <= 0:
            continue
        usage[cpu] = {col: round(100.0 * d / total, 2) for col, d in zip(COLUMNS, delta, strict=True)}
    return usage


def steal_between(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> dict[str, float]:
    """Per CPU ("0", "1", ...), % of the interval the hypervisor ran something else on it (steal)."""
    return {cpu: use["steal"] for cpu, use in usage_between(before, after).items() if cpu != "all"}


@dataclass
class CpuSampler:
    """Samples every `interval_s` seconds in a background thread between start() and stop().

    interval_s: sampling period, s (dstat's default: 1).
    samples: [{"t_s": end of interval since start, s; "t_wall": the same end on this host's clock, s since
    the epoch (what `samples_within` cuts a trial's window with); "cpus": {cpu: {column: %}}}].
    """

    interval_s: float = 1.0
    path: Path = PROC_STAT
    samples: list[dict[str, Any]] = field(default_factory=list, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"sampling interval must be positive, got {self.interval_s} s")
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.samples

    def __enter__(self) -> CpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        origin, origin_wall = time.monotonic(), time.time()
        previous = read_jiffies(self.path)
        tick = 1
        while not self._stop.wait(max(0.0, origin + tick * self.interval_s - time.monotonic())):
            current = read_jiffies(self.path)
            since = time.monotonic() - origin
            self.samples.append({"t_s": round(since, 3), "t_wall": round(origin_wall + since, 3),
                                 "cpus": usage_between(previous, current)})
            previous = current
            tick += 1


def trial_window(raw: dict[str, Any] | None, duration_s: float,
                 clock_offset_s: float = 0.0) -> tuple[float, float] | None:
    """(start, end) of a trial's send schedule in s since the epoch on the sampling host's clock: the
    tester's start_utc (when query 0 was due, on the tester host's clock) minus that clock's offset from the
    sampling host's, plus the trial's duration. None when the tester's JSON has no start."""
    start = ((raw or {}).get("header") or {}).get("start_utc")
    if not isinstance(start, str):
        return None
    begin = dt.datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() - clock_offset_s
    return begin, begin + duration_s


def samples_within(samples: list[dict[str, Any]], window: tuple[float, float], clock_key: str,
                   interval_s: float) -> list[dict[str, Any]]:
    """The samples whose interval's middle lies in the window (their end times under `clock_key`, s since
    the epoch), t_s re-counted from the window's start: the idle of the trial, not of the tester's start-up,
    its drain or the counter reads around it."""
    kept, previous = [], None
    for sample in samples:
        end = float(sample[clock_key])
        middle = end - (end - previous) / 2 if previous is not None else end - interval_s / 2
        previous = end
        if window[0] <= middle <= window[1]:
            kept.append({**sample, "t_s": round(end - window[0], 3)})
    return kept


def mean_per_second(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Average of sample i over all runs that have it: the paper's per-second average of 100 runs.

    Returns [{"second": i + 1, "runs": k, "cpus": {cpu: {column: mean %}}}].
    """
    longest = max((len(r) for r in runs), default=0)
    averaged = []
    for i in range(longest):
        present = [r[i]["cpus"] for r in runs if len(r) > i]
        cpus: dict[str, dict[str, float]] = {}
        for cpu in sorted({c for sample in present for c in sample}, key=_cpu_order):
            rows = [sample[cpu] for sample in present if cpu in sample]
            cpus[cpu] = {col: round(sum(row[col] for row in rows) / len(rows), 3) for col in COLUMNS}
        averaged.append({"second": i + 1, "runs": len(present), "cpus": cpus})
    return averaged


def _cpu_order(cpu: str) -> tuple[int, int]:
    return (1, 0) if cpu == "all" else (0, int(cpu))
