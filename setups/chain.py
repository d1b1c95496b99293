"""The chain the measurement code drives (docs/ARCHITECTURE.md): the protocol both worlds implement
(xlatbench.setups.emulation.chain, xlatbench.setups.testbed.chain) and where the tester sends from in the
client host (`TesterPlace`: its interface, addresses and ports, CE or not, or the encapsulating CEs it plays
itself: `TesterEncap`), which the measurement turns into
the tester's command line (scripts.xlatperf: setups/ writes no tester option)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Protocol

from .mapt import tester_port_ranges
from .topology import Topology, tester_port_range


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
    # Optional (both worlds have it; a chain without it takes socket testers that need no placing):
    # tester_place(io, flows, first_port) -> TesterPlace, where the tester sends from for that io.
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


TESTER_IO = ("socket", "xdp")  # how the tester's queries leave: UDP sockets, or AF_XDP on an interface


@dataclass(frozen=True)
class TesterSource:
    """Consecutive addresses the tester sends from, first..last (one address: first == last), and the
    source port ranges (first, last), inclusive, each of them gives the tester's flows."""

    first: str
    last: str
    ports: tuple[tuple[int, int], ...]
    __test__ = False  # a name pytest would otherwise try to collect


@dataclass(frozen=True)
class TesterEncap:
    """The MAP-E CEs or lw4o6 subscribers an AF_XDP tester plays itself (`mape-br`, `lwaftr`): it builds IPv4
    queries inside IPv6 from CE i's MAP address (lwB4 address), i = 0 .. ces - 1, to `br`, and takes the
    encapsulated replies. mode: "map-e" or "lw4o6"; rule: the four fields IPv6 prefix, IPv4 prefix, EA-bits
    length (lw4o6: PSID length), PSID offset, comma-separated; ports_per_ce: ports each CE sends from, the
    last of its set (0: the whole set but port 0's place). The CEs are computed from their numbers, never
    listed, so any count the rule holds costs the tester the same memory."""

    mode: str
    rule: str
    ces: int
    br: str
    ports_per_ce: int = 0
    __test__ = False  # a name pytest would otherwise try to collect


@dataclass(frozen=True)
class TesterPlace:
    """Where the tester sends from in the client host of a chain (a chain's `tester_place`): the measurement
    turns it, with the trial's settings, into the tester's command line (scripts.xlatperf).

    interface: for AF_XDP, the client host's interface toward the chain (None: the kernel's sockets).
    sources: the addresses and ports the flows use (empty: the client address, ports as the tester's options
        say: ephemeral, or consecutive from its first_port).
    ce: the tester plays the MAP-T CEs of `sources` (their MAP addresses and port sets): one CE's sockets
        take consecutive ports from its set's start, several CEs' sockets are dealt round-robin over them.
    encap: for AF_XDP in an encapsulating single-DUT topology, the CEs the tester plays itself (no sources).
    """

    interface: str | None = None
    sources: tuple[TesterSource, ...] = ()
    ce: bool = False
    encap: TesterEncap | None = None
    __test__ = False  # a name pytest would otherwise try to collect


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


def xdp_flow_sources(chain: Topology, flows: int, first_port: int | None) -> tuple[tuple[str, ...], int]:
    """Where `flows` AF_XDP flows come from in the client host of `chain`: the fewest consecutive addresses
    from its client address whose ports first_port..65535 hold them (at most the chain's client_sources),
    and the ports each address gets (the flows dealt evenly, as the tester deals them round-robin).
    ValueError (one line) when that is impossible. (How many flows the tester itself can run is the
    tester's rule: scripts.xlatperf.MAX_XDP_FLOWS, checked with its options.)"""
    if first_port is None or not 0 < first_port < 65536:
        raise ValueError(f"the tester's AF_XDP flows need a first source port 1-65535, got {first_port}")
    if flows < 1:
        raise ValueError(f"the tester's AF_XDP flows must number at least 1, got {flows}")
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


