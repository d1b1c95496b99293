"""The testbeds as data: hosts, links, addresses, routes and translator parameters.

A host's `items` are its configuration in the order the paper lists it; a backend turns each item into
commands. Three kinds of item exist: plain network configuration (Interface, Route, Forwarding, Nat44)
that Linux does itself, and translator roles (Clat, Plat, MapCe, MapBr; the encapsulating MapeCe, MapeBr,
LwB4, LwAftr) that a chosen backend renders. A TunnelEnd is the tester's own part (it encapsulates what a
socket tester sends as the CEs it plays), not a DUT.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from .lw4o6 import Binding, Lw4o6Rule, binding, bindings
from .mapt import Bmr, MapCe, map_ce, tester_max_sockets

DUT_HOSTS = {"dut1": ("dut1", "napt"), "dut2": ("dut2",)}  # the hosts each DUT consists of (MAP-T CE: + napt)


@dataclass(frozen=True)
class Interface:
    """An interface brought up with its addresses (CIDR notation, e.g. 192.168.0.1/24)."""

    name: str
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Route:
    """A static route: destination prefix (or "default") via a next-hop address; `source` is the
    preferred source address for it (iproute2 `src`), e.g. a tester standing in for a translated address."""

    destination: str
    via: str
    source: str | None = None

    @property
    def family(self) -> int:
        return ipaddress.ip_address(self.via).version


@dataclass(frozen=True)
class Forwarding:
    """Packet forwarding switched on for IPv4 and/or IPv6 (net.ipv*.conf.all.forwarding)."""

    ipv4: bool = True
    ipv6: bool = False


@dataclass(frozen=True)
class Nat44:
    """A stateful source NAT44 (the `napt` part of a MAP-T CE, the `nat44` gateway): `source` leaving
    `out_interface` gets `to_address`, its source port mapped into `ports` (inclusive range; None keeps ports
    when free). netmap: `to_address` is a prefix as long as `source` onto which each source address maps
    one to one (host part kept, ports kept: still one conntrack entry per flow). new_per_s: new connections
    accepted per second, the rest dropped (None: no cap; a known answer for the establishment rate)."""

    source: str
    out_interface: str
    to_address: str
    ports: tuple[int, int] | None = None
    protocol: str = "udp"
    netmap: bool = False
    new_per_s: int | None = None

    def __post_init__(self) -> None:
        if self.netmap and (self.ports is not None or "/" not in self.to_address
                            or ipaddress.ip_network(self.to_address).prefixlen
                            != ipaddress.ip_network(self.source).prefixlen):
            raise ValueError(f"a netmap NAT44 maps {self.source} onto a prefix as long, ports kept: "
                             f"got {self.to_address} with ports {self.ports}")
        if self.new_per_s is not None and self.new_per_s < 1:
            raise ValueError(f"a NAT44's cap on new connections must be at least 1/s, got {self.new_per_s}")

    def public_address(self, source: str) -> str:
        """The address a query from `source` leaves with: `to_address`, or with netmap its host part kept."""
        if not self.netmap:
            return self.to_address
        pool, private = ipaddress.ip_network(self.to_address), ipaddress.ip_network(self.source)
        host = int(ipaddress.ip_address(source)) - int(private.network_address)
        return str(pool.network_address + host)

    @property
    def cap_burst(self) -> int | None:
        """The cap's token-bucket burst, packets: a tenth of a second's worth, at least nftables' default 5
        (which would drop part of a tester's batch of new flows sent at a mean rate below the cap)."""
        return None if self.new_per_s is None else max(5, round(self.new_per_s * 0.1))


@dataclass(frozen=True)
class Clat:
    """464XLAT customer-side translator (stateless SIIT): `pool6` prefix for IPv4 destinations,
    EAM entries (IPv4 address, IPv6 address) for the clients. Faces IPv4 on `ipv4_interface`."""

    pool6: str
    eam: tuple[tuple[str, str], ...]
    ipv4_interface: str
    ipv6_interface: str


# A stateful NAT44 (Linux's nf_nat) gives a flow whose source port (>= 1024) is taken another free one of
# 1024-65535: one public address carries at most this many UDP flows to one server address and port.
NAT44_PORTS = 65536 - 1024


@dataclass(frozen=True)
class Plat:
    """464XLAT provider-side translator (stateful NAT64): `pool6` prefix, `pool4` address with its UDP port
    range (inclusive). pool4_netmap: None (the paper's: every client shares `pool4`, so at most 64 512 UDP
    flows reach one server port at once), or an IPv4 /24 onto which the NAT44 maps the dynamic pool one to
    one (each IPv6 client its own public address, source ports kept): many more flows."""

    pool6: str
    pool4: str
    udp_ports: tuple[int, int]
    ipv4_interface: str
    ipv6_interface: str
    pool4_netmap: str | None = None


@dataclass(frozen=True)
class MapCeRole:
    """MAP-T CE translator: DMR prefix, the CE's end-user IPv6 prefix, its BMR; `instance` is Jool's name."""

    instance: str
    dmr: str
    end_user_prefix: str
    bmr: Bmr
    ipv4_interface: str
    ipv6_interface: str

    @property
    def ce(self) -> MapCe:
        return map_ce(self.bmr, self.end_user_prefix)


@dataclass(frozen=True)
class MapBrRole:
    """MAP-T BR translator: DMR prefix and forwarding mapping rules (FMR).

    `served_end_user_prefixes` lists the CEs of this testbed: only a translator that cannot apply an FMR
    algorithmically (tayga, one explicit mapping per CE) needs it.
    """

    instance: str
    dmr: str
    fmrs: tuple[Bmr, ...]
    served_end_user_prefixes: tuple[str, ...]
    ipv4_interface: str
    ipv6_interface: str

    def served_ces(self) -> list[MapCe]:
        return [
            map_ce(fmr, eup)
            for eup in self.served_end_user_prefixes
            for fmr in self.fmrs
            if ipaddress.IPv6Network(eup).subnet_of(ipaddress.IPv6Network(fmr.ipv6_prefix))
        ]


@dataclass(frozen=True)
class MapeCeRole:
    """MAP-E CE (RFC 7597): IPv4 from the napt's NAT44 (the CE's IPv4 address, ports in its set) goes into
    IPv6 from the CE's MAP address to `br_address` (next header 4); encapsulated replies to the MAP address
    come out as IPv4. The CE is the one its BMR assigns to `end_user_prefix`."""

    end_user_prefix: str
    bmr: Bmr
    br_address: str
    ipv4_interface: str
    ipv6_interface: str

    @property
    def ce(self) -> MapCe:
        return map_ce(self.bmr, self.end_user_prefix)


@dataclass(frozen=True)
class MapeBrRole:
    """MAP-E BR (RFC 7597): decapsulates IPv6 to `br_address` whose source is the MAP address that the inner
    IPv4 source and source port give under a rule of `fmrs` (else drops it: port outside the CE's port set,
    or wrong address), and encapsulates IPv4 to a rule's IPv4 prefix to the MAP address that the IPv4
    destination and the PSID of its destination port give. Stateless: it serves every CE of its rules."""

    br_address: str
    fmrs: tuple[Bmr, ...]
    ipv4_interface: str
    ipv6_interface: str


@dataclass(frozen=True)
class LwB4Role:
    """lw4o6 B4 (RFC 7596): subscriber `subscriber` of `rule` (setups/lw4o6.py): IPv4 from the napt's NAT44
    (its IPv4 address, ports in its set) goes into IPv6 from its lwB4 address to `aftr_address`."""

    rule: Lw4o6Rule
    subscriber: int
    aftr_address: str
    ipv4_interface: str
    ipv6_interface: str

    @property
    def binding(self) -> Binding:
        return binding(self.rule, self.subscriber)


@dataclass(frozen=True)
class LwAftrRole:
    """lwAFTR (RFC 7596): a binding table of `subscribers` entries of `rule` ((IPv4, PSID) <-> lwB4 IPv6
    address); decapsulates IPv6 to `aftr_address` whose (inner IPv4 source, PSID of its source port) is bound
    to the outer source (else drops it), encapsulates IPv4 to the bound lwB4 of (destination, PSID)."""

    aftr_address: str
    rule: Lw4o6Rule
    subscribers: int
    ipv4_interface: str
    ipv6_interface: str

    def bindings(self) -> list[Binding]:
        return list(bindings(self.rule, self.subscribers))


Translator = Clat | Plat | MapCeRole | MapBrRole | MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole
TRANSLATOR_TYPES = (Clat, Plat, MapCeRole, MapBrRole, MapeCeRole, MapeBrRole, LwB4Role, LwAftrRole)

TRANSLATOR_ROLES = {Clat: "clat", Plat: "plat", MapCeRole: "ce", MapBrRole: "br",
                    MapeCeRole: "mape-ce", MapeBrRole: "mape-br", LwB4Role: "lwb4", LwAftrRole: "lwaftr"}


@dataclass(frozen=True)
class TunnelEnd:
    """The tester's end of the tunnel in an encapsulating single-DUT topology. side "ce" (`mape-br`,
    `lwaftr`): a socket tester's sockets send IPv4 from the CEs' (subscribers') IPv4 addresses and ports,
    and this encapsulates them on the client host as those CEs would: from the MAP address that (source,
    source port) give under `bmr` (MAP-E), or from the bound lwB4 address (lw4o6: `rule`), to `tunnel_end`
    (the DUT's); it decapsulates the replies. An AF_XDP tester builds the encapsulated frames itself (its
    frames pass this end by). `subscribers`: how many CEs (lwB4s) the DUT serves, 0 .. subscribers - 1.
    side "br" (`mape-ce`, `lwb4`): on the server host, the BR's (lwAFTR's) end at `tunnel_end` in front of
    Knot's IPv4 address. Not a DUT: always the emulation's own."""

    side: str
    tunnel_end: str
    ipv4_interface: str
    ipv6_interface: str
    bmr: Bmr | None = None
    rule: Lw4o6Rule | None = None
    subscribers: int = 0

    def __post_init__(self) -> None:
        if self.side not in ("ce", "br") or (self.bmr is None) == (self.rule is None):
            raise ValueError("a tester tunnel has side ce or br and either a MAP rule or a lw4o6 rule")


Item = Interface | Route | Forwarding | Nat44 | Translator | TunnelEnd


@dataclass(frozen=True)
class Host:
    """One host of the testbed. `parent` names the host a sub-host lives in as a network namespace
    (the CE's `napt`); `items` is its configuration in the paper's order."""

    name: str
    items: tuple[Item, ...]
    parent: str | None = None

    @property
    def interfaces(self) -> list[Interface]:
        return [i for i in self.items if isinstance(i, Interface)]

    @property
    def translator(self) -> Translator | None:
        found = [i for i in self.items if isinstance(i, TRANSLATOR_TYPES)]
        return found[0] if found else None

    @property
    def tester_tunnel(self) -> TunnelEnd | None:
        found = [i for i in self.items if isinstance(i, TunnelEnd)]
        return found[0] if found else None


@dataclass(frozen=True)
class Endpoint:
    host: str
    interface: str


@dataclass(frozen=True)
class Link:
    """A point-to-point link. `internal` links join a host and its sub-host (a veth on one machine)."""

    name: str
    a: Endpoint
    b: Endpoint
    internal: bool = False


@dataclass(frozen=True)
class Topology:
    """A testbed. client_address: where the tester sends from; server_address: where it sends to;
    server_listen: where Knot listens (None: server_address; differs when a single translator sits between).
    single_dut_of: for a single-DUT topology (RFC 8219 Figure 5), the dual-DUT chain its DUT belongs to.
    tester_ces: the MAP-T CEs the tester itself plays (the `br` topology): it sends from their MAP addresses
    and from ports inside their port sets. check_links: links `setup check` captures on. client_sources:
    how many consecutive addresses from client_address the chain carries to the server and back (a tester
    with AF_XDP flows may send from all of them; 1: only client_address). tester_subscribers: the MAP-E CEs
    (MapCe) or lw4o6 subscribers (Binding) the tester plays (`mape-br`, `lwaftr`): it sends IPv4 from their
    addresses and ports inside their port sets, encapsulated toward the DUT (the client's TunnelEnd)."""

    name: str
    description: str
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    client_address: str
    server_address: str
    nat64_prefix: str | None = None
    inner_link: str = "dut1-dut2"
    notes: tuple[str, ...] = field(default=())
    server_listen: str | None = None
    single_dut_of: str | None = None
    tester_ces: tuple[MapCe, ...] = ()
    check_links: tuple[str, ...] = ("dut1-dut2",)
    client_sources: int = 1
    tester_subscribers: tuple[MapCe | Binding, ...] = ()

    @property
    def knot_address(self) -> str:
        return self.server_listen or self.server_address

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"topology {self.name} has no host {name!r}")

    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(f"topology {self.name} has no link {name!r}")

    def children(self, parent: str) -> list[Host]:
        return [h for h in self.hosts if h.parent == parent]

    def translators(self) -> dict[str, Translator]:
        """Host name -> translator role it runs."""
        return {h.name: t for h in self.hosts if (t := h.translator) is not None}

    def max_flows(self) -> int | None:
        """Distinct flows the chain can carry; None if not limited. Behind a MAP-T CE (napt NAT44): its
        port-set size. A tester playing CEs (`br`): one socket per port of the CEs' sets, dealt round-robin
        over the CEs (mapt.tester_max_sockets). Through a PLAT whose clients share one public address (the
        paper's): NAT44_PORTS, its ports toward the one server address and port."""
        roles = self.translators().values()
        sizes = [t.ce.port_count for t in roles if isinstance(t, MapCeRole | MapeCeRole)]
        sizes += [t.binding.port_count for t in self.translators().values() if isinstance(t, LwB4Role)]
        sizes += [NAT44_PORTS for t in self.translators().values()
                  if isinstance(t, Plat) and t.pool4_netmap is None]
        if self.tester_ces:
            sizes.append(tester_max_sockets(self.tester_ces))
        if self.tester_subscribers:
            sizes.append(len(self.tester_subscribers) * min(s.port_count for s in self.tester_subscribers))
        return min(sizes) if sizes else None


