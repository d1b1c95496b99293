"""The emulated DUTs' default placement (plan_dut_cpus) on faked machines of 2, 4, 8 and 16 CPUs: the DUTs
keep off the tester's and Knot's CPUs, each on its own CPUs, whenever the machine has enough."""

from __future__ import annotations

import pytest

from xlatbench.setups.paper import topology
from xlatbench.setups.placement import (
    FIXED,
    PER_DUT,
    SHARED_DUTS,
    WITH_TEST_SYSTEM,
    duts_of,
    plan_dut_cpus,
)

BOTH = ("dut1", "dut2")
ONE = ("dut1",)

# usable CPUs, tester (sender + receiver), Knot, cores, DUTs -> mode, dut1's CPUs, dut2's CPUs, shared
CASES = [
    # 2 CPUs, the demo's placement (tester and Knot on CPU 0): as before, both DUTs on CPU 1; 2 cores share.
    (2, [0], [0], 1, BOTH, SHARED_DUTS, [1], [1], []),
    (2, [0], [0], 2, BOTH, WITH_TEST_SYSTEM, [0, 1], [0, 1], [0]),
    (2, [0], [1], 1, BOTH, WITH_TEST_SYSTEM, [1], [1], [1]),
    (2, [], [], 1, BOTH, SHARED_DUTS, [1], [1], []),  # unpinned: taken to be on CPU 0
    (2, [0], [0], 1, ONE, PER_DUT, [1], None, []),  # a single DUT: its own CPU 1
    # 4 CPUs: per DUT at 1 core; 2 cores no longer fit beside tester and Knot twice
    (4, [0], [1], 1, BOTH, PER_DUT, [2], [3], []),
    (4, [0], [1], 2, BOTH, SHARED_DUTS, [2, 3], [2, 3], []),
    (4, [0], [1], 4, BOTH, WITH_TEST_SYSTEM, [0, 1, 2, 3], [0, 1, 2, 3], [0, 1]),
    (4, [0], [0], 1, BOTH, PER_DUT, [2], [3], []),
    (4, [0], [0], 2, ONE, PER_DUT, [2, 3], None, []),
    # 8 CPUs, tester on 0-1, Knot on 2
    (8, [0, 1], [2], 1, BOTH, PER_DUT, [6], [7], []),
    (8, [0, 1], [2], 2, BOTH, PER_DUT, [4, 5], [6, 7], []),
    (8, [0, 1], [2], 4, BOTH, SHARED_DUTS, [4, 5, 6, 7], [4, 5, 6, 7], []),
    (8, [0, 1], [2], 8, BOTH, WITH_TEST_SYSTEM, list(range(8)), list(range(8)), [0, 1, 2]),
    # 16 CPUs, tester on 0, Knot on 1: per DUT up to 4 cores (+4 = 14 free CPUs hold 2 x 4 but not 2 x 8)
    (16, [0], [1], 4, BOTH, PER_DUT, [8, 9, 10, 11], [12, 13, 14, 15], []),
    (16, [0], [1], 8, BOTH, SHARED_DUTS, list(range(8, 16)), list(range(8, 16)), []),
    (16, [0], [1], 16, BOTH, WITH_TEST_SYSTEM, list(range(16)), list(range(16)), [0, 1]),
    (16, [0], [1], 8, ONE, PER_DUT, list(range(8, 16)), None, []),
]


@pytest.mark.parametrize(("n", "tester", "knot", "cores", "duts", "mode", "dut1", "dut2", "shared"), CASES)
def test_plan_on_faked_machines(n, tester, knot, cores, duts, mode, dut1, dut2, shared) -> None:
    plan = plan_dut_cpus(list(range(n)), tester, knot, cores, duts)
    assert plan.mode == mode
    assert list(plan.per_dut["dut1"]) == dut1
    assert (list(plan.per_dut["dut2"]) if "dut2" in plan.per_dut else None) == dut2
    assert list(plan.shared_with_test_system) == shared
    assert all(len(cpus) == cores for cpus in plan.per_dut.values())
    if mode in (PER_DUT, SHARED_DUTS):
        assert not {cpu for cpus in plan.per_dut.values() for cpu in cpus} & set(tester + knot)
    if mode == PER_DUT and dut2 is not None:
        assert not set(dut1) & set(dut2)


def test_plan_uses_only_usable_cpus() -> None:
    """A machine whose usable CPUs are not 0..n-1 (affinity 2-9): tester on 2, Knot on 3."""
    plan = plan_dut_cpus(list(range(2, 10)), [2], [3], 2, BOTH)
    assert (plan.mode, plan.per_dut) == (PER_DUT, {"dut1": (6, 7), "dut2": (8, 9)})
    plan = plan_dut_cpus(list(range(2, 10)), [], [], 1, BOTH)  # unpinned: lowest usable, CPU 2
    assert plan.test_system == (2,) and plan.per_dut == {"dut1": (8,), "dut2": (9,)}


def test_fixed_cpus_override_the_rule_and_still_say_what_they_share() -> None:
    plan = plan_dut_cpus(list(range(8)), [0], [1], 2, BOTH, fixed=[1, 2])
    assert (plan.mode, plan.per_dut) == (FIXED, {"dut1": (1, 2), "dut2": (1, 2)})
    assert plan.shared_with_test_system == (1,)


def test_record_says_what_was_planned() -> None:
    record = plan_dut_cpus(list(range(4)), [0], [1], 1, BOTH).record()
    assert record == {"cores": 1, "cpus": [2, 3], "placement": PER_DUT,
                      "per_dut": {"dut1": [2], "dut2": [3]}, "test_system_cpus": [0, 1],
                      "shared_with_test_system": []}


@pytest.mark.parametrize(("cores", "duts"), [(0, BOTH), (3, BOTH), (1, ())])
def test_impossible_plans_are_refused(cores, duts) -> None:
    with pytest.raises(ValueError):
        plan_dut_cpus([0, 1], [0], [0], cores, duts)


def test_duts_of_topologies() -> None:
    assert duts_of(topology("mapt")) == BOTH
    assert duts_of(topology("ce")) == ONE
