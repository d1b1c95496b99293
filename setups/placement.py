"""Confine each DUT's translator to given CPUs.

User-space translators (tayga) go into a cgroup-v1 cpuset /sys/fs/cgroup/cpuset/<prefix>-<dut>.
In-kernel work (forwarding, NAT44, the kernel half of a TUN translator) runs in softirq on the CPU a
packet is received on: RPS masks on every interface of the DUT's namespaces steer it to the same CPUs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .emulation import Emulation
    from .topology import Topology

from .emulation import EmulationError
from .names import CPUSET_ROOT, DUT_HOSTS

# The tester's grammar (dnsperf/src/cpulist.cpp): comma-separated CPUs and ranges, "0", "0,2", "1-3,6";
# each number 1-5 digits and below CPU_SETSIZE, no backwards range, no CPU twice. Nothing else parses one.
CPU_SETSIZE = 1024
_CPU_ITEM = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of "0", "0,2" or "1-3,6" in the order written (ranges expanded); ValueError with a message
    a user can act on otherwise."""
    return _cpus_of(text.split(","), text)


def parse_user_cpu_list(text: str) -> tuple[int, ...]:
    """A CPU list as users write it in options and campaign files: the tester's grammar, optionally in
    brackets and with spaces around the items ("0,1", "[0, 1]", " 1-3 "). The one place that spelling is
    accepted; ValueError naming the text as written otherwise."""
    inner = text.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    return _cpus_of([item.strip() for item in inner.split(",")], text)


def _cpus_of(items: list[str], text: str) -> tuple[int, ...]:
    cpus: list[int] = []
    for item in items:
        match = _CPU_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"bad CPU list {text!r}: expected numbers and ranges like 0,2-3")
        first, last = int(match[1]), int(match[2] or match[1])
        if max(first, last) >= CPU_SETSIZE:
            raise ValueError(f"bad CPU list {text!r}: CPU {max(first, last)} is beyond the kernel's limit")
        if last < first:
            raise ValueError(f"bad CPU list {text!r}: range {item} runs backwards")
        for cpu in range(first, last + 1):
            if cpu in cpus:
                raise ValueError(f"bad CPU list {text!r}: CPU {cpu} appears twice")
            cpus.append(cpu)
    return tuple(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """CPUs in the tester's grammar, as every output of the suite spells them: "0,2,3"."""
    return ",".join(str(cpu) for cpu in cpus)


def cpu_list_arg(text: str) -> tuple[int, ...]:
    """parse_cpu_list as an argparse type (a bad list is a usage error naming the option)."""
    try:
        return parse_cpu_list(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def cpu_mask(cpus: list[int]) -> str:
    """Hex mask as /sys/class/net/IF/queues/rx-N/rps_cpus takes it."""
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    return f"{mask:x}"


def online_cpus() -> list[int]:
    return list(parse_cpu_list((CPUSET_ROOT / "cpuset.cpus").read_text().strip()))


def _check_cpus(cpus: list[int]) -> None:
    online = online_cpus()
    if not cpus or any(c not in online for c in cpus):
        raise ValueError(f"CPU list {cpus} must be a non-empty subset of the online CPUs {online}")


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


def set_dut_cpus(
    emulation: Emulation, cpus: list[int], per_dut: dict[str, list[int]] | None = None
) -> dict[str, object]:
    """Confine each DUT (both, or a single-DUT topology's one) to `cpus` (or `per_dut[dut]`); return and
    record what was applied."""
    applied: dict[str, object] = {}
    pids = emulation.translator_pids()
    for dut, hosts in DUT_HOSTS.items():
        if not any(host in emulation.netns_of for host in hosts):
            continue  # a single-DUT topology has dut1 only
        dut_cpus = sorted((per_dut or {}).get(dut, cpus))
        _check_cpus(dut_cpus)
        record: dict[str, object] = {"cpus": dut_cpus}
        dut_pids = pids.get(dut, [])
        if dut_pids:
            record["cpuset"] = _confine(CPUSET_ROOT / f"{emulation.prefix}-{dut}", dut_cpus, dut_pids)
        rps = {}
        for host in hosts:
            if host in emulation.netns_of:
                rps.update(_set_rps(emulation.netns_of[host], host, cpu_mask(dut_cpus)))
        record["rps_cpus"] = rps
        applied[dut] = record
    emulation.update_state(placement=applied)
    return applied


def _confine(path, cpus: list[int], pids: list[int]) -> dict[str, object]:
    try:
        path.mkdir(exist_ok=True)
        (path / "cpuset.mems").write_text((CPUSET_ROOT / "cpuset.mems").read_text())
        (path / "cpuset.cpus").write_text(format_cpu_list(cpus))
        for pid in pids:
            (path / "cgroup.procs").write_text(str(pid))
    except OSError as err:
        raise EmulationError(
            f"cannot use cpuset {path}: {err} (cgroup-v1 cpuset controller needed)"
        ) from None
    return {"path": str(path), "cpus": (path / "cpuset.cpus").read_text().strip(), "pids": pids}


def _set_rps(netns: str, host: str, mask: str) -> dict[str, str]:
    links = json.loads(
        subprocess.run(
            ["ip", "-n", netns, "-j", "link", "show"], capture_output=True, text=True, check=True
        ).stdout
    )
    paths = []
    for link in links:
        if link["ifname"] != "lo":
            paths.append(f"/sys/class/net/{link['ifname']}/queues/rx-0/rps_cpus")
    script = 'mask=$1; shift; for f in "$@"; do echo "$mask" > "$f" || exit 1; done'
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "sh", "-c", script, "rps", mask, *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise EmulationError(f"{host}: cannot set RPS mask {mask}: {done.stderr.strip()}")
    return {f"{host}:{p.split('/')[4]}": mask for p in paths}
