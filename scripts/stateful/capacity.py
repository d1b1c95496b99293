"""RFC 9693's connection tracking table capacity, with the quantities of the draft's §2.6.

C0 connections the table surely holds, and R0, the safe establishment rate for C0 (given, or measured by the
establishment-rate search). Exponential search: CT = 2 x CS; RT = the maximum establishment rate of CT
connections (first one trial at beta x RS: when it fails, RT < beta x RS and the search stops; else RT is
searched between beta x RS and RS); while RT >= beta x RS, CS, RS = CT, RT and CT doubles. It stops with the
capacity C between CS and CT. Binary search: C = (CS + CT) / 2 tested by one phase-1 trial at gamma x RS
(validated at alpha x that rate); it passes when every connection was made (and validated), then CS = C,
else CT = C, until CT - CS <= E. The final binary steps are single trials rather than a rate search each:
"the rate at C stays above gamma x RS" and "a trial at gamma x RS passes" are the same test for a DUT whose
pass/fail is monotonic in the rate, at a twentieth of the cost. The result C is CS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .establishment import OK, UPPER_NOT_FAILED, EstablishmentRate, establishment_rate
from .measurer import StatefulMeasurer
from .parameters import RateBracket, StatefulParameterError, check_connections, check_factor

FOUND, BEYOND_TESTER, C0_UNSAFE = "ok", "tester-limited", "c0-not-safe"


@dataclass(frozen=True)
class CapacityParameters:
    """C0 (connections), R0 (connections/s; None: measured at C0 over `bracket`), alpha in (0, 1] (None:
    no validation), beta and gamma in (0, 1), E (connections, >= 1); bracket: the rate searches' bracket."""

    c0: int
    bracket: RateBracket
    beta: float
    gamma: float
    error: int = 1
    r0: float | None = None
    alpha: float | None = None

    def __post_init__(self) -> None:
        check_connections("C0", self.c0)
        check_factor("beta", self.beta, upper_inclusive=False)
        check_factor("gamma", self.gamma, upper_inclusive=False)
        if self.alpha is not None:
            check_factor("alpha", self.alpha, upper_inclusive=True)
        if isinstance(self.error, bool) or not isinstance(self.error, int) or self.error < 1:
            raise StatefulParameterError(f"E (error_connections) must be an integer >= 1, got {self.error!r}")
        if self.r0 is not None and not self.r0 > 0:
            raise StatefulParameterError(f"R0 must be > 0 connections/s, got {self.r0!r}")


@dataclass(frozen=True)
class CapacityStep:
    """One step: phase ("r0", "exponential", "binary"), the connections tried, the rate found (exponential,
    r0) or tried (binary), connections/s, and whether the step passed."""

    phase: str
    connections: int
    rate_cps: float | None
    passed: bool


@dataclass(frozen=True)
class TableCapacity:
    """One capacity measurement (the columns of the draft's Figure 6).

    c0, r0: the start; cs, rs: the last safe size and its rate after the exponential search; ct: the size
    it failed at; capacity: C, the result (None unless status "ok"), entries; error: E. status: "ok",
    "tester-limited" (CT would exceed the flows the tester and the DUT's addresses allow: the table holds at
    least cs), "c0-not-safe" (no rate established C0 connections). steps: every step in order.
    """

    c0: int
    r0: float | None
    cs: int
    rs: float | None
    ct: int
    capacity: int | None
    error: int
    status: str
    steps: tuple[CapacityStep, ...] = field(default=())


def table_capacity(measurer: StatefulMeasurer, params: CapacityParameters) -> TableCapacity:
    """The exponential then binary search of the connection tracking table's capacity."""
    most = measurer.max_connections()
    check_connections("C0", params.c0, most)
    steps: list[CapacityStep] = []
    r0 = params.r0
    if r0 is None:
        found = establishment_rate(measurer, params.c0, params.bracket, params.alpha)
        r0 = _rate(found)
        steps.append(CapacityStep("r0", params.c0, r0, r0 is not None))
        if r0 is None:
            return TableCapacity(params.c0, None, params.c0, None, params.c0, None, params.error, C0_UNSAFE,
                                 tuple(steps))
    cs, rs, ct = params.c0, r0, 2 * params.c0
    while True:
        if ct > most:
            return TableCapacity(params.c0, r0, cs, rs, ct, None, params.error, BEYOND_TESTER, tuple(steps))
        floor = max(1.0, float(round(params.beta * rs)))
        rt = None
        if _trial(measurer, ct, floor, params.alpha):  # RT >= beta x RS: find RT between the two
            rt = _rate(establishment_rate(measurer, ct, params.bracket.between(floor, rs), params.alpha))
            rt = floor if rt is None else rt
        passed = rt is not None
        steps.append(CapacityStep("exponential", ct, rt if passed else floor, passed))
        if not passed:
            break
        assert rt is not None
        cs, rs, ct = ct, rt, 2 * ct
    exp_cs, exp_rs, exp_ct = cs, rs, ct
    low, high = cs, ct
    rate = max(1.0, float(round(params.gamma * rs)))
    while high - low > params.error:
        middle = (low + high) // 2
        ok = _trial(measurer, middle, rate, params.alpha)
        steps.append(CapacityStep("binary", middle, rate, ok))
        if ok:
            low = middle
        else:
            high = middle
    return TableCapacity(params.c0, r0, exp_cs, exp_rs, exp_ct, low, params.error, FOUND, tuple(steps))


def _rate(found: EstablishmentRate) -> float | None:
    return found.rate_cps if found.status in (OK, UPPER_NOT_FAILED) else None


def _trial(measurer: StatefulMeasurer, connections: int, rate: float, alpha: float | None) -> bool:
    if alpha is None:
        return measurer.establish(connections, rate).passed
    check_rate = max(1.0, float(round(alpha * rate)))
    two = measurer.over_established(connections, rate, check_rate, connections / check_rate)
    return two.setup.passed and not two.tester_limited and two.answered == two.sent >= connections
