"""Bottleneck by measurement (RFC 8219's Figure 5, issue 11): when a campaign measured a dual-DUT chain and
its two single-DUT topologies (464xlat with clat and plat, mapt with ce and br), the device whose own
throughput is lowest is the bottleneck -- unless the next device's throughput is within both searches'
errors of it (each search stops within its error of the throughput, so their order is then not known: "not
determined") -- and the chain either reaches that throughput (within the search error) or stays below it
(the two DUTs together do worse than the slower one alone: in emulation they share the machine's CPUs). It
sits beside the idle-time verdict of analysis/bottleneck.py, in its own table and in each verdict
(`Point.summary`, the report's verdict section and verdicts.json); it does not replace it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..data.records import search_error_qps
from .bounded import Value
from .joinkey import JoinKey
from .series import Series
from .tables import Table, cell_value, series_label


@cache
def single_dut_of(topology: str) -> str | None:
    """The dual-DUT chain a single-DUT topology's device belongs to (setups/testbeds.py says it)."""
    from ..setups.paper import TOPOLOGIES

    make = TOPOLOGIES.get(topology)
    return make().single_dut_of if make is not None else None


@dataclass(frozen=True)
class Point:
    """One core count: the chain's median and each device's own (queries/s, None without a number), the
    device with the lowest (None unless every device has a number and the lowest is exact: a lower bound
    names no bottleneck), the comparison's search error (queries/s) and how the chain compares with that
    device: "reaches" (within the error), "below" or "above" (beyond the error: the measurements disagree),
    "reaches-or-above" (the chain's figure is a lower bound at or above the device's less the error), None
    when there is nothing to compare. chain / devices: the same figures as Values (analysis.bounded)."""

    cores: int
    chain_qps: float | None
    devices_qps: dict[str, float | None]
    bottleneck: str | None
    error_qps: float | None
    outcome: str | None
    chain: Value = Value(None)
    devices: dict[str, Value] = field(default_factory=dict)
    why: str = ""

    @property
    def reaches(self) -> bool | None:
        return None if self.outcome is None else self.outcome == "reaches"

    def summary(self) -> dict[str, Any]:
        """What a verdict shows of it (verdicts.json's `by_measurement`): the device named (None: not
        determined, `why`), each figure in queries/s, and one line of text."""
        alone = ", ".join(f"{name} alone {value.text(0, thousands=True)}"
                          for name, value in sorted(self.devices.items()))
        figures = f"{alone}; the chain {self.chain.text(0, thousands=True)} queries/s"
        if self.bottleneck:
            text = f"{self.bottleneck} ({figures}; the chain reaches it: {_reach_text(self)})"
        else:
            text = f"not determined: {self.why} ({figures})"
        return {"bottleneck": self.bottleneck, "why": self.why, "chain_qps": self.chain_qps,
                "devices_qps": dict(self.devices_qps), "error_qps": self.error_qps, "outcome": self.outcome,
                "text": text}


@dataclass(frozen=True)
class Comparison:
    """A dual-DUT series and its single-DUT series (same method, sessions and search), point by point."""

    chain: Series
    devices: tuple[Series, ...]
    points: tuple[Point, ...]




def _error(series: Series, rate: float) -> float:
    c = series.conditions
    return search_error_qps(c.get("error_qps"), c.get("error_ratio"), rate)


def comparisons(all_series: list[Series]) -> list[Comparison]:
    """Every dual-DUT series with at least two single-DUT series of its devices beside it, at the same join
    key but for the setup (analysis.joinkey: cores, sessions, [[search]] name, method)."""
    found = []
    for chain in all_series:
        devices = tuple(s for s in all_series if single_dut_of(s.topology) == chain.topology
                        and s.key(0) == chain.key(0).with_setup(s.setup))
        if len({s.topology for s in devices}) >= 2:
            cores = sorted(set(chain.cells).intersection(*(s.cells for s in devices)))
            points = tuple(p for p in (_point(chain, devices, c) for c in cores) if _measured(p))
            found.append(Comparison(chain, devices, points))
    return found


def _measured(point: Point) -> bool:
    """Something at this core count has a throughput (else the column would be empty)."""
    return point.chain_qps is not None or any(v is not None for v in point.devices_qps.values())


