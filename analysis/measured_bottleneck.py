"""Bottleneck by measurement (RFC 8219's Figure 5, issue 11): when a campaign measured a dual-DUT chain and
its two single-DUT topologies (464xlat with clat and plat, mapt with ce and br), the device whose own
throughput is lowest is the bottleneck, and the chain either reaches that throughput (within the search
error) or stays below it (the two DUTs together do worse than the slower one alone: in emulation they share
the machine's CPUs). This sits beside the idle-time verdict of analysis/bottleneck.py; it does not replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..scripts.records import method_label, search_error_qps
from .records import Series, Throughput
from .tables import Table

USABLE = ("ok", "upper-bound-not-failed")  # statuses whose median is a throughput (or a lower bound of it)


@cache
def single_dut_of(topology: str) -> str | None:
    """The dual-DUT chain a single-DUT topology's device belongs to (setups/testbeds.py says it)."""
    from ..setups.paper import TOPOLOGIES

    make = TOPOLOGIES.get(topology)
    return make().single_dut_of if make is not None else None


@dataclass(frozen=True)
class Point:
    """One core count: the chain's median and each device's own (queries/s, None without a number), the
    device with the lowest (None unless every device has a number), the comparison's search error
    (queries/s) and how the chain compares with that device: "reaches" (within the error), "below" or
    "above" (beyond the error: the measurements disagree), None when there is nothing to compare."""

    cores: int
    chain_qps: float | None
    devices_qps: dict[str, float | None]
    bottleneck: str | None
    error_qps: float | None
    outcome: str | None

    @property
    def reaches(self) -> bool | None:
        return None if self.outcome is None else self.outcome == "reaches"


@dataclass(frozen=True)
class Comparison:
    """A dual-DUT series and its single-DUT series (same method and sessions), point by point."""

    chain: Series
    devices: tuple[Series, ...]
    points: tuple[Point, ...]


def _median(cell: Throughput | None) -> float | None:
    return cell.median if cell is not None and cell.status in USABLE else None


def _error(series: Series, rate: float) -> float:
    c = series.conditions
    return search_error_qps(c.get("error_qps"), c.get("error_ratio"), rate)


def comparisons(all_series: list[Series]) -> list[Comparison]:
    """Every dual-DUT series with at least two single-DUT series of its devices beside it."""
    found = []
    for chain in all_series:
        devices = tuple(s for s in all_series if single_dut_of(s.topology) == chain.topology
                        and (s.method, s.sessions) == (chain.method, chain.sessions))
        if len({s.topology for s in devices}) >= 2:
            cores = sorted(set(chain.cells).intersection(*(s.cells for s in devices)))
            points = tuple(p for p in (_point(chain, devices, c) for c in cores) if _measured(p))
            found.append(Comparison(chain, devices, points))
    return found


def _measured(point: Point) -> bool:
    """Something at this core count has a throughput (else the column would be empty)."""
    return point.chain_qps is not None or any(v is not None for v in point.devices_qps.values())


def _point(chain: Series, devices: tuple[Series, ...], cores: int) -> Point:
    chain_qps = _median(chain.cells[cores])
    own = {s.setup: _median(s.cells[cores]) for s in devices}
    if any(qps is None for qps in own.values()):
        return Point(cores, chain_qps, own, None, None, None)  # the missing one may be the slowest
    known = {name: qps for name, qps in own.items() if qps is not None}
    slowest = min(known, key=lambda name: known[name])
    device = next(s for s in devices if s.setup == slowest)
    if chain_qps is None:
        return Point(cores, chain_qps, own, slowest, None, None)
    # Each search stops within its error of the throughput, so two results differ by up to both errors.
    error = _error(chain, chain_qps) + _error(device, known[slowest])
    difference = chain_qps - known[slowest]
    outcome = "reaches" if abs(difference) <= error else ("below" if difference < 0 else "above")
    return Point(cores, chain_qps, own, slowest, error, outcome)


def _qps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _reach_text(point: Point) -> str:
    device = point.devices_qps.get(point.bottleneck or "")
    if point.outcome is None or point.chain_qps is None or point.error_qps is None or not device:
        return "-"
    share, error = point.chain_qps / device, f"error ± {point.error_qps:,.0f}"
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
             f"Figure 5), {method_label(chain.rfc8219_exact)}: resolved queries/s "
             f"({'; '.join(implementations)})")
    rows = [[f"{chain.setup}: the chain (queries/s)", *[_qps(p.chain_qps) for p in points]]]
    rows += [[f"{s.setup} alone (queries/s)", *[_qps(p.devices_qps[s.setup]) for p in points]]
             for s in comparison.devices]
    rows.append(["Bottleneck (lowest throughput alone)",
                 *[p.bottleneck or "not determined: a device has no throughput" for p in points]])
    rows.append(["The chain reaches it (within the search error)", *[_reach_text(p) for p in points]])
    return Table(title, ["Number of active DUT cores", *[str(p.cores) for p in points]], rows)


def measured_tables(all_series: list[Series]) -> list[Table]:
    return [measured_table(c) for c in comparisons(all_series) if c.points]