def tester_encap(chain: Topology) -> TesterEncap | None:
    """The CEs (subscribers) the tester plays in an encapsulating single-DUT topology (its client host's
    TunnelEnd on side "ce"), as an AF_XDP tester plays them itself; None in any other topology."""
    tunnel = chain.host("client").tester_tunnel
    if tunnel is None or tunnel.side != "ce":
        return None
    ces = tunnel.subscribers or len(chain.tester_subscribers)  # the socket tester plays at most PLAYED_MAX
    if tunnel.bmr is not None:
        return TesterEncap("map-e", ",".join(tunnel.bmr.rule_fields()), ces, tunnel.tunnel_end)
    rule = tunnel.rule
    fields = (rule.b4_prefix, rule.ipv4_pool, str(rule.psid_len), str(rule.psid_offset))
    return TesterEncap("lw4o6", ",".join(fields), ces, tunnel.tunnel_end)


def subscriber_sources(addresses: list[str], ranges: list[tuple[int, int]],
                       sockets: int) -> tuple[TesterSource, ...]:
    """The socket tester's sources for played CEs (lwB4s) i with IPv4 `addresses[i]` and port `ranges[i]`,
    several of which share an address (their PSIDs differ): one source per address (xlatperf takes each
    once), its CEs' ranges in order. xlatperf deals socket g to source g mod S and a source's sockets to its
    ports in order, so each address's sockets are split evenly over its CEs, each taking that many ports
    from its range's start (a CE given more sockets than its range holds keeps its whole range: xlatperf
    then refuses in one line)."""
    order: dict[str, list[tuple[int, int]]] = {}
    for address, port_range in zip(addresses, ranges, strict=True):
        order.setdefault(address, []).append(port_range)
    used = list(order.items())[:max(1, min(len(order), sockets))]
    sources = []
    for index, (address, its) in enumerate(used):
        dealt = len(range(index, sockets, len(used)))
        share = [dealt // len(its) + (j < dealt % len(its)) for j in range(len(its))]
        taken = tuple((first, min(last, first + n - 1)) for (first, last), n in zip(its, share, strict=True)
                      if n > 0)
        sources.append(TesterSource(address, address, taken or its[:1]))
    return tuple(sources)


def place_tester(chain: Topology, io: str, flows: int, first_port: int | None) -> TesterPlace:
    """Where the tester sends from in the client host of `chain` for `io` ("socket" or "xdp"), with `flows`
    flows from `first_port` (the tester options' rule: None for ephemeral ports). A tester that plays MAP-T
    CEs (`br`) sends from their MAP addresses and port sets (mapt.tester_port_ranges), whatever its io; any
    other needs nothing placed for sockets; an AF_XDP tester in an encapsulating single-DUT topology plays its
    CEs itself (tester_encap); any other AF_XDP tester sends from the client address, ports first_port
    .. first_port + flows - 1, and beyond one address's ports from the next addresses too (xdp_flow_sources).
    ValueError (one line) when that is impossible or `io` is unknown."""
    if io not in TESTER_IO:
        raise ValueError(f"tester io must be 'socket' or 'xdp', got {io!r}")
    interface = client_interface(chain) if io == "xdp" else None
    encap = tester_encap(chain)
    if interface is not None and encap is not None:
        return TesterPlace(interface, encap=encap)
    if chain.tester_ces:
        ranges = tester_port_ranges(chain.tester_ces)
        sources = tuple(TesterSource(ce.map_address, ce.map_address, tuple(its))
                        for ce, its in zip(chain.tester_ces, ranges, strict=True))
        return TesterPlace(interface, sources, ce=True)
    if chain.tester_subscribers:  # a socket tester (an AF_XDP one took its encap place above)
        ranges = [tester_port_range(s) for s in chain.tester_subscribers]
        played = chain.tester_subscribers
        empty = [s for s, (first, last) in zip(played, ranges, strict=True) if first > last]
        if empty:
            ce, (first, last) = empty[0], empty[0].port_ranges[0]
            raise ValueError(f"{chain.name}: the CE of {ce.ipv4_address} PSID {ce.psid} owns only "
                             f"ports {first}-{last}, which a socket cannot bind (port 0): play more CEs or a "
                             "rule with fewer PSID bits")
        return TesterPlace(None, subscriber_sources([p.ipv4_address for p in played], ranges, flows), ce=True)
    if interface is None:
        return TesterPlace()
    addresses, ports = xdp_flow_sources(chain, flows, first_port)
    assert first_port is not None  # xdp_flow_sources refused None
    return TesterPlace(interface, (TesterSource(addresses[0], addresses[-1],
                                                ((first_port, first_port + ports - 1),)),))
