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
less), so the next rate tried is half an error width below that answered rate when the answered rate lies
below the next step.
One failure far above the capacity thus costs one trial, not a run of doublings (in the spirit of the
loss-informed steps of draft-ietf-bmwg-mlrsearch). The same answered rate steers the halving: once a rate
passed below it, the next trial goes one error width above that pass (not to the middle of the bracket), where
a DUT of that capacity fails and the search can stop.

4. A repetition of the same configuration (earlier_qps: the answers of earlier repetitions) skips the short
   trials once two earlier answers agree within two error widths (SETTLED_WIDTHS): it starts with a
   full-length trial at their median, stepping by the error width from there (twice, then doubling).
   Short trials are optimistic wherever queues absorb a few seconds of excess load, so after a first
   full-length answer they mostly cost full-length trials to correct, while the median of agreeing
   answers is usually within an error width of the next.
   Until two answers agree, each repetition runs the short trials (its first at the median of the earlier
   answers), so it finds its answer by itself: a first answer that caught the DUT in a dip (or a peak)
   does not become the start of every later repetition, which would then inherit its luck.
   Every other verified repetition starts one error width above the median: stepping up from a pass stops
   at the first failure and stepping down from a failure at the first pass, so on a DUT whose capacity
   varies from trial to trial the one ends low and the other high, and alternating keeps the median of the
   answers from drifting either way. A guess from another configuration (guess_qps: the previous core
   count's median) goes through short trials too.

The answer is the highest rate that passed a full-length trial with a full-length or decisive failure at
most the error width above it: the RFC 8219 search's criterion, reached through fewer full-length trials.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .outcome import BELOW_LOWER, OK, UPPER_NOT_FAILED, Search, SearchOutcome
from .rfc8219 import midpoint
from .runner import PASS, TESTER_LIMITED, TrialRecord, TrialRunner
from .settings import FAST, SearchSettings

# A short trial fails when a DUT that loses exactly loss_ratio of the queries would lose as many or more
# with at most this probability (Poisson).
SHORT_FAIL_P = 0.001
# From a verified guess the answer is usually within an error width or two: the first steps away from it
# are one error width each before they start doubling.
VERIFIED_EVEN_STEPS = 2
# Repetitions start from the median of the earlier answers with full-length trials only once two of those
# answers lie within this many error widths of each other.
SETTLED_WIDTHS = 2


def significant_loss(lost: int, allowed_mean: float, p: float = SHORT_FAIL_P) -> bool:
    """True when P(Poisson(allowed_mean) >= lost) < p: too many losses to be chance below the limit. With
    no loss allowed (allowed_mean 0) any loss is significant."""
    if allowed_mean <= 0:
        return lost > 0
    if lost <= allowed_mean:
        return False
    if lost > allowed_mean + 10 * math.sqrt(allowed_mean) + 20:
        return True  # far out in the tail; no need to sum
    # P(X >= lost) = P(X = lost) * (1 + m/(lost+1) + m^2/((lost+1)(lost+2)) + ...), every ratio below 1 as
    # lost > m: summed as that factor times a log-space first term, so no term underflows (exp(-m) does
    # once m passes ~745).
    log_first = -allowed_mean + lost * math.log(allowed_mean) - math.lgamma(lost + 1)
    factor, term, k = 1.0, 1.0, lost
    while term > 1e-17 * factor:
        k += 1
        term *= allowed_mean / k
        factor += term
    return log_first + math.log(factor) < math.log(p)


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
                guess_qps: float | None = None, earlier_qps: Sequence[float] = ()) -> SearchOutcome:
    """Search as described in the module docstring. guess_qps: first rate to try, queries/s, from another
    configuration (optional); earlier_qps: the answers of earlier repetitions of this same configuration,
    queries/s (when given, the search starts from their median with full-length trials)."""
    s = Search(runner, settings, search_id, FAST)
    if settled(settings, earlier_qps):
        start = _verified_start(settings, earlier_qps)
        if _inside(settings, start):
            full = _Bracket(settings.min_rate_qps, settings.max_rate_qps)
            _measure(s, "full", start, full)
            _step_and_halve(s, full, "full", even_steps=VERIFIED_EVEN_STEPS)
            return _finish(s, full)
    return _run(s, statistics.median(earlier_qps) if earlier_qps else guess_qps)


