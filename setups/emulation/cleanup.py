"""Finding and removing everything of a prefix, whatever state a previous run left (also after kill -9).

That includes XDP programs a killed process left attached (the tester's reply filter, Knot's or kxdpgun's
redirect program): they are detached from the prefix's interfaces, in its namespaces and in the root
namespace (`<prefix>-*`), before the namespaces go.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path

from ... import xdp
from ...procs import terminate
from ...zones.knot import stop_stale
from ..topology import DUT_HOSTS
from . import rootsysctl
from .names import (
    CPUSET_ROOT,
    HOST_NAMES,
    check_prefix,
    netns_name,
    read_pid,
    rundir,
)


def existing_namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    return [netns_name(prefix, h) for h in HOST_NAMES if netns_name(prefix, h) in names]


def _netns_pids(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _ours_by_pidfile(run: Path) -> list[int]:
    """PIDs from our pid files whose command line still names our run directory (no reused PIDs)."""
    pids = []
    for pidfile in run.glob("*.pid") if run.exists() else []:
        pid = read_pid(pidfile)
        if pid is None:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if str(run).encode() in cmdline:
            pids.append(pid)
    return pids


def _end(pids: list[int], timeout_s: float = 3.0) -> None:
    terminate(pids, timeout_s)


def cpusets(prefix: str) -> list[Path]:
    return [CPUSET_ROOT / f"{prefix}-{h}" for h in DUT_HOSTS if (CPUSET_ROOT / f"{prefix}-{h}").exists()]


def root_nft_tables(prefix: str) -> list[tuple[str, str]]:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False).stdout
    tables = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and parts[2].startswith(f"{prefix}_"):
            tables.append((parts[1], parts[2]))
    return tables


def down(prefix: str) -> dict[str, object]:
    """Remove every object of `prefix`, whatever state a previous run left. Idempotent."""
    check_prefix(prefix)
    started = time.monotonic()
    run = rundir(prefix)
    removed: dict[str, object] = {}
    if (run / "knot").exists():
        stop_stale(run / "knot")
    namespaces = existing_namespaces(prefix)
    pids = sorted({p for ns in namespaces for p in _netns_pids(ns)} | set(_ours_by_pidfile(run)))
    _end(pids)
    removed["processes"] = pids
    removed["xdp_programs"] = detach_xdp(prefix, namespaces)
    removed["cpusets"] = [str(p) for p in cpusets(prefix)]
    for path in cpusets(prefix):
        _remove_cpuset(path)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    removed["namespaces"] = namespaces
    tables = root_nft_tables(prefix)
    for family, name in tables:
        subprocess.run(["nft", "delete", "table", family, name], capture_output=True, check=False)
    removed["root_nft_tables"] = [f"{f} {n}" for f, n in tables]
    removed["root_sysctls_restored"] = rootsysctl.release(prefix)
    removed["mounts"] = mounts_under(run)
    for path in reversed(removed["mounts"]):
        subprocess.run(["umount", "--lazy", path], capture_output=True, check=False)
    if run.exists():
        shutil.rmtree(run, ignore_errors=True)
    removed["down_s"] = round(time.monotonic() - started, 3)
    return removed


def root_interfaces(prefix: str) -> list[str]:
    """Interfaces of the root namespace named `<prefix>-*` (e.g. the tester's end of an XDP link)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.count(":") >= 2]
    return [name for name in names if name.startswith(f"{prefix}-")]


def detach_xdp(prefix: str, namespaces: list[str]) -> list[str]:
    """Detach every XDP program on the prefix's interfaces (all of its namespaces' and its root ones);
    "PROGRAM (id N, MODE) on IF" for each, with the namespace."""
    removed = [f"{text} in {ns}" for ns in namespaces for text in xdp.detach_all(ns)]
    own = tuple(root_interfaces(prefix))
    if own:
        removed += [f"{text} in the root namespace" for text in xdp.detach_all(None, own)]
    return removed


def mounts_under(run: Path) -> list[str]:
    """Mount points inside the run directory (a backend's bpffs for pinned programs and maps), outermost
    first. Unmounting one releases everything pinned in it."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[1] for line in lines if len(line.split()) > 1]
    return sorted({p for p in points if p.startswith(f"{run}/")}, key=len)


def _remove_cpuset(path: Path) -> None:
    """Move any task still inside back to the root cpuset, then remove the cgroup."""
    deadline = time.monotonic() + 3.0
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (CPUSET_ROOT / "cgroup.procs").write_text(pid)
            time.sleep(0.05)


def leftovers(prefix: str) -> list[str]:
    """Everything of `prefix` still on the machine (empty after a clean `down`)."""
    found = [f"namespace {ns}" for ns in existing_namespaces(prefix)]
    found += [f"cpuset {p}" for p in cpusets(prefix)]
    found += [f"nft table {f} {n}" for f, n in root_nft_tables(prefix)]
    run = rundir(prefix)
    found += [f"mount {p}" for p in mounts_under(run)]
    if run.exists():
        found.append(f"run directory {run}")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(run).encode() + b"/" in (proc / "cmdline").read_bytes():
                    found.append(f"process {proc.name}")
            except OSError:
                continue
    if rootsysctl.held_by(prefix):
        found.append(f"root sysctl lease {prefix}")
    own = root_interfaces(prefix)
    found += [f"root interface {name}" for name in own]
    found += [f"XDP program {p.text()}" for p in xdp.attached() if p.interface in own]
    return found
