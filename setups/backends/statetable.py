"""The table a stateful NAT keeps its connections in, as a testbed host sees it: the steps that set its size,
hash size and UDP timeouts for one point of an RFC 9693 sweep (each one journalled and undone like every
other setting, setups/testbed/undo.py), and the shell snippets that count its entries and delete them all,
timed on the host itself.

Two tables exist. The kernel's connection tracking (netfilter conntrack) holds the connections of every
iptables/nftables NAT44: the draft's Figure 1 gateway, the PLAT's NAT44 behind a stateless NAT64, the MAP-T
CE's NAPT44. Its size (`nf_conntrack_max`) and hash size (`nf_conntrack_buckets`, the same as
/sys/module/nf_conntrack/parameters/hashsize) are ONE pair for the whole kernel: a child network namespace
only reads a copy, so they are written in the initial namespace: the SSH session's own on a real host, or
(`nsenter --net=FILE`) the file the inventory names for it (`initial_netns`) where the session runs in
another (the suite's sshd hosts); its UDP timeouts and its entries are per namespace. A translator that
keeps a session table of its own (a stateful NAT64 in the kernel) provides its own `StateTable` through its
backend (`BackendBase.state_table`).
"""

from __future__ import annotations

import math
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..steps import Cmd, Step

CONNTRACK_MAX = "net.netfilter.nf_conntrack_max"
CONNTRACK_BUCKETS = "net.netfilter.nf_conntrack_buckets"
CONNTRACK_UDP_TIMEOUTS = ("net.netfilter.nf_conntrack_udp_timeout",
                          "net.netfilter.nf_conntrack_udp_timeout_stream")
CONNTRACK_COUNT = "/proc/sys/net/netfilter/nf_conntrack_count"


class TableError(ValueError):
    """A table setting or operation this table does not have; the message is one line naming the fix."""


