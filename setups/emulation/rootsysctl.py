"""Root-namespace sysctls the emulation needs, changed under a lease and restored by the last holder.

Child namespaces read net.core.rmem_* / wmem_* from the root namespace, and net.core.netdev_max_backlog
exists only there, so bigger socket buffers for the tester and Knot, and a deeper receive backlog for the
veths, mean changing the machine's values. Several chains (other prefixes, other
developers' tests) may be up at once: the first holder records the original values, every holder
keeps a lease file, and the last one to release restores the originals. A lease whose namespaces are
all gone (its run was killed) no longer holds anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ...procs import alive

LEASE_ROOT = Path("/run/xlatbench/sysctl")


def socket_buffers(size: int) -> dict[str, int]:
    """Root sysctls bounding every namespace's socket buffers (and the default Knot gets), bytes."""
    return {"net.core.rmem_max": size, "net.core.rmem_default": size, "net.core.wmem_max": size}


def receive_backlog(packets: int) -> dict[str, int]:
    """The root sysctl bounding each CPU's receive backlog (a veth's receiver queues there), packets."""
    return {"net.core.netdev_max_backlog": packets}


def conntrack_table(entries: int) -> dict[str, int]:
    """Root sysctls sizing the kernel's conntrack table for `entries` flows: one table serves every namespace
    (a child namespace reads its size and cannot change it), and the kernel's default (262 144 here) is
    short of a million flows. Room for twice `entries`, in a hash of a power of two >= `entries` buckets."""
    return {"net.netfilter.nf_conntrack_max": 2 * entries,
            "net.netfilter.nf_conntrack_buckets": 1 << max(0, entries - 1).bit_length()}


def conntrack_limits(max_entries: int | None, buckets: int | None) -> dict[str, int]:
    """The root sysctls setting the conntrack table to exactly `max_entries` and `buckets` (None: left)."""
    wanted = {}
    if max_entries is not None:
        wanted["net.netfilter.nf_conntrack_max"] = max_entries
    if buckets is not None:
        wanted["net.netfilter.nf_conntrack_buckets"] = buckets
    return wanted


def _path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read(key: str) -> str:
    return _path(key).read_text().strip()


def write(key: str, value: str) -> None:
    _path(key).write_text(f"{value}\n")


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _existing_netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _live_leases(root: Path) -> dict[str, dict]:
    leases = {}
    existing = _existing_netns()
    for path in sorted((root / "leases").glob("*.json")):
        try:
            lease = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        netns = lease.get("netns") or []
        pid = lease.get("pid")
        if (netns and not existing.intersection(netns)) or (pid is not None and not alive(pid)):
            path.unlink(missing_ok=True)  # its chain or process is gone: a killed run left it
            continue
        leases[path.stem] = lease
    return leases


def acquire(
    holder: str, wanted: dict[str, int], netns: list[str], root: Path = LEASE_ROOT, pid: int | None = None,
    exact: bool = False,
) -> dict[str, object]:
    """Raise each sysctl to at least `wanted` for `holder` (`exact`: set it to `wanted`, lower too: a known
    table capacity); return what was done (original, now).

    The lease lives while one of `netns` exists or, for a holder without namespaces, while `pid` runs."""
    with _locked(root):
        originals_file = root / "original.json"
        originals = json.loads(originals_file.read_text()) if originals_file.exists() else {}
        # Originals left by holders that died stay valid: the current values may be theirs.
        report: dict[str, object] = {}
        for key, value in wanted.items():
            current = read(key)
            originals.setdefault(key, current)
            if int(current) < value or (exact and int(current) != value):
                write(key, str(value))
            report[key] = {"original": originals[key], "now": read(key)}
        originals_file.write_text(json.dumps(originals, indent=1))
        (root / "leases").mkdir(exist_ok=True)
        lease_file = root / "leases" / f"{holder}.json"
        held = json.loads(lease_file.read_text()).get("wanted", {}) if lease_file.exists() else {}
        lease = {"wanted": {**held, **wanted}, "netns": netns, "pid": pid}
        lease_file.write_text(json.dumps(lease))
        return report


def release(holder: str, root: Path = LEASE_ROOT) -> dict[str, str]:
    """Drop `holder`'s lease; if no live lease remains, restore the originals. Returns what was restored."""
    if not root.exists():
        return {}
    with _locked(root):
        (root / "leases" / f"{holder}.json").unlink(missing_ok=True)
        if _live_leases(root):
            return {}
        originals_file = root / "original.json"
        if not originals_file.exists():
            return {}
        originals = json.loads(originals_file.read_text())
        for key, value in originals.items():
            write(key, value)
        originals_file.unlink()
        return originals


def held_by(holder: str, root: Path = LEASE_ROOT) -> bool:
    return (root / "leases" / f"{holder}.json").exists()


def pending_restore(root: Path = LEASE_ROOT) -> dict[str, str]:
    """Originals still waiting to be restored (empty when nothing is changed)."""
    path = root / "original.json"
    return json.loads(path.read_text()) if path.exists() else {}
