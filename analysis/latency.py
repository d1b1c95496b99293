"""Latency at the throughput rate, reported as the MAP-E paper does: typical latency is the median of the
per-trial medians, worst-case latency the median of the per-trial 99.9th percentiles, both over the trials at
the median throughput rate (the idle-capture runs), with the number of trials. Each trial's percentiles are
over all the queries it sent, late and lost ones counted as infinitely late (as RFC 8219 section 7.2 counts
lost frames), so a DUT that answers 1 % of queries after the timeout shows a worst case "> timeout". The
tester's histogram covers the whole trial: no warm-up is cut (the label says so).
"""

from __future__ import annotations

import math

from .bounded import rate_text
from .evidence import Latency
from .tables import Table


def _ms(seconds: float | None, bound: bool = False, timeout_s: float | None = None) -> str:
    """ms with 3 decimals; '≥ x' for a lower bound; '> timeout' for an infinite percentile."""
    if seconds is None:
        return "-"
    if math.isinf(seconds):
        return f"> {1000 * timeout_s:g} (timeout)" if timeout_s else "> timeout"
    return ("≥ " if bound else "") + f"{1000 * seconds:.3f}"


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.2f}"


def resolution_text(latencies: list[Latency]) -> str:
    """What the tester timed and how finely, from its own JSON; '' when no trial recorded latency."""
    first = next((lat for lat in latencies if lat.trials), None)
    if first is None:
        return ""
    parts = [f"Measured by xlatperf: {first.measured}" if first.measured else "Measured by xlatperf"]
    if first.resolution_s is not None and first.relative_resolution is not None:
        parts.append(f"histogram resolution {1e9 * first.resolution_s:g} ns or "
                     f"{100 * first.relative_resolution:.2f} % of the value, whichever is larger; "
                     "a percentile is "
                     "the upper edge of its bucket, so it overstates the sample by at most that much")
    parts.append("the time includes the tester's own send call and kernel receive path (a small positive "
                 "bias)")
    return "; ".join(parts) + "."


def _search(lat: Latency) -> str:
    return f"{lat.method or '?'} {lat.search!r}" if lat.search else (lat.method or "not recorded")


def latency_table(latencies: list[Latency]) -> Table | None:
    """One row per join key (setup, cores, tester sessions, search, method: analysis.joinkey)."""
    rows = [[lat.setup, str(lat.cores), str(lat.sessions), _search(lat),
             rate_text(lat.rate_qps, lat.rate_lower_bound, lat.rate_partial),
             _ms(lat.typical_s, lat.typical_bound, lat.timeout_s),
             _ms(lat.worst_s, lat.worst_bound, lat.timeout_s),
             _percent(lat.unanswered_ratio), str(lat.trials), lat.implementation] for lat in latencies]
    if not rows:
        return None
    title = ("Idle-capture latency (the CPU-idle runs at the median throughput rate, not RFC 8219 §7.2's "
             "procedure: see its own table where the campaign ran it): typical = median of the per-trial "
             "medians, worst case = median of the per-trial 99.9th percentiles, each over all queries sent "
             "with late and lost ones counted as infinite (as RFC 8219 §7.2 counts lost frames; over the "
             "whole trial, no warm-up cut)")
    if any(lat.typical_bound or lat.worst_bound for lat in latencies):
        title += ("; ≥ = a lower bound (the tester's histogram of valid replies brackets that percentile of "
                  "all queries)")
    if any(lat.rate_lower_bound or lat.rate_partial for lat in latencies):
        title += ("; ≥ = the rate is a lower bound of the throughput (its search never failed), † = a median "
                  "over fewer searches than were run")
    header = ["Setup", "DUT cores", "Tester sessions", "Rate of the median of (search)",
              "Rate (queries/s)", "Typical latency (ms)", "Worst-case latency (ms)",
              "Late or lost (% of queries)",
              "Trials", "DUT implementation"]
    constant = ("Tester sessions", "Rate of the median of (search)", "DUT implementation")
    return _constants_in_title(Table(title, header, rows), constant)


def _constants_in_title(table: Table, names: tuple[str, ...]) -> Table:
    """A column of `names` whose every row says the same moves into the title (a narrower table)."""
    header, rows, title = list(table.header), [list(r) for r in table.rows], table.title
    for name in names:
        i = header.index(name)
        values = {row[i] for row in rows}
        if len(values) == 1 and len(rows) > 0:
            title += f"; {name.lower()}: {values.pop()}"
            header.pop(i)
            for row in rows:
                row.pop(i)
    return Table(title, header, rows)
