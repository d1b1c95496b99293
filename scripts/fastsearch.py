"""A faster throughput search that aims at the RFC 8219 answer with fewer full-length trials.

Not RFC 8219 exact; its results say so. How it differs from the binary search:

1. Bracketing with short trials (`short_duration_s`, `short_rest_s`). With a first guess (the previous
   repetition's or core count's result) it steps away from the guess by the error width, doubling the step,
   until a pass and a fail bracket the answer; without one it halves [min, max] like the RFC search. Then it
   halves the bracket with short trials down to the error width.
2. Verification with full-length trials: the lower end of the short bracket is measured at full length. The
   upper end counts as a full-length failure without a full trial when its short trial already lost more
   queries than a whole full-length trial may lose (loss_ratio x rate x duration_s): a full trial starts the
   same way and cannot pass. Otherwise it is measured at full length too.
3. If full length disagrees with the short bracket, the search steps (doubling) from the full-length result
   until it brackets again and halves with full-length trials only.

The answer is the highest rate that passed a full-length trial, with a full-length (or decisive) failure at
most the error width above it: the same criterion as the RFC 8219 search.
"""

from __future__ import annotations

from xlatbench.scripts.search import (
    BELOW_LOWER,
    FAIL,
    FAST,
    OK,
    PASS,
    TESTER_LIMITED,
    UPPER_NOT_FAILED,
    SearchOutcome,
    SearchSettings,
    TrialRunner,
    _Search,
    midpoint,
)


class _TesterLimited(Exception):
    def __init__(self, rate_qps: float, lower: float, upper: float) -> None:
        super().__init__(rate_qps)
        self.rate_qps, self.lower, self.upper = rate_qps, lower, upper


def fast_search(runner: TrialRunner, settings: SearchSettings, search_id: str,
                guess_qps: float | None = None) -> SearchOutcome:
    """Search as described in the module docstring; guess_qps: first rate to try, queries/s (optional)."""
    s = _Search(runner, settings, search_id, FAST)
    try:
        return _run(s, guess_qps)
    except _TesterLimited as limited:
        return s.outcome(TESTER_LIMITED, limited.lower, limited.upper, tester_limit=limited.rate_qps)


class _Bracket:
    """Bounds of one phase. lower/upper: rates, queries/s; *_measured: False while a bound is only min/max."""

    def __init__(self, lower: float, upper: float) -> None:
        self.lower, self.upper = lower, upper
        self.lower_measured = self.upper_measured = False
        self.upper_decisive = False


def _run(s: _Search, guess: float | None) -> SearchOutcome:
    cfg = s.settings
    short = _short_bracket(s, guess)
    # Full-length verification of the short bracket's ends.
    full = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps)
    if short.lower_measured:
        if _full(s, short.lower, full) == PASS:
            full.lower, full.lower_measured = short.lower, True
            if short.upper_measured and short.upper_decisive:
                full.upper, full.upper_measured = short.upper, True
            elif short.upper_measured:
                if _full(s, short.upper, full) == PASS:
                    full.lower = short.upper
                else:
                    full.upper, full.upper_measured = short.upper, True
        else:
            full.upper, full.upper_measured = short.lower, True
    elif short.upper_measured:
        # Nothing passed even short: a short decisive failure bounds the full answer from above.
        full.upper, full.upper_measured = short.upper, short.upper_decisive
        if not short.upper_decisive and _full(s, short.upper, full) == PASS:
            full.lower, full.lower_measured = short.upper, True
            full.upper, full.upper_measured = cfg.max_rate_qps, False
        else:
            full.upper_measured = True
    _step_and_halve(s, full, cfg.duration_s, "full")
    if not full.lower_measured:
        return s.outcome(BELOW_LOWER, full.lower, full.upper)
    status = OK if full.upper_measured else UPPER_NOT_FAILED
    return s.outcome(status, full.lower, full.upper, throughput=full.lower)


def _short_bracket(s: _Search, guess: float | None) -> _Bracket:
    cfg = s.settings
    bracket = _Bracket(cfg.min_rate_qps, cfg.max_rate_qps)
    if guess is not None and cfg.min_rate_qps < guess < cfg.max_rate_qps:
        verdict = _short(s, round(guess), bracket)
        _apply(bracket, round(guess), verdict, s.trials[-1].result.lost, cfg)
    _step_and_halve(s, bracket, cfg.short_duration_s, "short")
    return bracket


def _step_and_halve(s: _Search, b: _Bracket, duration_s: float, phase: str) -> None:
    """Step away from a measured bound (doubling) until both ends are measured, then halve to the width."""
    cfg = s.settings
    step = cfg.width_qps(b.lower)
    # Step upwards from a measured pass, or downwards from a measured failure.
    while b.lower_measured != b.upper_measured and not cfg.done(b.lower, b.upper):
        rate = b.lower + step if b.lower_measured else b.upper - step
        if not b.lower < rate < b.upper:
            break
        verdict = _measure(s, phase, duration_s, rate, b)
        _apply(b, rate, verdict, s.trials[-1].result.lost, cfg)
        step *= 2
    while not cfg.done(b.lower, b.upper):
        rate = midpoint(b.lower, b.upper)
        if not b.lower < rate < b.upper:
            break
        verdict = _measure(s, phase, duration_s, rate, b)
        _apply(b, rate, verdict, s.trials[-1].result.lost, cfg)


def _apply(b: _Bracket, rate: float, verdict: str, lost: int, cfg: SearchSettings) -> None:
    if verdict == PASS:
        b.lower, b.lower_measured = rate, True
    else:
        b.upper, b.upper_measured = rate, True
        b.upper_decisive = lost > cfg.loss_ratio * rate * cfg.duration_s


def _short(s: _Search, rate: float, b: _Bracket) -> str:
    return _measure(s, "short", s.settings.short_duration_s, rate, b)


def _full(s: _Search, rate: float, b: _Bracket) -> str:
    return _measure(s, "full", s.settings.duration_s, rate, b)


def _measure(s: _Search, phase: str, duration_s: float, rate: float, b: _Bracket) -> str:
    record = s.trial(phase, duration_s, rate, b.lower, b.upper)
    if record.verdict == TESTER_LIMITED:
        raise _TesterLimited(rate, b.lower, b.upper)
    return PASS if record.verdict == PASS else FAIL
