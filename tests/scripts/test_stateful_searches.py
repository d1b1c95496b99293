"""Known answers of the RFC 9693 searches on the simulated stateful DUT (scripts/stateful/fake.py): the
capacity search finds the table size within E, the establishment-rate search the new-connection cap within
its error, the tear-down rate the deletion rate within tolerance, phase 2 never grows the table; bad
parameters are refused in one line."""

from __future__ import annotations

import pytest

from xlatbench.scripts.search import SearchSettings
from xlatbench.scripts.stateful.capacity import FOUND, CapacityParameters, table_capacity
from xlatbench.scripts.stateful.establishment import OK, establishment_rate
from xlatbench.scripts.stateful.fake import FakeStatefulDut
from xlatbench.scripts.stateful.measurer import TableSettings
from xlatbench.scripts.stateful.parameters import RateBracket, StatefulParameterError
from xlatbench.scripts.stateful.teardown import teardown_rate
from xlatbench.scripts.stateful.throughput import throughput_over_connections


@pytest.mark.parametrize("cap", [1_000.0, 37_500.0, 250_000.0, 2_400_000.0])
def test_establishment_rate_finds_the_cap(cap: float) -> None:
    dut = FakeStatefulDut(table_size=10_000_000, max_cps=cap)
    bracket = RateBracket(max_cps=4_000_000, error_cps=100)
    found = establishment_rate(dut, 1_000_000, bracket)
    assert found.status == OK
    assert found.rate_cps is not None and cap - bracket.error_cps <= found.rate_cps <= cap
    assert found.error_cps <= bracket.error_cps


def test_establishment_rate_with_noise_stays_within_it() -> None:
    dut = FakeStatefulDut(table_size=10_000_000, max_cps=200_000, noise=0.01, seed=3)
    found = establishment_rate(dut, 400_000, RateBracket(max_cps=1_000_000, error_ratio=0.001))
    assert found.rate_cps is not None and abs(found.rate_cps - 200_000) / 200_000 < 0.05


def test_validation_at_alpha_lowers_the_rate_only_when_phase_two_cannot_carry_it() -> None:
    dut = FakeStatefulDut(table_size=10_000_000, max_cps=400_000, throughput_qps=300_000)
    bracket = RateBracket(max_cps=1_000_000, error_cps=100)
    loose = establishment_rate(dut, 100_000, bracket, alpha=0.5)    # validation at 200 000 q/s: carried
    tight = establishment_rate(dut, 100_000, bracket, alpha=1.0)    # validation at 400 000 q/s: not
    assert loose.rate_cps is not None and 399_900 <= loose.rate_cps <= 400_000
    assert tight.rate_cps is not None and 299_900 <= tight.rate_cps <= 300_000
    assert all(s.validation_sent is not None for s in tight.steps)


@pytest.mark.parametrize("size", [1 << 14, 100_003, 4_194_304])
def test_capacity_finds_the_table_size_within_e(size: int) -> None:
    dut = FakeStatefulDut(table_size=size, max_cps=2_500_000)
    params = CapacityParameters(c0=min(1000, size), bracket=RateBracket(max_cps=4_000_000, error_ratio=0.01),
                                beta=0.2, gamma=0.4, error=1)
    found = table_capacity(dut, params)
    assert found.status == FOUND
    assert found.capacity is not None and size - params.error <= found.capacity <= size
    assert found.cs <= size < found.ct and found.ct == 2 * found.cs


def test_capacity_with_a_coarser_error() -> None:
    dut = FakeStatefulDut(table_size=50_000, max_cps=100_000)
    dut.apply(TableSettings(max_connections=70_000))   # the table size set per point wins over the default
    found = table_capacity(dut, CapacityParameters(c0=1_000, bracket=RateBracket(400_000, error_cps=500),
                                                   beta=0.2, gamma=0.4, error=100, r0=90_000))
    assert found.capacity is not None and 70_000 - 100 <= found.capacity <= 70_000
    assert found.r0 == 90_000


def test_teardown_rate_within_tolerance() -> None:
    dut = FakeStatefulDut(table_size=1 << 22, max_cps=1_000_000, teardown_per_s=350_000, hash_size=1 << 22,
                          noise=0.01, seed=7)
    done = teardown_rate(dut, 1_562_500, 500_000)
    assert done.complete and done.removed == 1_562_500
    assert done.rate_per_s is not None and abs(done.rate_per_s - 350_000) / 350_000 < 0.05
    assert done.empty_delete_s == pytest.approx((1 << 22) * 1e-7)


def test_phase_two_never_grows_the_table_and_phase_one_makes_exactly_n() -> None:
    dut = FakeStatefulDut(table_size=1_000_000, max_cps=100_000, throughput_qps=50_000)
    settings = SearchSettings(max_rate_qps=200_000, error_qps=1_000, duration_s=10, rest_s=0, repetitions=2)
    found = throughput_over_connections(dut, 200_000, 50_000, settings)
    assert found.table_grew == 0 and found.phases
    assert all(p.setup.table_after == 200_000 and p.table_after == p.table_before == 200_000
               for p in found.phases)
    assert found.repeated.summary is not None
    assert 49_000 <= found.repeated.summary.median <= 50_000


def test_a_table_that_grows_in_phase_two_is_seen() -> None:
    dut = FakeStatefulDut(table_size=1_000_000, max_cps=100_000)
    two = dut.over_established(300_000, 200_000, 10_000, 5)  # phase 1 above the cap: flows left unmade
    assert not two.setup.passed and two.table_grew


BRACKET = RateBracket(1e6, error_cps=10)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: CapacityParameters(1000, BRACKET, beta=1.2, gamma=0.4), "beta must be in (0, 1)"),
    (lambda: CapacityParameters(1000, BRACKET, beta=0.2, gamma=0), "gamma must be in"),
    (lambda: CapacityParameters(1000, BRACKET, beta=0.2, gamma=0.4, alpha=1.5), "alpha must be in (0, 1]"),
    (lambda: CapacityParameters(1000, BRACKET, beta=0.2, gamma=0.4, error=0), "E (error_connections)"),
    (lambda: RateBracket(1e6), "error_cps or error_ratio"),
    (lambda: establishment_rate(FakeStatefulDut(100, 100, max_flows=1000), 5000, BRACKET),
     "more than the 1,000 distinct flows"),
])
def test_bad_parameters_are_refused_in_one_line(make, message: str) -> None:
    with pytest.raises(StatefulParameterError) as err:
        make()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_capacity_says_when_c0_is_not_safe_or_the_flows_run_out() -> None:
    bracket = RateBracket(max_cps=1_000_000, error_cps=1000)
    too_big = table_capacity(FakeStatefulDut(table_size=500, max_cps=100_000),
                             CapacityParameters(c0=1000, bracket=bracket, beta=0.2, gamma=0.4))
    assert too_big.status == "c0-not-safe" and too_big.capacity is None
    short = table_capacity(FakeStatefulDut(table_size=100_000, max_cps=100_000, max_flows=30_000),
                           CapacityParameters(c0=1000, bracket=bracket, beta=0.2, gamma=0.4))
    assert short.status == "tester-limited" and short.capacity is None and short.cs == 16_000


def test_a_tester_that_cannot_offer_the_rate_is_never_the_duts_loss() -> None:
    dut = FakeStatefulDut(table_size=10_000_000, max_cps=500_000, tester_cps=200_000)
    found = establishment_rate(dut, 100_000, RateBracket(max_cps=1_000_000, error_cps=1000))
    assert found.status == "tester-limited" and found.rate_cps is None
    assert not any(s.tester_limited and s.passed for s in found.steps)
