"""The memory arithmetic of a stateful run on this machine: whether N connections fit the kernel's memory
before a phase 1 tries them (issue 33 item 4: sweeps as far as memory allows, the arithmetic printed before a
run that cannot fit, instead of an out-of-memory DUT halfway through).

Each connection is one entry of the kernel's conntrack slab (its slab size, read from
/sys/kernel/slab/nf_conntrack/slab_size; 256 B on this machine's kernel) and the table's hash has one 8-byte
bucket head per bucket. The tester's memory per flow does not depend on N (its flows are computed, not
stored), so it is not counted. The need is compared with the kernel's MemAvailable less a reserve
(AVAILABLE_SHARE of it: the namespaces, Knot and the tester live there too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONNTRACK_SLAB = Path("/sys/kernel/slab/nf_conntrack/slab_size")
MEMINFO = Path("/proc/meminfo")
# When the slab cannot be read (conntrack not loaded yet): the entry size of a 64-bit kernel of today, B.
FALLBACK_ENTRY_BYTES = 320
BUCKET_BYTES = 8                 # one hlist_nulls_head per hash bucket, B
AVAILABLE_SHARE = 0.8            # of MemAvailable a run may plan to take


@dataclass(frozen=True)
class MemoryBudget:
    """N connections in a table of `buckets` hash buckets against the memory available, bytes."""

    connections: int
    buckets: int
    entry_bytes: int
    entry_source: str
    available_bytes: int

    @property
    def need_bytes(self) -> int:
        return self.connections * self.entry_bytes + self.buckets * BUCKET_BYTES

    @property
    def fits(self) -> bool:
        return self.need_bytes <= AVAILABLE_SHARE * self.available_bytes

    def line(self) -> str:
        """The arithmetic in one line, units named."""
        return (f"{self.connections} connections x {self.entry_bytes} B ({self.entry_source}) + "
                f"{self.buckets} hash buckets x {BUCKET_BYTES} B = {self.need_bytes / 2**30:.2f} GiB; "
                f"{AVAILABLE_SHARE:.0%} of MemAvailable {self.available_bytes / 2**30:.2f} GiB = "
                f"{AVAILABLE_SHARE * self.available_bytes / 2**30:.2f} GiB")


def entry_bytes(slab: Path = CONNTRACK_SLAB) -> tuple[int, str]:
    """Bytes per conntrack entry and where the figure comes from."""
    try:
        return int(slab.read_text()), f"conntrack slab size, {slab}"
    except (OSError, ValueError):
        return FALLBACK_ENTRY_BYTES, "assumed: conntrack slab not readable"


def available_bytes(meminfo: Path = MEMINFO) -> int:
    """The kernel's MemAvailable, B."""
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


def budget(connections: int, buckets: int, slab: Path = CONNTRACK_SLAB,
           meminfo: Path = MEMINFO) -> MemoryBudget:
    """N connections in `buckets` against this machine's memory."""
    size, source = entry_bytes(slab)
    return MemoryBudget(connections, buckets, size, source, available_bytes(meminfo))


def memory_refusal(found: MemoryBudget) -> str | None:
    """Why N connections cannot fit here, one line with the arithmetic (None: they fit)."""
    if found.fits:
        return None
    return f"{found.connections} connections do not fit this machine's memory: {found.line()}"
