"""Summaries of repeated searches the way the papers report them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# The MAP-E paper reports percentiles and dispersion from 20 repetitions; fewer make p1/p99 meaningless.
MIN_FOR_PERCENTILES = 20


@dataclass(frozen=True)
class Summary:
    """median/min/max of n results (unit of the inputs, e.g. queries/s).

    p1, p99: 1st/99th percentiles (linear interpolation between order statistics), only when n >= 20.
    dispersion: (p99 - p1) / median, fraction, only when n >= 20.
    """

    n: int
    median: float
    minimum: float
    maximum: float
    p1: float | None = None
    p99: float | None = None
    dispersion: float | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "median": self.median, "min": self.minimum, "max": self.maximum,
                "p1": self.p1, "p99": self.p99, "dispersion": self.dispersion}


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("nothing to summarize: no search gave a number")
    data = sorted(values)
    median = statistics.median(data)
    if len(data) < MIN_FOR_PERCENTILES:
        return Summary(len(data), median, data[0], data[-1])
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    p1, p99 = cuts[0], cuts[98]
    dispersion = (p99 - p1) / median if median else None
    return Summary(len(data), median, data[0], data[-1], p1, p99, dispersion)

