"""Where a report holds both methods on one cell (the same setup, DUT cores and tester sessions): whether the
MLRsearch figure (its first goal's median conditional throughput) lies inside the RFC 8219 search's
[min, max] over its repetitions, and how far from the RFC median it lies. The two are never averaged or put
in one table cell: this table only says whether they agree, which is what a reader of an MLRsearch figure
needs before comparing it with a published RFC 8219 one.
"""

from __future__ import annotations

from .series import Series, Throughput
from .tables import Table

MLRSEARCH = "mlrsearch"


def _pairs(all_series: list[Series]) -> list[tuple[Series, Series]]:
    """(RFC 8219 series, MLRsearch series) of the same setup and tester flows."""
    rfc = [s for s in all_series if s.rfc8219_exact]
    mlr = [s for s in all_series if s.method == MLRSEARCH]
    return [(r, m) for r in rfc for m in mlr if (r.setup, r.flows) == (m.setup, m.flows)]


def _verdict(rfc: Throughput, mlr: Throughput) -> str:
    if None in (rfc.minimum, rfc.maximum, rfc.median) or mlr.median is None:
        return "no figure on both sides"
    inside = rfc.minimum <= mlr.median <= rfc.maximum
    off = 100 * (mlr.median / rfc.median - 1)
    return f"{'yes' if inside else '**no**'} ({off:+.2f} % of the RFC median)"


def agreement_table(all_series: list[Series]) -> Table | None:
    """One row per cell measured by both methods; None when no cell is."""
    rows = []
    for rfc, mlr in _pairs(all_series):
        for cores in sorted(set(rfc.cells) & set(mlr.cells)):
            r, m = rfc.cells[cores], mlr.cells[cores]
            searches = "" if (rfc.search, mlr.search) == ("default", "default") else \
                f" (searches {rfc.search!r}, {mlr.search!r})"
            rfc_text = "-" if r.median is None else \
                f"{r.median:,.0f} [{r.minimum:,.0f}, {r.maximum:,.0f}] over {r.n}"
            mlr_text = "-" if m.median is None else f"{m.median:,.0f} over {m.n}"
            rows.append([f"{rfc.label}, {cores} DUT core(s){searches}", rfc_text, mlr_text, _verdict(r, m)])
    if not rows:
        return None
    title = ("MLRsearch against the RFC 8219 search on the same cells: is the MLRsearch median (first goal's "
             "conditional throughput) inside the RFC search's [min, max] over its repetitions? queries/s")
    return Table(title, ["Cell", "RFC 8219: median [min, max] over n", "MLRsearch: median over n",
                         "MLRsearch median inside RFC [min, max]"], rows)
