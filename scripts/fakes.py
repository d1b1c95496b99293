"""Fake DUTs of known capacity: the searches are tested against an answer fixed in advance.

FakeDut below; QueueDut (a deep queue: overload answers below capacity) and GradualDut (loss growing
gradually above a knee) at the end.

The model: a DUT forwards at most `capacity` queries/s; a queue of `buffer` queries absorbs an excess for a
while, so a short trial slightly above capacity may still pass (as real socket buffers do); with `noise` the
capacity of each trial is drawn around the nominal one (real DUTs vary by some % between trials); above
`tester_limit_qps` the tester, not the DUT, cannot keep up and the trial is tester-limited; with
`background_loss` every query may also be lost at random (a real chain loses the odd query on a busy
machine at any rate: a one-second trial then fails the 0.01 % criterion by a single query); with
`trial_start_loss` a fixed count of queries is lost at the start of every trial, whatever its rate and
duration (a first burst, a neighbour resolution, a TUN device waking up): a short trial fails the loss ratio
where a long one at the same rate passes; with `capacity_drop` the capacity falls by that fraction once a
trial has run `drop_after_s` seconds (a DUT that heats up, or whose tables fill), so a long trial finds less
than a short one.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from .clock import Clock, RealClock
from .trial import TrialResult


@dataclass(kw_only=True)
class FakeDutBehaviour:
    """How a fake DUT misbehaves beyond its capacity (keywords only; the fake DUT and the fake environment
    that makes one per core count both carry it).

    noise: standard deviation of each trial's capacity, as a fraction of capacity (0 = deterministic).
    buffer_queries: queries a queue absorbs above capacity before dropping, count.
    tester_limit_qps: rate above which the trial is tester-limited, queries/s (None = unlimited).
    background_loss: probability that any query is lost at random, fraction (0 = none).
    trial_start_loss: queries lost at the start of every trial, count (0 = none).
    capacity_drop: fraction by which the capacity falls after drop_after_s of a trial (0 = none).
    drop_after_s: seconds into a trial after which the capacity has dropped, s.
    seed: seed of the noise generator (same seed, same trials).
    """

    noise: float = 0.0
    buffer_queries: float = 0.0
    tester_limit_qps: float | None = None
    background_loss: float = 0.0
    trial_start_loss: int = 0
    capacity_drop: float = 0.0
    drop_after_s: float = 30.0
    seed: int = 1

    def behaviour(self) -> dict[str, Any]:
        """These fields as keywords (for a FakeDut)."""
        return {f.name: getattr(self, f.name) for f in fields(FakeDutBehaviour)}


@dataclass
class FakeDut(FakeDutBehaviour):
    """A Measurer whose answer is known.

    capacity_qps: nominal capacity, queries/s. The misbehaviour: FakeDutBehaviour's keywords.
    clock: a SimClock to advance by each trial's duration (simulated time), or a RealClock to really wait.
    sleep: if True, a trial takes its duration on `clock`; if False it is instantaneous.
    """

    capacity_qps: float
    clock: Clock = field(default_factory=RealClock)
    sleep: bool = False
    trials: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.capacity_qps <= 0:
            raise ValueError(f"fake DUT capacity must be positive, got {self.capacity_qps} queries/s")
        if self.noise < 0 or self.buffer_queries < 0 or not 0 <= self.background_loss < 1:
            raise ValueError("fake DUT noise and buffer must not be negative, background_loss in [0, 1)")
        if self.trial_start_loss < 0 or not 0 <= self.capacity_drop < 1 or self.drop_after_s <= 0:
            raise ValueError("fake DUT trial_start_loss must not be negative, capacity_drop in [0, 1), "
                             "drop_after_s positive")
        self._rng = random.Random(self.seed)

    def trial_capacity_qps(self, duration_s: float) -> float:
        """This trial's capacity before any drop: nominal, jittered by noise, plus what the buffer absorbs
        in duration_s."""
        jitter = self._rng.gauss(0.0, self.noise) if self.noise else 0.0
        return max(0.0, self.capacity_qps * (1.0 + jitter)) + self.buffer_queries / duration_s

    def forwarded(self, duration_s: float, rate_qps: float, capacity_qps: float) -> float:
        """Queries forwarded in a trial at rate_qps whose capacity (buffer included) is capacity_qps until
        drop_after_s and (1 - capacity_drop) x the nominal capacity less after it."""
        if not self.capacity_drop or duration_s <= self.drop_after_s:
            return capacity_qps * duration_s
        after = duration_s - self.drop_after_s
        lowered = capacity_qps - self.capacity_drop * self.capacity_qps
        return min(rate_qps, capacity_qps) * self.drop_after_s + lowered * after

    def zero_loss_qps(self, duration_s: float, loss_ratio: float) -> float:
        """The highest rate a noise-free trial of duration_s passes at loss_ratio, queries/s (the known
        answer; background loss aside). A rate R loses the trial-start queries plus what exceeds the
        forwarding: with F the queries forwarded at R, R x D - F + start loss <= loss_ratio x R x D."""
        capacity = self.capacity_qps + self.buffer_queries / duration_s

        def passes(rate: float) -> bool:
            sent = rate * duration_s
            lost = max(0.0, sent - self.forwarded(duration_s, rate, capacity)) + self.trial_start_loss
            return lost <= loss_ratio * sent

        # Below trial_start_loss / (loss_ratio x D) the fixed loss alone fails a trial; above it the loss
        # only grows with the rate.
        low, high = self.trial_start_loss / (loss_ratio * duration_s) if loss_ratio else 0.0, 2 * capacity + 1
        if not passes(low):
            return 0.0
        for _ in range(100):
            rate = (low + high) / 2
            low, high = (rate, high) if passes(rate) else (low, rate)
        return low

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        scheduled = begin_trial(self, duration_s, rate_qps)
        if self.tester_limit_qps is not None and rate_qps > self.tester_limit_qps:
            sent = round(self.tester_limit_qps * duration_s)
            return TrialResult(rate_qps, duration_s, sent, sent, 0.0, tester_limited=True,
                               reasons=(f"fake tester offers at most {self.tester_limit_qps:.0f} queries/s",),
                               achieved_rate_qps=self.tester_limit_qps)
        capacity = self.trial_capacity_qps(duration_s)
        valid = min(scheduled, round(self.forwarded(duration_s, rate_qps, capacity)))
        if self.background_loss:
            valid -= min(valid, _poisson(self._rng, valid * self.background_loss))
        valid -= min(valid, self.trial_start_loss)
        return answered(rate_qps, duration_s, scheduled, valid)


class SimulatedDut(Protocol):
    """What every fake DUT here has: a trial count, and a clock it sleeps on when `sleep` is set."""

    trials: int
    sleep: bool
    clock: Clock


def begin_trial(dut: SimulatedDut, duration_s: float, rate_qps: float) -> int:
    """Check a trial's duration and rate, count it, take its time if the DUT sleeps; the queries sent."""
    if duration_s <= 0 or rate_qps <= 0:
        raise ValueError(f"a trial needs a positive duration and rate, got {duration_s} s, "
                         f"{rate_qps} queries/s")
    dut.trials += 1
    if dut.sleep:
        dut.clock.sleep(duration_s)
    return round(rate_qps * duration_s)