def settled(cfg: SearchSettings, earlier: Sequence[float]) -> bool:
    """True when two of the earlier answers (queries/s) lie within SETTLED_WIDTHS error widths of each
    other: then their median is a start a repetition can verify with full-length trials."""
    ordered = sorted(earlier)
    return any(high - low <= SETTLED_WIDTHS * cfg.width_qps(low) for low, high in
               zip(ordered, ordered[1:], strict=False))


def _verified_start(cfg: SearchSettings, earlier: Sequence[float]) -> float:
    """The median of the earlier answers, one error width above it in every other repetition. Stepping up
    from a pass stops at the first failure, stepping down from a failure at the first pass: on a DUT whose
    capacity varies from trial to trial the one ends low and the other high, so the repetitions alternate."""
    median = statistics.median(earlier)
    return round(median + (cfg.width_qps(median) if len(earlier) % 2 else 0))


def _inside(cfg: SearchSettings, rate: float) -> bool:
    return cfg.min_rate_qps < round(rate) < cfg.max_rate_qps


def _run(s: Search, guess: float | None) -> SearchOutcome:
    cfg = s.settings
    short = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps)
    if guess is not None and _inside(cfg, guess):
        _measure(s, "short", round(guess), short)
    _step_and_halve(s, short, "short")

    if short.upper_measured and short.upper_decisive:
        full = _Bracket(cfg.min_rate_qps, short.upper, upper_measured=True, tester_limit=short.tester_limit)
    else:  # only a likely failure above: the full-length search must find its own
        full = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps, tester_limit=short.tester_limit)
    if short.lower_measured:
        _measure(s, "full", short.lower, full)
    _step_and_halve(s, full, "full")
    return _finish(s, full)


def _finish(s: Search, full: _Bracket) -> SearchOutcome:
    minimum = s.settings.min_rate_qps
    if not full.lower_measured and full.lower == minimum > 0 and \
            (full.tester_limit is None or full.upper < full.tester_limit):
        # Nothing above the lower bound passed: measure the bound itself before saying "below" it.
        _measure(s, "full", minimum, full)
        if not full.lower_measured:
            full.upper = minimum
    limit = full.tester_limit
    if limit is not None and full.upper >= limit:
        return s.outcome(TESTER_LIMITED, full.lower, full.upper, tester_limit=limit)
    if not full.lower_measured:
        return s.outcome(BELOW_LOWER, full.lower, full.upper, tester_limit=limit)
    status = OK if full.upper_measured else UPPER_NOT_FAILED
    return s.outcome(status, full.lower, full.upper, throughput=full.lower, tester_limit=limit)


def _step_and_halve(s: Search, b: _Bracket, phase: str, even_steps: int = 0) -> None:
    """Step away from the one measured bound until both are measured (the first even_steps steps one error
    width each, then doubling), then halve to the width."""
    cfg = s.settings
    step = cfg.width_qps(b.anchor())
    steps = 0
    while b.lower_measured != b.upper_measured and not cfg.done(b.lower, b.upper):
        if b.lower_measured:
            rate = b.lower + step
        else:
            rate = b.upper - step
            if b.answered_qps is not None and b.answered_qps < rate:
                rate = b.answered_qps - cfg.width_qps(b.answered_qps) / 2
        if not b.lower < rate < b.upper:
            break
        _measure(s, phase, rate, b)
        steps += 1
        if steps >= even_steps:
            step *= 2
    while not cfg.done(b.lower, b.upper):
        rate = _halving_rate(cfg, b)
        if not b.lower < rate < b.upper:
            break
        _measure(s, phase, rate, b)


def _halving_rate(cfg: SearchSettings, b: _Bracket) -> float:
    """The middle of the bracket; or, when a failure answered no more than one error width above the
    lower bound, one error width above it: where a DUT of that capacity fails, so the search can stop."""
    middle = midpoint(b.lower, b.upper)
    if b.answered_qps is None or not b.lower_measured:
        return middle
    above = b.lower + cfg.width_qps(b.lower)
    return min(middle, above) if b.answered_qps <= above else middle


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
