"""RFC 9693 on a real testbed: which host of the inventory's topology keeps the stateful NAT's connections
(and in which namespace), the steps that set that table for one point of a sweep (journalled in the host's
state file before each change and undone by `testbed down`, shown by `testbed dry-run --table-*`), and the
DUT-side operations of the stateful measurer over SSH: count the entries, delete them all timed on the host.

The table itself (what a setting writes, how it is counted and deleted) is its backend's
(setups/backends/statetable.py): the kernel's conntrack for an iptables/nftables NAT44, or a translator's
own session table. Every reading is bounded (hostout) and an SSH failure is the transport's (ssh.py): a
lost host while a trial needs it is `HostLost` (chain.py), a reading that is not a number is one line
naming the host and the command.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from ..backends.statetable import (
    ConntrackTable,
    Flush,
    StateTable,
    TableError,
    TableSpec,
    parse_count,
    parse_flush,
)
from ..steps import Cmd, Step
from ..topology import Nat44, Plat
from .bringup import batch_script
from .hostout import parse_error
from .inventory import Inventory
from .machine import TestbedError, machine_of, machine_topology
from .ssh import Shell


@dataclass(frozen=True)
class StatefulDut:
    """Where the stateful NAT of a testbed keeps its connections.

    role: the inventory's machine (dut1, dut2); netns: the namespace on it (None: the host's own);
    table: what holds the connections; implementation: who made them, in words (recorded);
    initial_netns: the inventory's file naming the host's initial namespace (None: the session's own)."""

    role: str
    netns: str | None
    table: StateTable
    implementation: str
    initial_netns: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"host": self.role, "netns": self.netns, "table": self.table.name,
                "implementation": self.implementation, "settings": self.table.applies()}


class Reader(Protocol):
    """What reads a host during a trial (TestbedChain.read: HostLost when SSH fails)."""

    def read(self, role: str, script: str, what: str, check: bool = False) -> str: ...


def stateful_dut(inventory: Inventory) -> StatefulDut:
    """The stateful NAT of the inventory's topology: the PLAT (a translator's own session table, else the
    kernel's conntrack of its NAT44), else a NAT44 (the MAP-T CE's napt namespace). TestbedError (one line)
    for a topology without one."""
    topo = machine_topology(inventory)
    choice = inventory.backends()
    for host, role in topo.translators().items():
        if isinstance(role, Plat):
            backend = choice.deployment(role)
            own = backend.state_table(role)
            netns = host if topo.host(host).parent else None
            what = f"{backend.name} PLAT" + ("" if own else " with the kernel's NAT44 behind it")
            role_ = machine_of(topo, host)
            return StatefulDut(role_, netns, own or ConntrackTable(), what,
                               inventory.hosts[role_].initial_netns)
    for host in topo.hosts:
        if any(isinstance(item, Nat44) for item in host.items):
            netns = host.name if host.parent else None
            where = f" in namespace {netns}" if netns else ""
            role_ = machine_of(topo, host.name)
            return StatefulDut(role_, netns, ConntrackTable(), f"kernel NAT44 (iptables SNAT){where}",
                               inventory.hosts[role_].initial_netns)
    raise TestbedError(f"{inventory.path}: topology {inventory.topology_name} has no stateful NAT (no PLAT, "
                       "no NAT44): use topology 464xlat (the PLAT) or mapt (the CE's NAPT44)")


def table_steps(dut: StatefulDut, spec: TableSpec) -> list[Step]:
    """The steps putting `spec` in force on the DUT's table (TestbedError for a setting it lacks)."""
    try:
        return dut.table.settings_steps(spec, dut.netns, dut.initial_netns)
    except TableError as err:
        raise TestbedError(f"{dut.role}: {err}") from None


def read_settings(reader: Reader, dut: StatefulDut) -> dict[str, str]:
    """The table's settings as the host reports them (recorded beside what was asked)."""
    out = reader.read(dut.role, dut.table.settings_script(dut.netns, dut.initial_netns), "the table settings")
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=") if "=" in line else line.partition(":")
        if sep:
            found[key.strip()] = value.strip()
    return found


def apply_table(shell: Shell, reader: Reader, inventory: Inventory, dut: StatefulDut,
                spec: TableSpec) -> dict[str, Any]:
    """Put `spec` in force, each step journalled in the host's state file first (undo.py: `down` restores
    the value each step found); -> what was asked, what applies and what the host then reports."""
    steps = table_steps(dut, spec)
    if steps:
        shell.capture(dut.role, "sh -s", stdin=batch_script(steps, inventory.statefile(dut.role)))
    in_force = read_settings(reader, dut)
    for step in steps:
        wrong = not_in_force(step, in_force)
        if wrong:
            raise TestbedError(f"{dut.role}: {wrong}")
    return {**dut.describe(), "asked": dataclasses.asdict(spec), "in_force": in_force}


