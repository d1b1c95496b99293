"""The chain the measurement code drives (docs/ARCHITECTURE.md): the protocol both worlds implement
(xlatbench.setups.emulation.chain, xlatbench.setups.testbed.chain), the tester binding for MAP-T CEs and the
placement of the tester's AF_XDP flows in the client host."""

from __future__ import annotations

import ipaddress
from typing import Protocol

from .mapt import MapCe, tester_port_ranges
from .topology import Topology


class Chain(Protocol):
    topology: str  # "baseline" | "464xlat" | "mapt" | single-DUT "plat" | "clat" | "ce" | "br"
    server_address: str  # "203.0.113.56"
    client_address: str  # "192.168.0.4"
    max_flows: int | None  # distinct tester flows the chain carries (MAP-T port set); None: no limit

    def describe(self) -> dict: ...
    def client_argv(self, argv: list[str]) -> list[str]: ...
    def set_dut_cpus(self, cpus: list[int], per_dut: dict[str, list[int]] | None = None) -> dict: ...
    def dut_cpu_times(self) -> dict[str, float]: ...
    def component_pids(self) -> dict[str, int]: ...
    def gone(self, pids: dict[str, int]) -> list[str]: ...
    def counters(self) -> dict[str, dict[str, int]]: ...
    # Optional (both worlds have it): nat44_udp_timeout() -> (seconds, where) | None, how long conntrack
    # keeps a replied UDP mapping in the MAP-T CE's NAT44 namespace (None: no CE NAT44, or unreadable).
    # Optional (emulation): tester_binding(io, flows, first_port) -> tuple[str, ...], the tester options that
    # place its flows in the client host for that io ("socket": none; "xdp": xdp_tester_binding).
    # Optional (emulation): conntrack_entries() -> {dut host: count}, each DUT's conntrack entries now.
    # Optional (both worlds have it): client_receive_queues() -> (interface, queues | None), the client's
    # interface toward the chain and its receive queues (None: unreadable), checked before an AF_XDP tester
    # measures (xdp_queue_problem).


# Read in the NAT44's namespace: the stream (replied) and the plain UDP conntrack timeouts, s.
READ_UDP_TIMEOUTS = ("cat /proc/sys/net/netfilter/nf_conntrack_udp_timeout_stream "
                     "/proc/sys/net/netfilter/nf_conntrack_udp_timeout")


def longest_udp_timeout(output: str) -> float | None:
    """The longer of the timeouts READ_UDP_TIMEOUTS printed (a DNS flow is replied), s; None if none."""
    values = []
    for word in output.split():
        try:
            values.append(float(word))
        except ValueError:
            continue
    return max(values) if values else None


def ce_tester_args(ces: tuple[MapCe, ...]) -> list[str]:
    """xlatperf options that make it the MAP-T CEs `ces`, ports from mapt.tester_port_ranges (the MAP
    arithmetic; `max_flows` keeps the sockets inside them).

    One CE: bound to its MAP address, sockets on consecutive ports from the start of its port set (thread i
    socket j: first + i*K + j). Several: one `--source MAP-ADDRESS,FIRST-LAST...` per CE, and xlatperf deals
    socket g = i*K + j to CE g mod N, each CE's ports in order."""
    if not ces:
        return []
    ranges = tester_port_ranges(ces)
    if len(ces) == 1:
        return ["--bind", ces[0].map_address, "--first-port", str(ranges[0][0][0])]
    args = []
    for ce, its_ranges in zip(ces, ranges, strict=True):
        args += ["--source", ",".join([ce.map_address, *(f"{first}-{last}" for first, last in its_ranges)])]
    return args


def sole_interface(chain: Topology, role: str, need: str) -> str:
    """The `role` host's one interface toward the chain; a ValueError saying what `need`s exactly one."""
    interfaces = chain.host(role).interfaces
    if len(interfaces) != 1:
        raise ValueError(f"the {role} host of {chain.name} has {len(interfaces)} interfaces; "
                         f"{need} exactly one")
    return interfaces[0].name


# How a host lists an interface's receive queues: one rx-N name per line (sysfs, as xlatperf counts them).
LIST_RECEIVE_QUEUES = "ls /sys/class/net/{interface}/queues"