def _point(chain: Series, devices: tuple[Series, ...], cores: int) -> Point:
    chain_value = cell_value(chain, cores)
    values = {s.setup: cell_value(s, cores) for s in devices}
    chain_qps = chain_value.number
    own = {name: value.number for name, value in values.items()}
    if any(qps is None for qps in own.values()):  # the missing one may be the slowest
        return Point(cores, chain_qps, own, None, None, None, chain_value, values,
                     "a device has no throughput")
    known = {name: qps for name, qps in own.items() if qps is not None}
    slowest = min(known, key=lambda name: known[name])
    if not values[slowest].exact:  # its true throughput may lie above another device's
        return Point(cores, chain_qps, own, None, None, None, chain_value, values,
                     f"{slowest}'s figure is a lower bound (its search never failed)")
    device = next(s for s in devices if s.setup == slowest)
    tie = _tie(devices, known, slowest)
    if tie:
        return Point(cores, chain_qps, own, None, None, None, chain_value, values, tie)
    if chain_qps is None:
        return Point(cores, chain_qps, own, slowest, None, None, chain_value, values)
    # Each search stops within its error of the throughput, so two results differ by up to both errors.
    error = _error(chain, chain_qps) + _error(device, known[slowest])
    difference = chain_qps - known[slowest]
    if chain_value.lower_bound:  # the chain's throughput is at least chain_qps
        outcome = "reaches-or-above" if difference >= -error else None
    else:
        outcome = "reaches" if abs(difference) <= error else ("below" if difference < 0 else "above")
    return Point(cores, chain_qps, own, slowest, error, outcome, chain_value, values)


def _tie(devices: tuple[Series, ...], known: dict[str, float], slowest: str) -> str:
    """Why no device is named when another's throughput is within both searches' errors of the slowest's
    ("" when none is)."""
    for other in sorted(name for name in known if name != slowest):
        series = {s.setup: s for s in devices}
        error = _error(series[slowest], known[slowest]) + _error(series[other], known[other])
        if known[other] - known[slowest] <= error:
            return (f"the two differ by less than their searches' errors ({slowest} {known[slowest]:,.0f}, "
                    f"{other} {known[other]:,.0f} queries/s, ± {error:,.0f})")
    return ""


def _reach_text(point: Point) -> str:
    device = point.devices_qps.get(point.bottleneck or "")
    if point.bottleneck and point.chain.lower_bound and point.outcome is None:
        return "unknown: the chain's figure is a lower bound below the device's"
    if point.outcome is None or point.chain_qps is None or point.error_qps is None or not device:
        return "-"
    share, error = point.chain_qps / device, f"error ± {point.error_qps:,.0f}"
    if point.outcome == "reaches-or-above":
        return f"yes or above (≥ {share:.0%} of it, a lower bound; {error})"
    if point.outcome == "reaches":
        return f"yes ({share:.0%} of it, {error})"
    if point.outcome == "below":
        return f"no: {share:.0%} of it ({error})"
    return f"above it: {share:.0%} ({error}; the measurements disagree, repeat them)"


def measured_table(comparison: Comparison) -> Table:
    chain, points = comparison.chain, comparison.points
    implementations = sorted({cell.implementation for s in (chain, *comparison.devices)
                              for cell in s.cells.values()})
    title = (f"Bottleneck by measurement: {chain.label} beside each of its devices alone (RFC 8219 "
             f"Figure 5), {series_label(chain)}: resolved queries/s "
             f"({'; '.join(implementations)})")
    rows = [[f"{chain.setup}: the chain (queries/s)", *[p.chain.text(0, thousands=True) for p in points]]]
    rows += [[f"{s.setup} alone (queries/s)", *[p.devices[s.setup].text(0, thousands=True) for p in points]]
             for s in comparison.devices]
    rows.append(["Bottleneck (lowest throughput alone)",
                 *[p.bottleneck or f"not determined: {p.why}" for p in points]])
    rows.append(["The chain reaches it (within the search error)", *[_reach_text(p) for p in points]])
    return Table(title, ["Number of active DUT cores", *[str(p.cores) for p in points]], rows)


def point_at(found: list[Comparison], key: JoinKey) -> Point | None:
    """The comparison's point of the chain at `key` (an idle capture's join key), None without one."""
    for comparison in found:
        if comparison.chain.key(key.cores).matches(key):
            return next((p for p in comparison.points if p.cores == key.cores), None)
    return None


def measured_tables(all_series: list[Series]) -> list[Table]:
    return [measured_table(c) for c in comparisons(all_series) if c.points]
