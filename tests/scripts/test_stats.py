from __future__ import annotations

import pytest

from xlatbench.analysis.tables import scale_up
from xlatbench.scripts.stats import summarize


def test_ten_values_give_median_min_max_only() -> None:
    s = summarize([5, 1, 4, 2, 3, 9, 8, 7, 6, 10])
    assert (s.n, s.median, s.minimum, s.maximum) == (10, 5.5, 1, 10)
    assert s.p1 is None and s.dispersion is None


def test_twenty_values_add_percentiles_and_dispersion() -> None:
    values = list(range(100, 121))  # 21 values, median 110
    s = summarize(values)
    # inclusive (linear) percentiles: p1 = 100 + 0.01 * 20, p99 = 100 + 0.99 * 20
    assert s.p1 == pytest.approx(100.2)
    assert s.p99 == pytest.approx(119.8)
    assert s.dispersion == pytest.approx((119.8 - 100.2) / 110)


def test_nothing_to_summarize() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_current_over_previous_row_like_table_2() -> None:
    ratios = scale_up([165_403, 236_869, 425_021, 510_155, 530_064])
    assert ratios == ["-", "1.43", "1.79", "1.20", "1.04"]
    assert scale_up([100.0, None, 0.0, 50.0]) == ["-", "-", "-", "-"]
