"""A figure that knows what it is: exact, a lower bound ("≥ R": the search never failed), an upper bound (a
ratio over a lower bound), a median over fewer repetitions than were run ("†"), or unknown (a ratio of two
bounds that point the same way says nothing).

Every ratio, rate and verdict the report derives from a throughput goes through Value, so a bound printed
in one cell is never printed as a plain number in the next (the scale-up row, the side-by-side ratios, the
sessions proportions, the measured bottleneck, the idle and latency rate).
"""

from __future__ import annotations

from dataclasses import dataclass

# Marks a median that fewer searches than were run gave (the others found no number).
INCOMPLETE = "†"

EXACT, LOWER, UPPER = 0, 1, -1  # which side of the figure the truth lies on: on it, at or above, at or below

OK_STATUSES = ("ok", "upper-bound-not-failed")


@dataclass(frozen=True)
class Value:
    """number: the figure (None: no number). side: EXACT, LOWER (truth ≥ number) or UPPER (truth ≤ number).
    partial: it rests on a median over fewer repetitions than were run. unknown: two bounds made it
    meaningless (a number exists on each side but not of their ratio)."""

    number: float | None
    side: int = EXACT
    partial: bool = False
    unknown: bool = False

    @property
    def exact(self) -> bool:
        return self.number is not None and self.side == EXACT

    @property
    def lower_bound(self) -> bool:
        return self.number is not None and self.side == LOWER

    def over(self, other: Value) -> Value:
        """self / other, with what each side's bound makes of the quotient."""
        partial = self.partial or other.partial
        if self.unknown or other.unknown:
            return Value(None, partial=partial, unknown=True)
        if self.number is None or not other.number:
            return Value(None, partial=partial)
        sides = {self.side, -other.side} - {EXACT}
        if len(sides) > 1:
            return Value(None, partial=partial, unknown=True)
        return Value(self.number / other.number, sides.pop() if sides else EXACT, partial)

    def text(self, digits: int = 2, thousands: bool = False, missing: str = "-") -> str:
        """'1.50', '≥ 1.50', '≤ 0.67', '1.50 †', 'unknown' or `missing`."""
        if self.unknown:
            return "unknown" + (f" {INCOMPLETE}" if self.partial else "")
        if self.number is None:
            return missing
        body = f"{self.number:,.{digits}f}" if thousands else f"{self.number:.{digits}f}"
        sign = {EXACT: "", LOWER: "≥ ", UPPER: "≤ "}[self.side]
        return f"{sign}{body}" + (f" {INCOMPLETE}" if self.partial else "")


def of_cell(status: str, median: float | None, n: int, repetitions: int | None) -> Value:
    """A table cell's median as a Value: exact when its searches failed above it, a lower bound when one
    never failed, partial when fewer searches than `repetitions` gave a number; no number otherwise."""
    if status not in OK_STATUSES or median is None:
        return Value(None)
    return Value(median, LOWER if status == "upper-bound-not-failed" else EXACT,
                 bool(repetitions) and n < (repetitions or 0))


def rate_text(rate_qps: float, lower_bound: bool, partial: bool) -> str:
    """An idle or latency rate as every output prints it: '≥ 100,000' when its search never failed,
    '100,000 †' when its median is over fewer repetitions."""
    return Value(rate_qps, LOWER if lower_bound else EXACT, partial).text(0, thousands=True)
