"""Confine each emulated DUT to its CPUs on this machine.

User-space translators go into a cgroup-v1 cpuset /sys/fs/cgroup/cpuset/<prefix>-<dut>. In-kernel work
(forwarding, NAT44, the kernel half of a TUN translator, a tc-BPF program) runs in softirq on the CPU a
packet is received on: RPS masks on every interface of the DUT's namespaces steer it to the same CPUs.
Which CPUs a DUT gets is decided by the placement plan (xlatbench.setups.placement); this module applies it.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

from ...cpulist import cpu_mask, format_cpu_list, parse_cpu_list
from ..topology import DUT_HOSTS
from .errors import EmulationError
from .names import CPUSET_ROOT

if TYPE_CHECKING:
    from .emulator import Emulation


def online_cpus() -> list[int]:
    return list(parse_cpu_list((CPUSET_ROOT / "cpuset.cpus").read_text().strip()))


def _check_cpus(cpus: list[int]) -> None:
    online = online_cpus()
    if not cpus or any(c not in online for c in cpus):
        raise ValueError(f"CPU list {cpus} must be a non-empty subset of the online CPUs {online}")


def set_dut_cpus(
    emulation: Emulation, cpus: list[int], per_dut: dict[str, list[int]] | None = None
) -> dict[str, object]:
    """Confine each DUT (both, or a single-DUT topology's one) to `cpus` (or `per_dut[dut]`); return and
    record what was applied."""
    applied: dict[str, object] = {}
    pids = emulation.pinned_pids()
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


def steer_test_system(emulation: Emulation, cpus_of: dict[str, list[int]]) -> dict[str, str]:
    """RPS on every interface of the test system's hosts ("client": the tester's CPUs, "server": Knot's), so
    that the softirq receiving the tester's replies and Knot's queries runs on their own CPUs. A veth
    receives on the CPU that sent the packet, which is a DUT's: without this the test system's receive work
    is charged to the DUT's idle time. Hosts without CPUs given keep the kernel's default (no RPS)."""
    steered: dict[str, str] = {}
    for host, cpus in cpus_of.items():
        if cpus and host in emulation.netns_of:
            _check_cpus(sorted(cpus))
            steered.update(_set_rps(emulation.netns_of[host], host, cpu_mask(sorted(cpus))))
    return steered


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
