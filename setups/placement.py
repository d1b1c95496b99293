"""Where the DUTs run at each core count: the placement plan both worlds record.

An emulated testbed shares this machine's CPUs between the tester, Knot and the DUTs, so the plan picks
CPUs for each DUT (xlatbench.setups.emulation.cpusets applies it); on a real testbed each DUT has a host of
its own (OWN_HOSTS). The kinds of placement are named here once, for the records and the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .topology import DUT_HOSTS

if TYPE_CHECKING:
    from .topology import Topology

PER_DUT = "per-dut"  # each DUT its own CPUs, none of them the tester's or Knot's
SHARED_DUTS = "shared-duts"  # the DUTs share CPUs, none of them the tester's or Knot's
WITH_TEST_SYSTEM = "with-test-system"  # too few CPUs: the DUTs share CPUs with the tester or Knot
FIXED = "cpu_map"  # the campaign file's cpu_map chose the CPUs
OWN_HOSTS = "own-hosts"  # a real testbed: each DUT on its own host, the tester and Knot on theirs


@dataclass(frozen=True)
class DutPlan:
    """Where the DUTs run at one core count. per_dut: DUT -> its CPUs. mode: PER_DUT, SHARED_DUTS,
    WITH_TEST_SYSTEM or FIXED. test_system: the CPUs the tester and Knot were taken to use.
    shared_with_test_system: DUT CPUs among them (empty unless the machine has too few CPUs)."""

    cores: int
    per_dut: dict[str, tuple[int, ...]]
    mode: str
    test_system: tuple[int, ...]
    shared_with_test_system: tuple[int, ...]

    @property
    def cpus(self) -> list[int]:
        """Every CPU some DUT runs on."""
        return sorted({cpu for cpus in self.per_dut.values() for cpu in cpus})

    def record(self) -> dict[str, Any]:
        """What a result record says about the placement (beside what set_dut_cpus applied)."""
        return {"cores": self.cores, "cpus": self.cpus, "placement": self.mode,
                "per_dut": {dut: list(cpus) for dut, cpus in self.per_dut.items()},
                "test_system_cpus": list(self.test_system),
                "shared_with_test_system": list(self.shared_with_test_system)}


def plan_dut_cpus(usable: Sequence[int], tester_cpus: Sequence[int], knot_cpus: Sequence[int], cores: int,
                  duts: Sequence[str], fixed: Sequence[int] | None = None) -> DutPlan:
    """The one placement rule for emulated DUTs on the test system's own machine.

    The test system's CPUs are the tester's (sender and receiver) and Knot's pins; an unpinned tester or
    Knot is taken to sit on the lowest usable CPU (Knot 3.2 puts its first worker on CPU 0 itself). Of the
    other usable CPUs, the highest-numbered are used: `cores` for each DUT on its own when there are enough
    (PER_DUT: the first DUT the lower block), else `cores` shared by the DUTs (SHARED_DUTS), else, with too
    few CPUs, the highest-numbered `cores` usable CPUs, the test system's among them (WITH_TEST_SYSTEM).
    `fixed` (a campaign's cpu_map entry) overrides the rule for every DUT. ValueError when `cores` cannot
    be placed at all."""
    if not duts:
        raise ValueError("no DUT to place")
    if not 1 <= cores <= len(usable):
        raise ValueError(f"{cores} DUT core(s) asked, but only CPUs {list(usable)} are usable")
    ordered = sorted(usable)
    test_system = set(tester_cpus or ordered[:1]) | set(knot_cpus or ordered[:1])
    free = [cpu for cpu in ordered if cpu not in test_system]
    if fixed is not None:
        mode, per_dut = FIXED, {dut: tuple(sorted(fixed)) for dut in duts}
    elif len(free) >= cores * len(duts):
        top = free[len(free) - cores * len(duts):]
        mode, per_dut = PER_DUT, {dut: tuple(top[i * cores:(i + 1) * cores]) for i, dut in enumerate(duts)}
    elif len(free) >= cores:
        mode, per_dut = SHARED_DUTS, {dut: tuple(free[-cores:]) for dut in duts}
    else:
        mode, per_dut = WITH_TEST_SYSTEM, {dut: tuple(ordered[-cores:]) for dut in duts}
    used = {cpu for cpus in per_dut.values() for cpu in cpus}
    return DutPlan(cores, per_dut, mode, tuple(sorted(test_system)), tuple(sorted(used & test_system)))


def duts_of(topology: Topology) -> tuple[str, ...]:
    """The DUTs a topology has (a single-DUT topology: dut1 only), as set_dut_cpus confines them."""
    names = {host.name for host in topology.hosts}
    return tuple(dut for dut, hosts in DUT_HOSTS.items() if names & set(hosts))