@dataclass(frozen=True)
class TableSpec:
    """One point's settings (setups' mirror of scripts.stateful.measurer.TableSettings): table size, entries;
    hash buckets, count; UDP timeout, s. None: left as found."""

    max_connections: int | None = None
    hash_size: int | None = None
    timeout_s: float | None = None

    def check(self) -> None:
        for name, value in (("max_connections", self.max_connections), ("hash_size", self.hash_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise TableError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.timeout_s is not None and not (isinstance(self.timeout_s, int | float)
                                               and math.isfinite(self.timeout_s) and self.timeout_s >= 1):
            raise TableError(f"timeout_s must be a number of seconds >= 1, got {self.timeout_s!r}")


@dataclass(frozen=True)
class Flush:
    """One deletion of the whole table, timed on the host: entries before and after, seconds between the
    deletion's start and end (the host's clock, nanoseconds read before and after the command)."""

    before: int
    after: int
    seconds: float

    @property
    def removed(self) -> int:
        return self.before - self.after


def in_initial_netns(initial_netns: str | None) -> tuple[str, ...]:
    """The argv prefix running a command in the host's initial network namespace (see the docstring)."""
    return () if initial_netns is None else ("nsenter", f"--net={initial_netns}")


def in_netns(netns: str | None, script: str) -> str:
    """`script` run in namespace `netns` of the host (None: the host's own)."""
    return script if netns is None else f"ip netns exec {shlex.quote(netns)} sh -c {shlex.quote(script)}"


class StateTable(ABC):
    """A stateful NAT's connection table on a testbed host."""

    name: str = ""          # what holds the connections, in words (recorded)

    @abstractmethod
    def settings_steps(self, spec: TableSpec, netns: str | None,
                       initial_netns: str | None = None) -> list[Step]:
        """The steps that put `spec` in force (TableError, one line, for a setting the table lacks)."""

    @abstractmethod
    def applies(self) -> dict[str, str]:
        """Per setting (max_connections, hash_size, timeout_s): what it sets on this table, in words."""

    @abstractmethod
    def count_script(self, netns: str | None) -> str:
        """Prints the number of entries in the table: one integer."""

    @abstractmethod
    def settings_script(self, netns: str | None, initial_netns: str | None = None) -> str:
        """Prints the settings in force, `KEY = VALUE` or `KEY: VALUE` lines (recorded)."""

    @abstractmethod
    def flush_script(self, netns: str | None) -> str:
        """Deletes every entry, timed on the host; prints `BEFORE AFTER T0_NS T1_NS` (TableError when the
        table cannot be deleted whole)."""

    def udp_count_script(self, netns: str | None) -> str:
        """Prints the number of IPv4 UDP entries (what the tester's flows make); by default the count."""
        return self.count_script(netns)

    def stats_script(self, netns: str | None) -> str | None:
        """Prints the table's statistics as `NAME=VALUE` words (per CPU; summed by the reader); None: none."""
        return None


class ConntrackTable(StateTable):
    """The kernel's connection tracking: `nf_conntrack_max`, `nf_conntrack_buckets` (global, written in the
    initial namespace), `nf_conntrack_udp_timeout` and `..._stream` (per namespace); counted from
    `nf_conntrack_count` (per namespace), deleted with `conntrack -F` (conntrack-tools)."""

    name = "netfilter conntrack"

    def settings_steps(self, spec: TableSpec, netns: str | None,
                       initial_netns: str | None = None) -> list[Step]:
        spec.check()
        root = in_initial_netns(initial_netns)
        steps: list[Step] = []
        if spec.max_connections is not None:
            steps.append(Cmd((*root, "sysctl", "-w", f"{CONNTRACK_MAX}={spec.max_connections}")))
        if spec.hash_size is not None:
            steps.append(Cmd((*root, "sysctl", "-w", f"{CONNTRACK_BUCKETS}={spec.hash_size}")))
        if spec.timeout_s is not None:
            seconds = math.ceil(spec.timeout_s)
            for key in CONNTRACK_UDP_TIMEOUTS:
                argv = ("sysctl", "-w", f"{key}={seconds}")
                steps.append(Cmd(argv if netns is None else ("ip", "netns", "exec", netns, *argv)))
        return steps

    def applies(self) -> dict[str, str]:
        return {"max_connections": f"{CONNTRACK_MAX} (global: the whole kernel's, written in the initial "
                                   "namespace)",
                "hash_size": f"{CONNTRACK_BUCKETS} (global, = /sys/module/nf_conntrack/parameters/hashsize; "
                             "the kernel rounds it up to whole pages of buckets, 512 per 4 KiB page)",
                "timeout_s": f"{CONNTRACK_UDP_TIMEOUTS[0]} and _stream (per namespace), whole seconds, "
                             "rounded up"}

    def count_script(self, netns: str | None) -> str:
        return in_netns(netns, f"cat {CONNTRACK_COUNT}")

    def settings_script(self, netns: str | None, initial_netns: str | None = None) -> str:
        root = shlex.join((*in_initial_netns(initial_netns), "sysctl"))
        found = " ".join(f"{root} {key};" for key in (CONNTRACK_MAX, CONNTRACK_BUCKETS))
        return f"{found} {in_netns(netns, 'sysctl ' + ' '.join(CONNTRACK_UDP_TIMEOUTS))}"

    def stats_script(self, netns: str | None) -> str | None:
        # per CPU: found, invalid, insert, insert_failed, drop, early_drop (evicted from a full table) ...
        return in_netns(netns, "conntrack -S")

    def udp_count_script(self, netns: str | None) -> str:
        # conntrack prints one line per entry on stdout, its summary on stderr.
        return in_netns(netns, "conntrack -L -f ipv4 -p udp 2>/dev/null | wc -l")

    def flush_script(self, netns: str | None) -> str:
        script = (f"command -v conntrack >/dev/null || {{ echo 'conntrack (conntrack-tools) is not "
                  f"installed: apt-get install conntrack' >&2; exit 3; }}; b=$(cat {CONNTRACK_COUNT}); "
                  "t0=$(date +%s%N); e=$(conntrack -F 2>&1 >/dev/null) || { echo \"conntrack -F: $e\" >&2; "
                  f"exit 4; }}; t1=$(date +%s%N); a=$(cat {CONNTRACK_COUNT}); echo \"$b $a $t0 $t1\"")
        return in_netns(netns, script)


def parse_flush(text: str) -> Flush | None:
    """`BEFORE AFTER T0_NS T1_NS` -> Flush (None when the text is not that)."""
    fields = text.split()
    if len(fields) != 4 or not all(f.isdigit() for f in fields):
        return None
    before, after, t0, t1 = (int(f) for f in fields)
    return None if t1 < t0 else Flush(before, after, (t1 - t0) / 1e9)


def parse_count(text: str) -> int | None:
    value = text.strip()
    return int(value) if value.isdigit() else None
