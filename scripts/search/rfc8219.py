"""RFC 8219 throughput by binary search (section 7.3), as Lencse & Nagy ran it."""

from __future__ import annotations

from .outcome import BELOW_LOWER, OK, UPPER_NOT_FAILED, Search, SearchOutcome
from .runner import PASS, TESTER_LIMITED, TrialRunner
from .settings import RFC8219, SearchSettings


def midpoint(lower: float, upper: float) -> float:
    return float(round((lower + upper) / 2))


def rfc8219_search(runner: TrialRunner, settings: SearchSettings, search_id: str) -> SearchOutcome:
    """Binary search of RFC 8219 section 7.3 / the paper: halve [min, max] until upper - lower <= error.

    Every step is a full-length trial; the result is the highest rate that passed. When nothing passed
    and min_rate_qps > 0, min_rate_qps itself is measured (the bracket never tries it) before the search
    says "below the lower bound".
    """
    s = Search(runner, settings, search_id, RFC8219)
    lower, upper = settings.min_rate_qps, settings.max_rate_qps
    passed_any = failed_any = False
    tester_limit: float | None = None
    while not settings.done(lower, upper):
        rate = midpoint(lower, upper)
        if rate <= lower or rate >= upper:
            break
        record = s.trial("binary", settings.duration_s, rate, lower, upper)
        if record.verdict == TESTER_LIMITED:
            # Says nothing of the DUT, but nothing at or above this rate can be measured: search below it.
            upper = tester_limit = rate
        elif record.verdict == PASS:
            lower, passed_any = rate, True
        else:
            upper, failed_any = rate, True
    untested = not passed_any and lower == settings.min_rate_qps > 0
    if untested and (tester_limit is None or upper < tester_limit):
        # Nothing above the lower bound passed: measure the bound itself before saying "below" it.
        record = s.trial("binary", settings.duration_s, lower, lower, upper)
        if record.verdict == TESTER_LIMITED:
            upper = tester_limit = lower
        elif record.verdict == PASS:
            passed_any = True
        else:
            upper = lower
    return _final(s, lower, upper, passed_any, failed_any, tester_limit)


def _final(s: Search, lower: float, upper: float, passed_any: bool, failed_any: bool,
            tester_limit: float | None) -> SearchOutcome:
    """The outcome of a finished bracket. When its upper end is where the tester gave up, the DUT's
    throughput lies at or above the tester's limit: no number, "tester limit reached"."""
    if tester_limit is not None and upper >= tester_limit:
        return s.outcome(TESTER_LIMITED, lower, upper, tester_limit=tester_limit)
    if not passed_any and s.settings.min_rate_qps == lower:
        return s.outcome(BELOW_LOWER, lower, upper, tester_limit=tester_limit)
    status = OK if failed_any else UPPER_NOT_FAILED
    return s.outcome(status, lower, upper, throughput=lower, tester_limit=tester_limit)