def receive_queue_count(listing: str) -> int | None:
    """The rx-N entries of a LIST_RECEIVE_QUEUES listing; None when it lists none (unreadable)."""
    count = sum(1 for name in listing.split() if name.startswith("rx-"))
    return count or None


def xdp_queue_problem(interface: str, queues: int | None, threads: int) -> str | None:
    """Why an AF_XDP tester with `threads` thread pairs (one socket each on queues 0..threads-1) would measure
    only part of the replies on `interface` with `queues` receive queues, in one line; None when it binds
    every queue (or the count is unknown: xlatperf then counts replies on unbound queues itself)."""
    if queues is None or queues <= threads:
        return None
    return (f"the client's interface {interface} has {queues} receive queues but the tester binds {threads} "
            f"(one per thread pair, queues 0..{threads - 1}): the replies on the others would never reach it "
            f"and count as loss: give the interface {threads} (ethtool -L {interface} combined {threads}) "
            "before the campaign")


def client_interface(chain: Topology) -> str:
    """The client host's interface toward the chain: where the tester's AF_XDP socket and reply filter go."""
    return sole_interface(chain, "client", "the tester's AF_XDP flows need")


def server_interface(chain: Topology) -> str:
    """The server host's interface toward the chain: where Knot's XDP mode listens."""
    return sole_interface(chain, "server", "Knot's XDP mode needs")


# xlatperf's flows with --io xdp: -K up to 2^24 (dnsperf/src/options.cpp); beyond one address's ports a
# chain deals them over several client addresses (xdp_flow_sources).
MAX_XDP_FLOWS = 1 << 24


def xdp_flow_sources(chain: Topology, flows: int, first_port: int | None) -> tuple[tuple[str, ...], int]:
    """Where `flows` AF_XDP flows come from in the client host of `chain`: the fewest consecutive addresses
    from its client address whose ports first_port..65535 hold them (at most the chain's client_sources),
    and the ports each address gets (the flows dealt evenly, as xlatperf deals them round-robin).
    ValueError (one line) when that is impossible."""
    if first_port is None or not 0 < first_port < 65536:
        raise ValueError(f"the tester's AF_XDP flows need a first source port 1-65535, got {first_port}")
    if not 0 < flows <= MAX_XDP_FLOWS:
        raise ValueError(f"the tester's AF_XDP flows must number 1-{MAX_XDP_FLOWS} (xlatperf --io xdp), "
                         f"got {flows}")
    per_address = 65536 - first_port
    count = -(-flows // per_address)
    if count > chain.client_sources:
        most = chain.client_sources * per_address
        raise ValueError(
            f"the tester's {flows} AF_XDP flows need {count} source addresses of {per_address} ports "
            f"({first_port}-65535), but the {chain.name} chain carries {chain.client_sources} client "
            f"address(es) from {chain.client_address}: use at most {most} flows"
            + (" or a lower first_port" if first_port > 1024 else ""))
    first = ipaddress.ip_address(chain.client_address)
    return tuple(str(first + i) for i in range(count)), -(-flows // count)


def xdp_tester_binding(chain: Topology, flows: int, first_port: int | None) -> tuple[str, ...]:
    """xlatperf options that place its AF_XDP flows (`--io xdp`) in the client host of `chain`: the interface
    toward the chain, and every flow's address and port (a flow has no socket to pick either). A tester that
    plays MAP-T CEs (`br`) takes their addresses and port sets (ce_tester_args, which the chain adds to every
    tester command line); any other sends from the client address, ports first_port .. first_port + flows - 1,
    and beyond one address's ports from the next addresses too (xdp_flow_sources: `--source FIRST-LAST,PORTS`,
    one source per address). ValueError (one line) when that is impossible."""
    binding = ("--xdp-interface", client_interface(chain))
    if chain.tester_ces:
        return binding
    addresses, ports = xdp_flow_sources(chain, flows, first_port)
    assert first_port is not None  # xdp_flow_sources refused None
    where = addresses[0] if len(addresses) == 1 else f"{addresses[0]}-{addresses[-1]}"
    return (*binding, "--source", f"{where},{first_port}-{first_port + ports - 1}")
