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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .emulation import Emulation

from .emulation import EmulationError
from .names import CPUSET_ROOT, DUT_HOSTS

# The tester's grammar (dnsperf/src/cpulist.cpp): comma-separated CPUs and ranges, "0", "0,2", "1-3,6";
# each number 1-5 digits and below CPU_SETSIZE, no backwards range, no CPU twice. Nothing else parses one.
CPU_SETSIZE = 1024
_CPU_ITEM = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of "0", "0,2" or "1-3,6" in the order written (ranges expanded); ValueError with a message
    a user can act on otherwise."""
    cpus: list[int] = []
    for item in text.split(","):
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
        (path / "cpuset.cpus").write_text(",".join(map(str, cpus)))
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
