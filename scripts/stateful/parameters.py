"""The RFC 9693 searches' parameters and their one rule of validity: each check raises
`StatefulParameterError` with one line naming the parameter, its range and the value given."""

from __future__ import annotations

import math
from dataclasses import dataclass


class StatefulParameterError(ValueError):
    """A stateful procedure's parameter is out of range; one line naming it."""


def check_factor(name: str, value: float, *, upper_inclusive: bool) -> float:
    """alpha in (0, 1], beta and gamma in (0, 1): a fraction of a rate."""
    bad = isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    high = value > 1 if upper_inclusive else value >= 1
    if bad or value <= 0 or high:
        bound = "(0, 1]" if upper_inclusive else "(0, 1)"
        raise StatefulParameterError(f"{name} must be in {bound}, got {value!r}")
    return float(value)


def check_connections(name: str, value: int, most: int | None = None) -> int:
    """A connection count: an integer >= 1 and, when `most` is known, at most what the tester's flows and
    the DUT's addresses allow (StatefulMeasurer.max_connections)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StatefulParameterError(f"{name} must be an integer >= 1, got {value!r}")
    if most is not None and value > most:
        raise StatefulParameterError(f"{name} {value:,} is more than the {most:,} distinct flows the tester "
                                     "and the DUT's addresses allow (source addresses x source ports)")
    return value


@dataclass(frozen=True)
class RateBracket:
    """The bracket of a connection establishment rate search, connections/s.

    min_cps: lower bound (assumed to pass, measured only when nothing above it passed); max_cps: upper
    bound (assumed to fail, never measured); error_cps: stop when upper - lower <= error_cps; error_ratio:
    or when upper - lower <= error_ratio x lower (either or both).
    """

    max_cps: float
    min_cps: float = 0.0
    error_cps: float | None = None
    error_ratio: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_cps < self.max_cps:
            raise StatefulParameterError(f"the rate bracket needs 0 <= min_cps < max_cps, got {self.min_cps} "
                                         f"and {self.max_cps}")
        if self.error_cps is None and self.error_ratio is None:
            raise StatefulParameterError("the rate search needs error_cps or error_ratio")
        if self.error_cps is not None and self.error_cps < 1:
            raise StatefulParameterError(f"error_cps must be >= 1 connection/s, got {self.error_cps}")
        if self.error_ratio is not None and not 0 < self.error_ratio < 1:
            raise StatefulParameterError(f"error_ratio must be in (0, 1), got {self.error_ratio}")

    def done(self, lower: float, upper: float) -> bool:
        width = upper - lower
        return (self.error_cps is not None and width <= self.error_cps) or \
            (self.error_ratio is not None and width <= self.error_ratio * max(lower, 1.0))

    def between(self, lower: float, upper: float) -> RateBracket:
        """The same error over [lower, upper] (the capacity search's [beta x RS, RS])."""
        return RateBracket(max(upper, lower + 1.0), lower, self.error_cps, self.error_ratio)

    def steps(self, near_cps: float | None = None) -> int:
        """Trials of one search over this bracket (the plan's estimate); near_cps: where the answer is
        expected (a relative error is taken there; default the bracket's middle)."""
        near = near_cps if near_cps is not None else (self.min_cps + self.max_cps) / 2
        widths = [w for w in (self.error_cps, None if self.error_ratio is None else self.error_ratio * near)
                  if w]
        return max(1, math.ceil(math.log2(max((self.max_cps - self.min_cps) / max(widths), 1.0))))
