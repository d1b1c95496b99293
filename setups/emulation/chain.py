"""The chain in namespaces on this machine: the emulated implementation of xlatbench.setups.chain.Chain."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from ...procs import dead_processes
from .. import counters as counters_mod
from ..backends import linux
from ..chain import (
    LIST_RECEIVE_QUEUES,
    READ_UDP_TIMEOUTS,
    TesterPlace,
    client_interface,
    longest_udp_timeout,
    place_tester,
    receive_queue_count,
    xdp_flow_sources,
)
from ..topology import Nat44, Plat
from . import rootsysctl
from .cleanup import down
from .cpusets import set_dut_cpus
from .emulator import Emulation, EmulationConfig, attach
from .names import read_pid

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# A namespace's own conntrack entries, count (the table is shared; the count is per namespace).
CONNTRACK_COUNT = "/proc/sys/net/netfilter/nf_conntrack_count"
# A namespace's own UDP conntrack timeouts, s: unreplied (and replied once), and an assured stream.
UDP_TIMEOUTS = ("nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream")


class EmulatedChain:
    """A chain in namespaces. Use `EmulatedChain.up(config)` (a context manager that takes it down) or
    `EmulatedChain.attach(prefix)` for one another process brought up."""

    def __init__(self, emulation: Emulation) -> None:
        self.emulation = emulation
        self.topology = emulation.topology.name
        self.server_address = emulation.topology.server_address
        self.client_address = emulation.topology.client_address
        self.max_flows = emulation.topology.max_flows()
        # The conntrack table set exactly (by the config or set_conntrack_table): the tester's flows then
        # leave it as it is instead of sizing it for themselves.
        self._table_pinned = emulation.config.conntrack_max is not None or \
            emulation.config.conntrack_buckets is not None

    @classmethod
    def up(cls, config: EmulationConfig) -> EmulatedChain:
        emulation = Emulation(config)
        emulation.up()
        return cls(emulation)

    @classmethod
    def attach(cls, prefix: str = "xb") -> EmulatedChain:
        return cls(attach(prefix))

    def __enter__(self) -> EmulatedChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def down(self) -> dict[str, object]:
        return down(self.emulation.prefix)

    @property
    def prefix(self) -> str:
        return self.emulation.prefix

    def describe(self) -> dict:
        info = self.emulation.describe()
        ces = self.emulation.topology.tester_ces
        if ces:
            info["tester_as_ce"] = {
                "ces": len(ces),
                "ces_played": f"the tester played {len(ces)} CE(s), its sockets dealt round-robin over them",
                "bind": ces[0].map_address,
                "first_port": ces[0].port_ranges[0][0],
                "port_set": [list(r) for r in ces[0].port_ranges],
                "sources": [ce.map_address for ce in ces],
                "max_sockets": self.max_flows,
            }
        info["dut_cpu_times_cover"] = (
            "user-space translator processes only (see each translator's execution_model); in-kernel "
            "translation, forwarding and NAT44 run in softirq and show in /proc/stat"
        )
        return info

    def client_argv(self, argv: list[str]) -> list[str]:
        """`argv` (a tester command line, or [] for a prefix the caller appends it to) run in the client."""
        return ["ip", "netns", "exec", self.emulation.netns_of["client"], *argv]

    def tester_place(self, io: str, flows: int, first_port: int | None) -> TesterPlace:
        """Where the tester sends from in the client namespace for `io` (setups.chain.place_tester: the CEs
        it plays in `br`, else nothing for sockets, and for "xdp" the client's veth toward the chain and
        every flow's address and port). With xdp the client's interface gets every source address the flows
        use (so the first hop's ARP or ND for them is answered), and the kernel's conntrack table is sized
        for the flows (root sysctls under this chain's lease, restored by `down`)."""
        topology = self.emulation.topology
        place = place_tester(topology, io, flows, first_port)
        if io != "xdp":
            return place
        if not place.ce and place.encap is None:  # encapsulating CEs: the DUT routes their prefixes to us
            addresses, _ = xdp_flow_sources(topology, flows, first_port)
            self._own_addresses(addresses[1:])
        # A kernel without conntrack has no table to size (and its DUTs no stateful NAT44 to run).
        sized = Path(CONNTRACK_COUNT).exists() and not self._table_pinned
        table = rootsysctl.conntrack_table(flows) if sized else {}
        wanted = {**self.emulation.root_sysctls(), **table}
        rootsysctl.acquire(self.prefix, wanted, list(self.emulation.netns_of.values()))
        return place

    def _own_addresses(self, addresses: tuple[str, ...]) -> None:
        """Put `addresses` (beyond the client address) on the client's interface toward the chain."""
        if not addresses:
            return
        interface = client_interface(self.emulation.topology)
        lines = "".join(f"address replace {a}/{128 if ':' in a else 32} dev {interface}\n" for a in addresses)
        done = subprocess.run(["ip", "-n", self.emulation.netns_of["client"], "-batch", "-"], input=lines,
                              capture_output=True, text=True, check=False, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"cannot add the tester's source addresses to {interface}: "
                               f"{done.stderr.strip().splitlines()[-1:]}")

    def client_receive_queues(self) -> tuple[str, int | None]:
        """The client's veth toward the chain and its receive queues (sysfs in its namespace; None when
        unreadable)."""
        interface = client_interface(self.emulation.topology)
        done = subprocess.run(["ip", "netns", "exec", self.emulation.netns_of["client"], "sh", "-c",
                               LIST_RECEIVE_QUEUES.format(interface=interface)],
                              capture_output=True, text=True, check=False, timeout=30)
        return interface, receive_queue_count(done.stdout) if done.returncode == 0 else None

    def conntrack_entries(self) -> dict[str, int]:
        """Each DUT host's conntrack entries now (nf_conntrack_count read in its own namespace; 0 where
        nothing is tracked, e.g. stateless forwarding), count."""
        counts = {}
        for host, netns in self.emulation.netns_of.items():
            if host in ("client", "server"):
                continue
            done = subprocess.run(["ip", "netns", "exec", netns, "cat", CONNTRACK_COUNT],
                                  capture_output=True, text=True, check=False, timeout=30)
            if done.returncode == 0 and done.stdout.strip().isdigit():
                counts[host] = int(done.stdout)
        return counts

    # -- the stateful DUT's connection table (RFC 9693; scripts.stateful.emulated drives it) -----------
    def stateful_host(self) -> str:
        """The DUT host whose kernel conntrack keeps the connections: the one with a NAT44 (the `nat44`
        gateway, the MAP-T CE's `napt`), else the PLAT's host when its NAT44 is the kernel's (a stateless
        NAT64 beside nftables; a PLAT keeping a session table of its own is refused). ValueError: none."""
        topology = self.emulation.topology
        for host in topology.hosts:
            if any(isinstance(item, Nat44) for item in host.items):
                return host.name
        for host, role in topology.translators().items():
            if isinstance(role, Plat):
                backend = self.emulation.choice.deployment(role)
                if backend.state_table(role) is not None:
                    raise ValueError(f"the {backend.name} PLAT keeps its sessions in a table of its own, "
                                     "which the emulated stateful measurer does not read: use a PLAT "
                                     "backend whose NAT44 is the kernel's")
                return host
        raise ValueError(f"the {self.topology} chain has no stateful NAT: use topology nat44, plat or ce")

    def stateful_description(self) -> dict[str, object]:
        """What keeps the connections: the NAT44's backend (the kernel's netfilter, its version) and rule; for
        the PLAT its translator's backend (implementation, version) and the NAT44 beside it."""
        host = self.stateful_host()
        kernel = linux.describe()
        items = self.emulation.topology.host(host).items
        nat = next((item for item in items if isinstance(item, Nat44)), None)
        if nat is not None:
            role = "napt44" if self.emulation.topology.host(host).parent else "nat44"
            return {**kernel, **linux.nat44_description(nat), "role": role, "host": host,
                    "version": kernel["version"]}
        plat = self.emulation.topology.translators()[host]
        info = self.emulation.choice.renderer(plat).describe(plat)
        return {"implementation": f"{info.get('implementation')} PLAT + kernel NAT44",
                "translator": info.get("implementation"), "translator_version": info.get("version"),
                "nat": info.get("nat44"), "role": "plat-nat44", "host": host, "version": kernel["version"],
                "kernel": kernel}

    def xdp_flow_capacity(self, first_port: int) -> int:
        """The most AF_XDP flows the client's addresses carry with ports first_port..65535, within what the
        chain carries (a MAP-T CE's port set; the tester's own limit is scripts.xlatperf's)."""
        return self.stateful_flow_limit(first_port)[0]

    def stateful_flow_limit(self, first_port: int) -> tuple[int, str]:
        """The most distinct flows (connections) the chain takes from the tester, and why (one phrase)."""
        topology = self.emulation.topology
        sources = topology.client_sources * (65536 - first_port)
        carried = topology.max_flows()
        if carried is not None and carried < sources:
            why = ("the MAP-T CE's port set: its napt maps every flow into it" if topology.name == "ce"
                   else "the chain's NAT44 ports toward the server's one address and port")
            return carried, why
        return sources, (f"{topology.client_sources} client address(es) x ports {first_port}-65535 of the "
                         "tester's AF_XDP flows")

    def set_conntrack_table(self, max_entries: int | None, buckets: int | None) -> dict[str, object]:
        """Set the kernel's conntrack table size and hash buckets exactly (root namespace: one table serves
        every namespace) under this chain's lease, restored by `down`; returns {key: {original, now}}."""
        wanted = rootsysctl.conntrack_limits(max_entries, buckets)
        if not wanted:
            return {}
        self._table_pinned = True
        return rootsysctl.acquire(self.prefix, wanted, list(self.emulation.netns_of.values()), exact=True)

    def conntrack_table(self) -> dict[str, int]:
        """The kernel's conntrack table size and hash buckets now (root namespace), entries / buckets."""
        return {key.rsplit(".", 1)[1]: int(rootsysctl.read(key))
                for key in ("net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets")}

    def set_udp_timeouts(self, host: str, seconds: int) -> dict[str, int]:
        """Set the UDP conntrack timeouts (unreplied and stream) in `host`'s namespace, where each namespace
        has its own (gone with it); returns them as read back, s."""
        lines = "".join(f"echo {seconds} > /proc/sys/net/netfilter/{name}; "
                         for name in UDP_TIMEOUTS)
        self._in(host, ["sh", "-c", lines + "cat " + " ".join(f"/proc/sys/net/netfilter/{n}"
                                                              for n in UDP_TIMEOUTS)])
        return self.udp_timeouts(host)

    def udp_timeouts(self, host: str) -> dict[str, int]:
        """The UDP conntrack timeouts in `host`'s namespace, s."""
        out = self._in(host, ["cat", *(f"/proc/sys/net/netfilter/{n}" for n in UDP_TIMEOUTS)])
        return dict(zip(UDP_TIMEOUTS, (int(v) for v in out.split()), strict=True))

    def conntrack_count(self, host: str) -> int:
        """`host`'s own conntrack entries now (its namespace's nf_conntrack_count), count."""
        return int(self._in(host, ["cat", CONNTRACK_COUNT]))

    def conntrack_stats(self, host: str) -> dict[str, int]:
        """`host`'s conntrack statistics summed over CPUs (`conntrack -S`: early_drop counts entries evicted
        to make room in a full table, drop the packets dropped for want of one), count."""
        totals: dict[str, int] = {}
        for word in self._in(host, ["conntrack", "-S"]).split():
            name, _, value = word.partition("=")
            if value.isdigit() and name != "cpu":
                totals[name] = totals.get(name, 0) + int(value)
        return totals

    def conntrack_flush(self, host: str) -> float:
        """Delete `host`'s whole conntrack table (`conntrack -F` in its namespace) and return the wall time
        the command took, s (starting the command included: an empty table's flush measures that)."""
        started = time.perf_counter()
        self._in(host, ["conntrack", "-F"])
        return time.perf_counter() - started

    def _in(self, host: str, argv: list[str]) -> str:
        done = subprocess.run(["ip", "netns", "exec", self.emulation.netns_of[host], *argv],
                              capture_output=True, text=True, check=False, timeout=600)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RuntimeError(f"{' '.join(argv[:2])} in {host} failed: {last}")
        return done.stdout

    def set_dut_cpus(self, cpus: list[int], per_dut: dict[str, list[int]] | None = None) -> dict:
        return set_dut_cpus(self.emulation, cpus, per_dut)

    def dut_cpu_times(self) -> dict[str, float]:
        """CPU-seconds (user + system) used so far by each DUT's user-space translator processes."""
        times = {}
        for host, pids in self.emulation.translator_pids().items():
            if pids:
                times[host] = sum(_cpu_seconds(pid) for pid in pids)
        return times

    def component_pids(self) -> dict[str, int]:
        """Name -> pid of every process a trial through the chain needs (knotd, user-space translators)."""
        pids = self.emulation.component_pids()
        knotd = read_pid(self.emulation.knot.pidfile)
        if knotd is not None:
            pids["knotd (server)"] = knotd
        return pids

    def gone(self, pids: dict[str, int]) -> list[str]:
        """"name (pid N)" of each of `pids` (from component_pids) that no longer runs."""
        return dead_processes(pids)

    def counters(self) -> dict[str, dict[str, int]]:
        """Every hop's counters: interfaces, nft rules, UDP per namespace, and the translators' own."""
        return counters_mod.collect(self.emulation.netns_of) | self.emulation.translator_counters()

    def nat44_udp_timeout(self) -> tuple[float, str] | None:
        """How long conntrack keeps a replied UDP mapping in the MAP-T CE's NAT44 namespace (a namespace
        has its own values, the kernel's defaults, not the root's), s, and where it was read."""
        netns = self.emulation.netns_of.get("napt")
        if netns is None:
            return None
        done = subprocess.run(["ip", "netns", "exec", netns, "sh", "-c", READ_UDP_TIMEOUTS],
                              capture_output=True, text=True, check=False, timeout=30)
        seconds = longest_udp_timeout(done.stdout)
        return None if seconds is None else (seconds, f"the UDP conntrack timeout in namespace {netns}")


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    # utime and stime are fields 14 and 15 of stat(5), i.e. 12 and 13 after the command name.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
