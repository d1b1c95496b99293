"""A faster throughput search that aims at the RFC 8219 answer with fewer full-length trials.

Not RFC 8219 exact; its results say so. How it differs from the binary search:

1. Bracketing with short trials (`short_duration_s`, `short_rest_s`). With a first guess (the earlier
   repetitions' or the previous core count's result) it steps away from the guess by the error width,
   doubling the step, until the answer is bracketed; without one it halves [min, max] like the RFC search;
   then it halves the bracket with short trials down to the error width. A short trial counts as a failure
   when its losses are significant: more than a DUT losing exactly loss_ratio of the queries would lose by
   chance (Poisson tail below SHORT_FAIL_P), so one query lost in a one-second trial does not drag the
   bracket far below the answer, while dozens lost in two seconds do. Such a failure is decisive when it
   already lost more queries than a whole full-length trial may lose (loss_ratio x rate x duration_s): a
   full-length trial, which starts the same way, cannot pass.
2. Verification at full length: the lower end of the short bracket is measured with a full-length trial.
   If its upper end is a decisive failure it needs none; otherwise the full-length search continues upwards
   from the verified lower end, so the answer always has a full-length or decisive failure above it.
3. If the full-length trial fails, the search steps down from it (doubling the step) with full-length
   trials until one passes and halves the bracket with full-length trials.

Stepping down, it starts below what the failed trial says of the DUT: a trial that lost queries answered
valid/duration queries/s, which is at least the DUT's capacity (its queues add to what it answers, never
less), so the next rate tried is that answered rate when it lies more than a step below the failed rate.
One failure far above the capacity thus costs one trial, not a run of doublings (in the spirit of the
loss-informed steps of draft-ietf-bmwg-mlrsearch).

The answer is the highest rate that passed a full-length trial with a full-length or decisive failure at
most the error width above it: the RFC 8219 search's criterion, reached through fewer full-length trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .outcome import BELOW_LOWER, OK, UPPER_NOT_FAILED, Search, SearchOutcome
from .rfc8219 import midpoint
from .runner import PASS, TESTER_LIMITED, TrialRecord, TrialRunner
from .settings import FAST, SearchSettings

# A short trial fails when a DUT that loses exactly loss_ratio of the queries would lose as many or more
# with at most this probability (Poisson).
SHORT_FAIL_P = 0.001


def significant_loss(lost: int, allowed_mean: float, p: float = SHORT_FAIL_P) -> bool:
    """True when P(Poisson(allowed_mean) >= lost) < p: too many losses to be chance below the limit."""
    if lost <= allowed_mean:
        return False
    if lost > allowed_mean + 10 * math.sqrt(allowed_mean) + 20:
        return True  # far out in the tail; no need to sum
    term = math.exp(-allowed_mean)
    below = 0.0
    for k in range(lost):
        below += term
        term *= allowed_mean / (k + 1)
    return 1.0 - below < p


@dataclass
class _Bracket:
    """lower/upper: rates, queries/s; *_measured: False while a bound is still only min/max.
    tester_limit: lowest rate at which the tester could not offer the load, queries/s (an upper bound that
    says nothing of the DUT).
    answered_qps: lowest answered rate (valid answers / duration) of a failed trial, queries/s: at least the
    DUT's capacity, so where stepping down starts."""

    lower: float
    upper: float
    lower_measured: bool = False
    upper_measured: bool = False
    upper_decisive: bool = True
    tester_limit: float | None = None
    answered_qps: float | None = None

    def anchor(self) -> float:
        return self.lower if self.lower_measured else self.upper


def fast_search(runner: TrialRunner, settings: SearchSettings, search_id: str,
                guess_qps: float | None = None) -> SearchOutcome:
    """Search as described in the module docstring; guess_qps: first rate to try, queries/s (optional)."""
    return _run(Search(runner, settings, search_id, FAST), guess_qps)


def _run(s: Search, guess: float | None) -> SearchOutcome:
    cfg = s.settings
    short = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps)
    if guess is not None and cfg.min_rate_qps < round(guess) < cfg.max_rate_qps:
        _measure(s, "short", round(guess), short)
    _step_and_halve(s, short, "short")

    if short.upper_measured and short.upper_decisive:
        full = _Bracket(cfg.min_rate_qps, short.upper, upper_measured=True, tester_limit=short.tester_limit)
    else:  # only a likely failure above: the full-length search must find its own
        full = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps, tester_limit=short.tester_limit)
    if short.lower_measured:
        _measure(s, "full", short.lower, full)
    _step_and_halve(s, full, "full")
    limit = full.tester_limit
    if limit is not None and full.upper >= limit:
        return s.outcome(TESTER_LIMITED, full.lower, full.upper, tester_limit=limit)
    if not full.lower_measured:
        return s.outcome(BELOW_LOWER, full.lower, full.upper, tester_limit=limit)
    status = OK if full.upper_measured else UPPER_NOT_FAILED
    return s.outcome(status, full.lower, full.upper, throughput=full.lower, tester_limit=limit)


def _step_and_halve(s: Search, b: _Bracket, phase: str) -> None:
    """Step away from the one measured bound (doubling) until both are measured, then halve to the width."""
    cfg = s.settings
    step = cfg.width_qps(b.anchor())
    while b.lower_measured != b.upper_measured and not cfg.done(b.lower, b.upper):
        if b.lower_measured:
            rate = b.lower + step
        else:
            rate = b.upper - step
            if b.answered_qps is not None and b.answered_qps < rate - step:
                rate = b.answered_qps - step
        if not b.lower < rate < b.upper:
            break
        _measure(s, phase, rate, b)
        step *= 2
    while not cfg.done(b.lower, b.upper):
        rate = midpoint(b.lower, b.upper)
        if not b.lower < rate < b.upper:
            break
        _measure(s, phase, rate, b)


def _measure(s: Search, phase: str, rate: float, b: _Bracket) -> None:
    duration = s.settings.duration_s if phase == "full" else s.settings.short_duration_s
    rate = float(round(rate))  # trials run at whole queries/s; the bracket must hold what was measured
    record = s.trial(phase, duration, rate, b.lower, b.upper)
    if record.verdict == TESTER_LIMITED:
        # Not a DUT failure, but the search cannot go higher: bound the bracket and remember why.
        b.upper, b.upper_measured, b.upper_decisive = rate, True, True
        b.tester_limit = rate if b.tester_limit is None else min(b.tester_limit, rate)
    elif _counts_as_pass(record, s.settings):
        b.lower, b.lower_measured = rate, True
    else:
        b.upper, b.upper_measured = rate, True
        b.upper_decisive = phase == "full" or _decisive(record, s.settings)
        if phase == "full":  # a short trial's answered rate includes its queues over a few seconds: too vague
            answered = record.result.valid / record.result.duration_s
            b.answered_qps = answered if b.answered_qps is None else min(b.answered_qps, answered)


def _counts_as_pass(record: TrialRecord, cfg: SearchSettings) -> bool:
    if record.verdict == PASS:
        return True
    if record.phase == "full":
        return False
    return not significant_loss(record.result.lost, cfg.loss_ratio * record.result.sent)


def _decisive(record: TrialRecord, cfg: SearchSettings) -> bool:
    """A short failure that lost more than a whole full-length trial may lose."""
    return record.result.lost > cfg.loss_ratio * record.result.rate_qps * cfg.duration_s