def tunnel_address(subscriber: MapCe | Binding) -> str:
    """The IPv6 address a MAP-E CE (its MAP address) or a lwB4 (its bound address) tunnels from."""
    return subscriber.map_address if isinstance(subscriber, MapCe) else subscriber.b4_address


def tester_port_range(subscriber: MapCe | Binding) -> tuple[int, int]:
    """The ports a socket tester playing a MAP-E CE or lwB4 sends from: the first range of its port set,
    without the system ports 0-1023 when the range reaches above them (port 0 cannot be bound at all)."""
    first, last = subscriber.port_ranges[0]
    return (max(first, 1024), last) if last >= 1024 else (max(first, 1), last)


def embed_ipv4(prefix: str, address: str) -> str:
    """RFC 6052 IPv4-embedded IPv6 address for a /96 prefix (the only length the testbeds use)."""
    net = ipaddress.IPv6Network(prefix)
    if net.prefixlen != 96:
        raise ValueError(f"only /96 translation prefixes are supported, got {prefix}")
    return str(ipaddress.IPv6Address(int(net.network_address) | int(ipaddress.IPv4Address(address))))


def extract_ipv4(address: str) -> str:
    """The IPv4 address in the last 32 bits of an RFC 6052 /96 address."""
    return str(ipaddress.IPv4Address(int(ipaddress.IPv6Address(address)) & 0xFFFFFFFF))
