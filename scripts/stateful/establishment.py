"""RFC 9693's maximum connection establishment rate: a binary search on the phase-1 rate, N connections each
step, from an empty table. A step passes when every one of its N queries was answered (each made one
connection). With `alpha`, each step is also validated as the draft's §3.6 does: phase 2 then sends one query
over each of the N connections at alpha x the step's rate, and the step passes only when all of those are
answered too (a connection the DUT did not really keep fails it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..search import midpoint
from .measurer import PhaseOne, StatefulMeasurer
from .parameters import RateBracket, check_connections, check_factor

OK, UPPER_NOT_FAILED, BELOW_LOWER, TESTER_LIMITED = "ok", "upper-bound-not-failed", "below-lower-bound", \
    "tester-limited"


@dataclass(frozen=True)
class RateStep:
    """One step of the search: the rate tried (connections/s), whether it passed, the phase-1 queries
    sent/answered, and with validation the phase-2 queries sent/answered (None without)."""

    rate_cps: float
    passed: bool
    sent: int
    answered: int
    validation_sent: int | None = None
    validation_answered: int | None = None
    tester_limited: bool = False


@dataclass(frozen=True)
class EstablishmentRate:
    """The maximum connection establishment rate of N connections (one repetition).

    connections: N. rate_cps: the highest rate that passed, connections/s (None unless ok or
    upper-bound-not-failed). lower_cps, upper_cps: the final bracket; error_cps: its width when it stopped.
    status: "ok", "upper-bound-not-failed" (every step passed: raise max_cps), "below-lower-bound",
    "tester-limited" (the tester could not offer the rate: nothing of the DUT). alpha: the validation
    factor, None without validation. steps: every step in order.
    """

    connections: int
    rate_cps: float | None
    lower_cps: float
    upper_cps: float
    status: str
    alpha: float | None
    steps: tuple[RateStep, ...] = field(default=())

    @property
    def error_cps(self) -> float:
        return self.upper_cps - self.lower_cps


def establishment_rate(measurer: StatefulMeasurer, connections: int, bracket: RateBracket,
                       alpha: float | None = None) -> EstablishmentRate:
    """Binary search of the phase-1 rate over `bracket` for `connections` connections."""
    check_connections("connections", connections, measurer.max_connections())
    if alpha is not None:
        check_factor("alpha", alpha, upper_inclusive=True)
    lower, upper = bracket.min_cps, bracket.max_cps
    steps: list[RateStep] = []
    passed_any = failed_any = False
    tester_limit: float | None = None
    while not bracket.done(lower, upper):
        rate = midpoint(lower, upper)
        if rate <= lower or rate >= upper:
            break
        step = _step(measurer, connections, rate, alpha)
        steps.append(step)
        if step.tester_limited:
            upper = tester_limit = rate
        elif step.passed:
            lower, passed_any = rate, True
        else:
            upper, failed_any = rate, True
    if not passed_any and lower == bracket.min_cps > 0 and tester_limit is None:
        step = _step(measurer, connections, lower, alpha)  # measure the lower bound before saying "below"
        steps.append(step)
        passed_any = step.passed
        if not step.passed:
            upper = lower
    if tester_limit is not None and upper >= tester_limit:
        status = TESTER_LIMITED
    elif not passed_any:
        status = BELOW_LOWER
    else:
        status = OK if failed_any else UPPER_NOT_FAILED
    rate_cps = lower if status in (OK, UPPER_NOT_FAILED) else None
    return EstablishmentRate(connections, rate_cps, lower, upper, status, alpha, tuple(steps))


def _step(measurer: StatefulMeasurer, connections: int, rate: float, alpha: float | None) -> RateStep:
    if alpha is None:
        one = measurer.establish(connections, rate)
        return _of(one, rate)
    validation_rate = max(1.0, float(round(alpha * rate)))
    two = measurer.over_established(connections, rate, validation_rate, connections / validation_rate)
    first = _of(two.setup, rate)
    validated = first.passed and not two.tester_limited and two.sent >= connections and \
        two.answered == two.sent
    return RateStep(rate, validated, first.sent, first.answered, two.sent, two.answered,
                    first.tester_limited or two.tester_limited)


def _of(one: PhaseOne, rate: float) -> RateStep:
    return RateStep(rate, one.passed, one.sent, one.answered, tester_limited=one.tester_limited)
