"""Running the trials of a search: the pass/fail verdict, the record of each trial, rests and replay.

A search only asks a `TrialRunner` for trials; the runner rests between trials, records every trial
(`on_trial`), and on a resumed campaign hands back trials already in the store instead of measuring again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, RealClock
from ..trial import Measurer, TrialResult

PASS, FAIL, TESTER_LIMITED = "pass", "fail", "tester-limited"


def verdict(result: TrialResult, loss_ratio: float) -> str:
    """The one verdict of a trial: "fail" when the DUT lost more than loss_ratio of the queries beyond what
    the tester's own shortfall can account for (dut_loss_beyond_tester), even if the tester also fell
    behind; else "tester-limited" when the tester could not offer the rate (says nothing of the DUT); else
    "pass" when the DUT lost at most loss_ratio of the queries, else "fail"."""
    if result.tester_limited and not dut_loss_beyond_tester(result, loss_ratio):
        return TESTER_LIMITED
    return PASS if result.passed(loss_ratio) else FAIL


def dut_loss_beyond_tester(result: TrialResult, loss_ratio: float) -> bool:
    """True when the queries lost exceed what the tester's shortfall (every loss xlatperf attributes to
    itself: unsent, egress and receive drops, replies left unread at its end or on unbound AF_XDP queues,
    ring overruns, late sends: TrialResult.tester_shortfall) accounts for by more than loss_ratio of those
    sent: that loss is
    the DUT's, whatever else held the tester back (in emulation an overloaded DUT is what starves it).
    False when the shortfall is unknown."""
    if result.tester_shortfall is None or result.sent <= 0:
        return False
    return result.lost - result.tester_shortfall > loss_ratio * result.sent


@dataclass(frozen=True)
class TrialRecord:
    """One trial as a search saw it.

    search_id: the search (and repetition) it belongs to.
    step: index of the trial within that search, from 0.
    phase: "binary" (RFC 8219 step), "mlrsearch" (an MLRsearch trial); "short" and "full" in stores of the
        retired fast search (its bracketing and full-length trials).
    lower_qps, upper_qps: the bracket before this trial, queries/s.
    verdict: "pass", "fail" (DUT loss above loss_ratio) or "tester-limited".
    rest_before_s: rest taken before this trial, s.
    wall_s: time the trial took on the search's clock, s.
    replayed: True when the result came from the store of an interrupted campaign.
    """

    search_id: str
    step: int
    phase: str
    lower_qps: float
    upper_qps: float
    verdict: str
    result: TrialResult
    rest_before_s: float = 0.0
    wall_s: float = 0.0
    replayed: bool = False


class ReplayMismatch(RuntimeError):
    """A stored trial does not match what the search asks now: the store belongs to another campaign."""


@dataclass
class TrialRunner:
    """Runs the trials of searches: rests, records, and replays stored trials on resume.

    measurer: what runs a real trial.
    clock: real or simulated time (rests sleep on it).
    on_trial: called with each new (not replayed) TrialRecord, e.g. to append it to the store.
    replay: stored trials by (search_id, step), handed back instead of measuring (resume).
    before_real_trial: when measurer is None, called once before the first real trial to make one (lets a
        resumed campaign build a chain only when a trial is really missing).
    """

    measurer: Measurer | None
    clock: Clock = field(default_factory=RealClock)
    on_trial: Callable[[TrialRecord], None] | None = None
    replay: Mapping[tuple[str, int], TrialRecord] = field(default_factory=dict)
    before_real_trial: Callable[[], Measurer] | None = None
    _owed_rest_s: float = field(default=0.0, init=False)
    # The real trial under way (search_id, step, rate_qps, duration_s), None between trials: what a
    # failure voids names it (a resumed campaign measures exactly that trial again).
    current: dict[str, Any] | None = field(default=None, init=False)

    def take_rest(self) -> float:
        """Sleep the rest owed to the previous trial (for runs outside a search, e.g. idle capture)."""
        rest, self._owed_rest_s = self._owed_rest_s, 0.0
        self.clock.sleep(rest)
        return rest

    def owe_rest(self, rest_s: float) -> None:
        self._owed_rest_s = rest_s

    def ensure_measurer(self) -> Measurer:
        if self.measurer is None:
            if self.before_real_trial is None:
                raise RuntimeError("TrialRunner has no measurer")
            self.measurer = self.before_real_trial()
        return self.measurer

    def run(self, search_id: str, step: int, phase: str, duration_s: float, rate_qps: float,
            bracket: tuple[float, float], loss_ratio: float, rest_after_s: float) -> TrialRecord:
        stored_record = self.replay.get((search_id, step))
        if stored_record is not None:
            stored = stored_record.result
            if not (math.isclose(stored.rate_qps, rate_qps, abs_tol=0.5)
                    and math.isclose(stored.duration_s, duration_s, abs_tol=1e-6)):
                raise ReplayMismatch(
                    f"stored trial {search_id} step {step} ran {stored.rate_qps:.0f} queries/s for "
                    f"{stored.duration_s} s but the search now asks {rate_qps:.0f} queries/s for "
                    f"{duration_s} s: "
                    "the store was written by a different campaign; use a new store file")
            self._owed_rest_s = rest_after_s
            return TrialRecord(search_id, step, phase, bracket[0], bracket[1], verdict(stored, loss_ratio),
                               stored, stored_record.rest_before_s, stored_record.wall_s, replayed=True)
        measurer = self.ensure_measurer()
        rest = self.take_rest()
        started = self.clock.now()
        self.current = {"search_id": search_id, "step": step, "rate_qps": rate_qps, "duration_s": duration_s}
        result = measurer.measure(duration_s, rate_qps)
        self.current = None
        record = TrialRecord(search_id, step, phase, bracket[0], bracket[1], verdict(result, loss_ratio),
                             result, rest_before_s=rest, wall_s=self.clock.now() - started)
        self._owed_rest_s = rest_after_s
        if self.on_trial is not None:
            self.on_trial(record)
        return record