# The kernel allocates conntrack's hash in whole pages: it rounds a bucket count up by less than this (8 bytes
# per bucket; 64 KiB pages at most).
BUCKET_ROUNDING = 65536 // 8


def not_in_force(step: Step, in_force: dict[str, str]) -> str | None:
    """Why a sysctl step's value is not what the host now reports, in one line (None: it is). Debian's
    `sysctl -w` exits 0 when the kernel refuses a read-only key (conntrack's table size in a child
    namespace), so every value is read back."""
    if not isinstance(step, Cmd) or "sysctl" not in step.argv:
        return None
    key, _, asked = step.argv[-1].partition("=")
    found = in_force.get(key)
    ok = found == asked or (key.endswith("buckets") and found is not None and found.isdigit()
                            and int(asked) <= int(found) < int(asked) + BUCKET_ROUNDING)
    if ok:
        return None
    fix = (" (a child namespace only reads it: set this DUT's initial_netns, or reach the host with an sshd "
           "in its initial namespace)" if "conntrack_max" in key or "buckets" in key else "")
    return f"{key} is {found or '(unreadable)'} after setting {asked}: the kernel did not take it{fix}"


def count(reader: Reader, dut: StatefulDut, udp_only: bool = False) -> int:
    """The number of entries in the DUT's table (udp_only: its IPv4 UDP ones, what the tester's flows
    make; listed, so slower on a large table)."""
    script = dut.table.udp_count_script(dut.netns) if udp_only else dut.table.count_script(dut.netns)
    out = reader.read(dut.role, script, "the connection count", check=True)
    value = parse_count(out)
    if value is None:
        raise parse_error(dut.role, script, "one whole number (the table's entries)", out)
    return value


def flush(reader: Reader, dut: StatefulDut) -> Flush:
    """Delete the whole table, timed on the host (TestbedError, one line, where the table cannot be)."""
    try:
        script = dut.table.flush_script(dut.netns)
    except TableError as err:
        raise TestbedError(f"{dut.role}: {err}") from None
    out = reader.read(dut.role, script, "the table's deletion", check=True)
    done = parse_flush(out)
    if done is None:
        raise parse_error(dut.role, "conntrack -F (timed)", "`BEFORE AFTER T0_NS T1_NS`, whole numbers", out)
    return done


def stats(reader: Reader, dut: StatefulDut) -> dict[str, int]:
    """The table's statistics summed over the host's CPUs (conntrack: early_drop counts entries evicted to
    admit new ones in a full table, drop the packets dropped for want of one), count; {} where it has none."""
    script = dut.table.stats_script(dut.netns)
    if script is None:
        return {}
    totals: dict[str, int] = {}
    for word in reader.read(dut.role, script, "the table's statistics", check=True).split():
        name, _, value = word.partition("=")
        if value.isdigit() and name != "cpu":
            totals[name] = totals.get(name, 0) + int(value)
    return totals


def seconds_of(value: str) -> int | None:
    """`1800` or `0:30:00` (H:MM:SS, Jool's, with an optional fraction) -> whole seconds; None: neither."""
    parts = value.strip().split(".")[0].split(":")
    if not parts or not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    total = 0
    for part in parts:
        total = total * 60 + int(part)
    return total


def dry_run_steps(inventory: Inventory, spec: TableSpec) -> tuple[StatefulDut, list[Step], list[str]]:
    """What `testbed dry-run --table-*` shows: the DUT, the steps setting `spec` (each journalled first),
    and comment lines saying what each setting sets and how the table is counted and deleted."""
    dut = stateful_dut(inventory)
    steps = table_steps(dut, spec)
    where = f"namespace {dut.netns} on {dut.role}" if dut.netns else dut.role
    lines = [f"### stateful table: {dut.table.name} of the {dut.implementation} ({where}); set per point, "
             "before phase 1 (each step's undo line recorded first)"]
    lines += [f"# {key}: {text}" for key, text in dut.table.applies().items()]
    lines.append(f"# count: {dut.table.count_script(dut.netns)}")
    try:
        lines.append(f"# delete, timed: {dut.table.flush_script(dut.netns)}")
    except TableError as err:
        lines.append(f"# delete: {err}")
    return dut, steps, lines