def answered(rate_qps: float, duration_s: float, scheduled: int, valid: int) -> TrialResult:
    """The trial's result when the tester sent all `scheduled` queries and `valid` came back in time."""
    loss = 1.0 - valid / scheduled if scheduled else 1.0
    return TrialResult(rate_qps, duration_s, scheduled, valid, loss, achieved_rate_qps=rate_qps)


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (exact below a mean of 30, normal approximation above)."""
    if mean <= 0:
        return 0
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


@dataclass
class QueueDut:
    """A Measurer whose overload answers BELOW its capacity: a deep FIFO in front of a server of
    `capacity_qps`. Above capacity the backlog grows by (rate - capacity) per second; once a query would
    wait longer than the tester's `timeout_s` it is late, i.e. lost (so is everything after it), and a
    full queue drops. A trial passes with no loss exactly when the backlog at its end stays within
    min(queue, capacity x timeout): the known zero-loss rate at duration D is
    capacity + min(queue_queries, capacity x timeout_s) / D (`zero_loss_qps`). Far above it, the answered
    rate (valid / duration) falls well below the capacity: a search that trusts it as "at least the
    capacity" is misled.

    noise: standard deviation of each trial's capacity, fraction; seed: its generator's seed.
    """

    capacity_qps: float
    queue_queries: float = 20000.0
    timeout_s: float = 0.25
    noise: float = 0.0
    seed: int = 1
    clock: Clock = field(default_factory=RealClock)
    sleep: bool = False
    trials: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.capacity_qps <= 0 or self.queue_queries < 0 or self.timeout_s <= 0 or self.noise < 0:
            raise ValueError("queue DUT: capacity and timeout must be positive, queue and noise not negative")
        self._rng = random.Random(self.seed)

    def zero_loss_qps(self, duration_s: float, capacity_qps: float | None = None) -> float:
        """Highest rate a trial of duration_s passes with no loss, queries/s (noise-free unless given)."""
        c = self.capacity_qps if capacity_qps is None else capacity_qps
        return c + min(self.queue_queries, c * self.timeout_s) / duration_s

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        scheduled = begin_trial(self, duration_s, rate_qps)
        capacity = self.capacity_qps * (1.0 + (self._rng.gauss(0.0, self.noise) if self.noise else 0.0))
        capacity = max(capacity, 1.0)
        excess = rate_qps - capacity
        in_time = min(self.queue_queries, capacity * self.timeout_s)  # backlog still answered in time
        if excess <= 0 or excess * duration_s <= in_time:
            valid = scheduled
        elif self.queue_queries <= capacity * self.timeout_s:
            valid = min(scheduled, round(capacity * duration_s + self.queue_queries))  # drops, no late ones
        else:
            # Queries sent before the backlog passed capacity x timeout are answered in time; later ones
            # wait too long (or are dropped by the full queue).
            valid = min(scheduled, round(rate_qps * in_time / excess))
        return answered(rate_qps, duration_s, scheduled, valid)


@dataclass
class GradualDut:
    """A Measurer whose loss sets in gradually (as on the emulated chain): below `knee_qps` nothing is
    lost; above it each query is lost with probability slope x (rate - knee) / knee (a Poisson count), so
    1 % more rate above the knee loses slope / 100 more. The rate whose expected loss equals a loss ratio
    L is knee x (1 + L / slope) (`rate_at_loss`): the answer a search with criterion L should find, within
    the chance of a trial near it losing a few queries more or less."""

    knee_qps: float
    slope: float = 0.1
    seed: int = 1
    clock: Clock = field(default_factory=RealClock)
    sleep: bool = False
    trials: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.knee_qps <= 0 or self.slope <= 0:
            raise ValueError("gradual DUT: knee and slope must be positive")
        self._rng = random.Random(self.seed)

    def rate_at_loss(self, loss_ratio: float) -> float:
        """The rate whose expected loss is loss_ratio, queries/s."""
        return self.knee_qps * (1.0 + loss_ratio / self.slope)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        scheduled = begin_trial(self, duration_s, rate_qps)
        p = min(1.0, max(0.0, self.slope * (rate_qps - self.knee_qps) / self.knee_qps))
        valid = scheduled - min(scheduled, _poisson(self._rng, scheduled * p))
        return answered(rate_qps, duration_s, scheduled, valid)
