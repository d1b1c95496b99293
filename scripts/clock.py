"""Time for the searches: the real clock, or a simulated one so benchmarks of fake DUTs run in no time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since an arbitrary origin."""

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Monotonic wall-clock time; sleeping really waits."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SimClock:
    """Simulated time: sleeping (and a fake trial) only advances a counter.

    now_s: current simulated time, s.
    """

    def __init__(self) -> None:
        self.now_s = 0.0

    def now(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += max(0.0, seconds)
