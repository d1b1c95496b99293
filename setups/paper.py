"""The three testbeds of Lencse & Nagy (Int J Commun Syst 2022, section 3) as data.

Addresses, routes and translator parameters are the paper's. Interface names are the paper's too
(enp5s0f0 faces the client side, enp5s0f1 the server side; to_napt/to_global join the CE's two halves).
What the paper leaves open is marked as our choice.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import replace

from .lw4o6 import LWAFTR_ADDRESS, Binding, Lw4o6Rule, bindings, rule_for
from .mapt import Bmr, MapCe, ce_at, derive_ces, flows_fit, indexed_ces, rule_capacity
from .topology import (
    Clat,
    Endpoint,
    Forwarding,
    Host,
    Interface,
    Link,
    LwAftrRole,
    LwB4Role,
    MapBrRole,
    MapCeRole,
    MapeBrRole,
    MapeCeRole,
    Nat44,
    Plat,
    Route,
    Topology,
    TunnelEnd,
    embed_ipv4,
)

WELL_KNOWN_PREFIX = "64:ff9b::/96"


def is_well_known(prefix: str | None) -> bool:
    """Whether `prefix` lies inside RFC 6052's well-known prefix (the paper's)."""
    well_known = ipaddress.IPv6Network(WELL_KNOWN_PREFIX)
    return prefix is not None and ipaddress.IPv6Network(prefix).subnet_of(well_known)

CLIENT = "192.168.0.4"
CLIENT_NET = "192.168.0.0/24"
CLIENT_GATEWAY = "192.168.0.1"
SERVER = "203.0.113.56"
SERVER_NET = "203.0.113.0/24"
SERVER_GATEWAY = "203.0.113.2"
# Consecutive client addresses from CLIENT (192.168.0.4-254) that the baseline carries: flows from
# several sources (AF_XDP flows beyond one address's 65 535 ports).
CLIENT_SOURCES = 254 - 4 + 1
# Our choice: the paper does not print the baseline's DUT1-DUT2 addresses (its Figure 6); TEST-NET-2.
BASELINE_INNER = ("198.51.100.1", "198.51.100.2")

MAPT_BMR = Bmr("2001:db8:ce::/51", "192.0.2.0/24", ea_bits_len=13, psid_offset=0)
MAPT_END_USER_PREFIX = "2001:db8:ce:11b::/64"
MAPT_CE_INNER, MAPT_BR_INNER = "2001:db8:6::11b", "2001:db8:6::1"  # the CE-BR link (paper, Figure 12)
# The paper's dns64perf++ settings: 16 sender threads with 100 source ports each.
PAPER_THREADS, PAPER_PORTS_PER_THREAD = 16, 100


def _client() -> Host:
    return Host(
        "client",
        (
            Interface("enp5s0f0", (f"{CLIENT}/24",)),
            Route(SERVER_NET, CLIENT_GATEWAY),
        ),
    )


def _server(*extra_routes: Route) -> Host:
    return Host(
        "server",
        (
            Interface("enp5s0f0", (f"{SERVER}/24",)),
            Route(CLIENT_NET, SERVER_GATEWAY),
            *extra_routes,
        ),
    )


def _chain_links(first_hop: Endpoint) -> tuple[Link, ...]:
    return (
        Link("client-dut1", Endpoint("client", "enp5s0f0"), first_hop),
        Link("dut1-dut2", Endpoint("dut1", "enp5s0f1"), Endpoint("dut2", "enp5s0f0")),
        Link("dut2-server", Endpoint("dut2", "enp5s0f1"), Endpoint("server", "enp5s0f0")),
    )


def baseline(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """IPv4 forwarding on both DUTs (the paper's Figure 6); `nat64_prefix` is unused."""
    dut1_inner, dut2_inner = BASELINE_INNER
    dut1 = Host(
        "dut1",
        (
            Interface("enp5s0f0", (f"{CLIENT_GATEWAY}/24",)),
            Interface("enp5s0f1", (f"{dut1_inner}/24",)),
            Forwarding(ipv4=True),
            Route(SERVER_NET, dut2_inner),
        ),
    )
    dut2 = Host(
        "dut2",
        (
            Interface("enp5s0f0", (f"{dut2_inner}/24",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            Forwarding(ipv4=True),
            Route(CLIENT_NET, dut1_inner),
        ),
    )
    return Topology(
        name="baseline",
        description="IPv4 client -> DUT1 (IPv4 forwarding) -> DUT2 (IPv4 forwarding) -> IPv4 server",
        hosts=(_client(), dut1, dut2, _server()),
        links=_chain_links(Endpoint("dut1", "enp5s0f0")),
        client_address=CLIENT,
        server_address=SERVER,
        client_sources=CLIENT_SOURCES,
        notes=(
            "DUT1-DUT2 addresses 198.51.100.1/24 and 198.51.100.2/24 are our choice "
            "(the paper shows them only in its Figure 6)",
        ),
    )


def xlat464(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """464XLAT: CLAT (stateless SIIT with an EAM) on DUT1, PLAT (stateful NAT64) on DUT2 (Figure 7)."""
    clat = Host(
        "dut1",
        (
            Interface("enp5s0f0", (f"{CLIENT_GATEWAY}/24",)),
            Interface("enp5s0f1", ("2001:db8:100::1/64",)),
            Forwarding(ipv4=True, ipv6=True),
            Clat(
                pool6=nat64_prefix,
                eam=((CLIENT, "2001:db8:2::4"),),
                ipv4_interface="enp5s0f0",
                ipv6_interface="enp5s0f1",
            ),
            Route(nat64_prefix, "2001:db8:100::2"),
        ),
    )
    plat = Host(
        "dut2",
        (
            Interface("enp5s0f0", ("2001:db8:100::2/64",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            Forwarding(ipv4=True, ipv6=True),
            Plat(
                pool6=nat64_prefix,
                pool4=SERVER_GATEWAY,
                udp_ports=(0, 65535),
                ipv4_interface="enp5s0f1",
                ipv6_interface="enp5s0f0",
            ),
            Route("2001:db8:2::/64", "2001:db8:100::1"),
        ),
    )
    return Topology(
        name="464xlat",
        description="IPv4 client -> CLAT (SIIT, EAM) -> IPv6 -> PLAT (stateful NAT64) -> IPv4 server",
        hosts=(_client(), clat, plat, _server()),
        links=_chain_links(Endpoint("dut1", "enp5s0f0")),
        client_address=CLIENT,
        server_address=SERVER,
        nat64_prefix=nat64_prefix,
    )


def _napt(ce: MapCe | Binding) -> Host:
    """The CE's (lwB4's) `napt` namespace under dut1: the client's gateway, NAT44 of the client network into
    the CE's IPv4 address and its one contiguous port range (ValueError otherwise)."""
    if len(ce.port_ranges) != 1:
        raise ValueError("the napt's iptables SNAT takes one contiguous port range: use PSID offset 0")
    return Host(
        "napt",
        (
            Interface("enp5s0f0", (f"{CLIENT_GATEWAY}/24",)),
            Interface("to_global", ("10.0.0.2/24",)),
            Route("default", "10.0.0.1"),
            Forwarding(ipv4=True),
            Nat44(source=CLIENT_NET, out_interface="to_global", to_address=ce.ipv4_address,
                  ports=ce.port_ranges[0]),
        ),
        parent="dut1",
    )


def _mapt_ce(nat64_prefix: str) -> tuple[MapCeRole, Host, Host]:
    """The paper's CE: its role, the `napt` namespace (NAT44 into the port set) and the CE host `dut1`."""
    ce_role = MapCeRole(
        instance="CE 11b",
        dmr=nat64_prefix,
        end_user_prefix=MAPT_END_USER_PREFIX,
        bmr=MAPT_BMR,
        ipv4_interface="to_napt",
        ipv6_interface="enp5s0f1",
    )
    ce = ce_role.ce
    napt = _napt(ce)
    dut1 = Host(
        "dut1",
        (
            Interface("to_napt", ("10.0.0.1/24",)),
            Interface("enp5s0f1", (f"{MAPT_CE_INNER}/64",)),
            Route(nat64_prefix, MAPT_BR_INNER),
            Route(f"{ce.ipv4_address}/32", "10.0.0.2"),
            Forwarding(ipv4=True, ipv6=True),
            ce_role,
        ),
    )
    return ce_role, napt, dut1


def _mapt_br(nat64_prefix: str, host: str, ces: list[MapCe], inner_interface: str) -> Host:
    """The BR: routes to each CE's end-user prefix over the CE-BR link, the paper's BMR as its FMR."""
    return Host(
        host,
        (
            Interface(inner_interface, (f"{MAPT_BR_INNER}/64",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            *(Route(ce.end_user_prefix, MAPT_CE_INNER) for ce in ces),
            Forwarding(ipv4=True, ipv6=True),
            MapBrRole(
                instance="BR",
                dmr=nat64_prefix,
                fmrs=(MAPT_BMR,),
                served_end_user_prefixes=tuple(ce.end_user_prefix for ce in ces),
                ipv4_interface="enp5s0f1",
                ipv6_interface=inner_interface,
            ),
        ),
    )


def _ce_note(ce: MapCe) -> str:
    first, last = ce.port_ranges[0]
    return (
        f"CE {ce.end_user_prefix}: EA bits {ce.ea_bits_binary()}, IPv4 {ce.ipv4_address}, "
        f"PSID {ce.psid}, ports {first}-{last}, MAP address {ce.map_address}"
    )


def mapt(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """MAP-T: CE = `napt` namespace (NAT44 into the port set) + MAP-T CE on DUT1; BR on DUT2 (Figs 12, 13)."""
    ce_role, napt, dut1 = _mapt_ce(nat64_prefix)
    ce = ce_role.ce
    links = (
        Link("client-dut1", Endpoint("client", "enp5s0f0"), Endpoint("napt", "enp5s0f0")),
        Link("dut1-napt", Endpoint("dut1", "to_napt"), Endpoint("napt", "to_global"), internal=True),
        Link("dut1-dut2", Endpoint("dut1", "enp5s0f1"), Endpoint("dut2", "enp5s0f0")),
        Link("dut2-server", Endpoint("dut2", "enp5s0f1"), Endpoint("server", "enp5s0f0")),
    )
    return Topology(
        name="mapt",
        description="IPv4 client -> CE (napt NAT44 + MAP-T CE) -> IPv6 -> BR (MAP-T BR) -> IPv4 server",
        hosts=(
            _client(),
            napt,
            dut1,
            _mapt_br(nat64_prefix, "dut2", [ce], "enp5s0f0"),
            _server(Route(MAPT_BMR.ipv4_prefix, SERVER_GATEWAY)),
        ),
        links=links,
        client_address=CLIENT,
        server_address=SERVER,
        nat64_prefix=nat64_prefix,
        notes=(_ce_note(ce), "the paper's tester: " + flows_fit(ce, PAPER_THREADS, PAPER_PORTS_PER_THREAD)),
    )


# -- single-DUT topologies (RFC 8219 Figure 5; issue 11) ---------------------------------------------
# One translator between the tester and Knot. Because the traffic is DNS end to end, the tester can stand
# on the IPv6 side as a translated address and Knot can listen on an IPv6 address: the DUT is named dut1
# whatever its role, and each topology names the dual-DUT chain its DUT belongs to.

CLAT_TRANSLATED = "2001:db8:2::4"  # the CLAT's EAM address of the client (paper, 464XLAT)
CLAT_INNER, PLAT_INNER = "2001:db8:100::1", "2001:db8:100::2"  # the CLAT-PLAT link (paper)
# The PLAT routes 2001:db8:2::/64 back to the client; its dynamic pool has 254 IPv4 addresses, one per
# IPv6 client: the tester may send from 2001:db8:2::4 and the next PLAT_CLIENT_SOURCES - 1 addresses.
PLAT_CLIENT_SOURCES = 250
# Our choice (RFC 2544's benchmarking range): with `plat_netmap` the PLAT's NAT44 maps its dynamic pool one
# to one onto this /24, routed back by the server via the PLAT, instead of sharing the paper's 203.0.113.2.
PLAT_NETMAP = "198.18.0.0/24"


def _single_links(first_hop: Endpoint) -> tuple[Link, ...]:
    return (
        Link("client-dut1", Endpoint("client", "enp5s0f0"), first_hop),
        Link("dut1-server", Endpoint("dut1", "enp5s0f1"), Endpoint("server", "enp5s0f0")),
    )


def _single(name: str, description: str, of: str | None, hosts: tuple[Host, ...],
            **fields: object) -> Topology:
    first_hop = (
        Endpoint("napt", "enp5s0f0") if any(h.name == "napt" for h in hosts) else Endpoint("dut1", "enp5s0f0")
    )
    links = _single_links(first_hop)
    if first_hop.host == "napt":
        internal = Link(
            "dut1-napt", Endpoint("dut1", "to_napt"), Endpoint("napt", "to_global"), internal=True
        )
        links = (links[0], internal, links[1])
    return Topology(
        name=name,
        description=description,
        hosts=hosts,
        links=links,
        inner_link="dut1-server",
        single_dut_of=of,
        check_links=("client-dut1", "dut1-server"),
        **fields,  # type: ignore[arg-type]
    )


def _ipv6_server(address: str, gateway: str, *routes: Route) -> Host:
    """Knot on the IPv6 side: its link address and the IPv4-embedded address it listens on."""
    return Host("server", (Interface("enp5s0f0", (f"{address}/64", f"{gateway}/128")), *routes))


def plat(nat64_prefix: str = WELL_KNOWN_PREFIX, netmap: bool = False) -> Topology:
    """The tester as the CLAT's translated address -> PLAT (stateful NAT64) -> IPv4 Knot. netmap: the PLAT's
    NAT44 gives each IPv6 client its own address of PLAT_NETMAP (ports kept) instead of the paper's single
    203.0.113.2, which carries at most 64 512 UDP flows to the one server port; the server routes the /24
    back via the PLAT."""
    client = Host(
        "client",
        (
            Interface("enp5s0f0", (f"{CLAT_INNER}/64", f"{CLAT_TRANSLATED}/128")),
            Route(nat64_prefix, PLAT_INNER, source=CLAT_TRANSLATED),
        ),
    )
    dut = replace(xlat464(nat64_prefix).host("dut2"), name="dut1")
    server = _server_plain()
    notes: tuple[str, ...] = ()
    if netmap:
        dut = replace(dut, items=tuple(replace(item, pool4_netmap=PLAT_NETMAP) if isinstance(item, Plat)
                                       else item for item in dut.items))
        server = _server_plain(Route(PLAT_NETMAP, SERVER_GATEWAY))
        notes = (f"plat_netmap (our choice): the NAT44 maps the PLAT's dynamic pool one to one onto "
                 f"{PLAT_NETMAP} (one public address per IPv6 client, ports kept), not the paper's single "
                 f"{SERVER_GATEWAY}; the server routes {PLAT_NETMAP} via {SERVER_GATEWAY}",)
    return _single(
        "plat",
        "IPv6 tester as the CLAT's address 2001:db8:2::4 -> PLAT (stateful NAT64) -> IPv4 server",
        "464xlat",
        (client, dut, server),
        client_address=CLAT_TRANSLATED,
        server_address=embed_ipv4(nat64_prefix, SERVER),
        server_listen=SERVER,
        nat64_prefix=nat64_prefix,
        client_sources=PLAT_CLIENT_SOURCES,
        notes=notes,
    )


def clat(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """IPv4 tester -> CLAT (SIIT, EAM) -> IPv6 Knot on the PLAT's IPv4-embedded address of the server."""
    knot6 = embed_ipv4(nat64_prefix, SERVER)
    return _single(
        "clat",
        "IPv4 client -> CLAT (SIIT, EAM) -> IPv6 server listening on 64:ff9b::203.0.113.56",
        "464xlat",
        (
            _client(),
            xlat464(nat64_prefix).host("dut1"),
            _ipv6_server(PLAT_INNER, knot6, Route("2001:db8:2::/64", CLAT_INNER)),
        ),
        client_address=CLIENT,
        server_address=SERVER,
        server_listen=knot6,
        nat64_prefix=nat64_prefix,
    )


def ce(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """IPv4 tester -> CE (napt NAT44 + MAP-T CE) -> IPv6 Knot answering the CE's MAP address."""
    ce_role, napt, dut1 = _mapt_ce(nat64_prefix)
    knot6 = embed_ipv4(nat64_prefix, SERVER)
    the_ce = ce_role.ce
    return _single(
        "ce",
        "IPv4 client -> CE (napt NAT44 + MAP-T CE) -> IPv6 server listening on 64:ff9b::203.0.113.56",
        "mapt",
        (
            _client(),
            napt,
            dut1,
            _ipv6_server(MAPT_BR_INNER, knot6, Route(MAPT_END_USER_PREFIX, MAPT_CE_INNER)),
        ),
        client_address=CLIENT,
        server_address=SERVER,
        server_listen=knot6,
        nat64_prefix=nat64_prefix,
        notes=(_ce_note(the_ce), f"max flows {the_ce.port_count}: the napt maps each into the CE's port set"),
    )


def br(nat64_prefix: str = WELL_KNOWN_PREFIX, ces: int = 1) -> Topology:
    """The tester as `ces` MAP-T CEs (MAP addresses, ports in their sets) -> BR -> IPv4 Knot."""
    served = derive_ces(MAPT_BMR, MAPT_END_USER_PREFIX, ces)
    first = served[0]
    client = Host(
        "client",
        (
            Interface("enp5s0f0", (f"{MAPT_CE_INNER}/64", *(f"{c.map_address}/128" for c in served))),
            Route(nat64_prefix, MAPT_BR_INNER, source=first.map_address),
        ),
    )
    notes = [_ce_note(c) for c in served[:4]] + ([f"... {ces - 4} more CEs"] if ces > 4 else [])
    notes.append(
        f"max flows {first.port_count} per CE ({ces} CE(s): {ces * first.port_count}); the tester sends "
        "from the CE's MAP address, one port of its set per socket"
    )
    notes.append(
        f"CEs derived from the BMR {' '.join(MAPT_BMR.rule_fields())}: same PSID, one IPv4 address each "
        "(a BR that maps whole addresses needs one EAM per CE; a BR that applies the rule serves any CE)"
    )
    return _single(
        "br",
        f"IPv6 tester as {ces} MAP-T CE(s) -> BR (MAP-T BR) -> IPv4 server",
        "mapt",
        (
            client,
            _mapt_br(nat64_prefix, "dut1", served, "enp5s0f0"),
            _server_plain(Route(MAPT_BMR.ipv4_prefix, SERVER_GATEWAY)),
        ),
        client_address=first.map_address,
        server_address=embed_ipv4(nat64_prefix, SERVER),
        server_listen=SERVER,
        nat64_prefix=nat64_prefix,
        tester_ces=tuple(served),
        notes=tuple(notes),
    )


# -- the stateful NAT44 gateway (draft-lencse-v6ops-transition-scalability Figure 1; issue 33) ----------
# Our choices (the draft prints no addresses): the tester's private side is 10.0.0.0/16 (RFC 1918), so that
# its AF_XDP flows may come from up to 65 533 addresses (10.0.0.2-10.0.255.254) x 64 512 ports (1024-65535);
# the NAT44 maps that /16 one to one onto 198.18.0.0/16 (RFC 2544's benchmarking range), ports kept, so
# every flow gets a mapping of its own (a pool of 65 536 public addresses x 64 512 ports = 4 227 858 432
# mappings toward the one server port, far beyond the tester's 2^24 flows); the server routes the pool back.
NAT44_PRIVATE_NET = "10.0.0.0/16"
NAT44_CLIENT, NAT44_GATEWAY = "10.0.0.2", "10.0.0.1"
NAT44_CLIENT_SOURCES = 65533
NAT44_POOL = "198.18.0.0/16"


def nat44(nat64_prefix: str = WELL_KNOWN_PREFIX, new_per_s: int | None = None) -> Topology:
    """IPv4 tester (private side) -> stateful NAT44 gateway (netfilter, iptables NETMAP onto NAT44_POOL) ->
    IPv4 Knot: the scalability draft's Figure 1. `nat64_prefix` is unused. new_per_s: an nftables cap on the
    gateway's new connections, per second (a known answer for the establishment rate)."""
    client = Host("client", (Interface("enp5s0f0", (f"{NAT44_CLIENT}/16",)),
                             Route(SERVER_NET, NAT44_GATEWAY)))
    dut = Host(
        "dut1",
        (
            Interface("enp5s0f0", (f"{NAT44_GATEWAY}/16",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            Forwarding(ipv4=True),
            Nat44(source=NAT44_PRIVATE_NET, out_interface="enp5s0f1", to_address=NAT44_POOL, netmap=True,
                  new_per_s=new_per_s),
        ),
    )
    nat = next(item for item in dut.items if isinstance(item, Nat44))
    cap = () if new_per_s is None else (f"new connections capped at {new_per_s}/s (nftables limit, burst "
                                        f"{nat.cap_burst} packets), the rest dropped",)
    return _single(
        "nat44",
        "IPv4 tester (10.0.0.0/16) -> stateful NAT44 (onto 198.18.0.0/16) -> IPv4 server",
        None,  # the draft's gateway, no DUT of the paper's chains
        (client, dut, _server_plain(Route(NAT44_POOL, SERVER_GATEWAY))),
        client_address=NAT44_CLIENT,
        server_address=SERVER,
        client_sources=NAT44_CLIENT_SOURCES,
        notes=(f"our choice: tester sources {NAT44_PRIVATE_NET} from {NAT44_CLIENT} ({NAT44_CLIENT_SOURCES} "
               f"addresses x ports 1024-65535), NAT44 pool {NAT44_POOL} one address per source, ports kept "
               "(4 227 858 432 mappings toward the server port)", *cap),
    )


def _server_plain(*routes: Route) -> Host:
    """Knot on the IPv4 side of a single translator: the paper's server address, no route to the client."""
    return Host("server", (Interface("enp5s0f0", (f"{SERVER}/24",)), *routes))


# -- the encapsulating IPv4aaS technologies (issue 34): MAP-E (RFC 7597) and lw4o6 (RFC 7596) ----------
# The MAP rule is MAP-T's (the reference document 004's Section V: 2001:db8:ce::/51, 192.0.2.0/24, EA-bits
# 13, PSID offset 0); the dual-DUT CE is the paper's CE 0x11b (192.0.2.8, PSID 27, ports 55296-57343) and the
# lwB4 the subscriber with the same IPv4 address and PSID. The BR's (lwAFTR's) tunnel address 2001:db8:6::1 is
# routed into its decapsulator, not an interface address: its host's address on the CE-BR link is
# 2001:db8:6::2 (our choice), and the CEs route 2001:db8:6::1/128 via it.

MAPE_BMR = MAPT_BMR
BR_ADDRESS = LWAFTR_ADDRESS  # 2001:db8:6::1, the MAP-E BR's and the lwAFTR's tunnel end point
BR_LINK = "2001:db8:6::2"  # our choice
MAPE_CE_EA = 0x11B  # the paper's CE, CE number 283 of the rule
LW4O6_SUBSCRIBER = 0x11B  # subscriber 283: 192.0.2.8 PSID 27, lwB4 2001:db8:b4::11c
LW4O6_SUBSCRIBERS = 1024  # the dual-DUT lwAFTR's binding table (our choice: subscribers 0 .. 1023)
B4_LINK = "2001:db8:6::b4"  # the lwB4's address on its link to the lwAFTR (our choice)


def _encap_ce(role: MapeCeRole | LwB4Role, subscriber: MapCe | Binding, link: str) -> tuple[Host, Host]:
    """A CE (lwB4): the `napt` namespace (NAT44 into the port set) and the host `dut1` with the tunnel end."""
    napt = _napt(subscriber)
    dut1 = Host(
        "dut1",
        (
            Interface("to_napt", ("10.0.0.1/24",)),
            Interface("enp5s0f1", (f"{link}/64",)),
            Route(f"{BR_ADDRESS}/128", BR_LINK),
            Route(f"{subscriber.ipv4_address}/32", "10.0.0.2"),
            Forwarding(ipv4=True, ipv6=True),
            role,
        ),
    )
    return napt, dut1


def _mape_ce() -> tuple[MapeCeRole, Host, Host]:
    role = MapeCeRole(end_user_prefix=ce_at(MAPE_BMR, MAPE_CE_EA).end_user_prefix,
                      bmr=MAPE_BMR, br_address=BR_ADDRESS, ipv4_interface="to_napt",
                      ipv6_interface="enp5s0f1")
    return (role, *_encap_ce(role, role.ce, MAPT_CE_INNER))


def _lwb4() -> tuple[LwB4Role, Host, Host]:
    role = LwB4Role(rule=Lw4o6Rule(), subscriber=LW4O6_SUBSCRIBER, aftr_address=BR_ADDRESS,
                    ipv4_interface="to_napt", ipv6_interface="enp5s0f1")
    return (role, *_encap_ce(role, role.binding, B4_LINK))


def _encap_br(host: str, role: MapeBrRole | LwAftrRole, back: tuple[Route, ...]) -> Host:
    """The BR (lwAFTR): its link address, the routes back to the CEs' (lwB4s') IPv6 addresses."""
    return Host(
        host,
        (
            Interface("enp5s0f0", (f"{BR_LINK}/64",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            *back,
            Forwarding(ipv4=True, ipv6=True),
            role,
        ),
    )


def _mape_br_role(bmr: Bmr = MAPE_BMR) -> MapeBrRole:
    return MapeBrRole(br_address=BR_ADDRESS, fmrs=(bmr,), ipv4_interface="enp5s0f1",
                      ipv6_interface="enp5s0f0")


def mape_rule(ea_bits: int | None = None) -> Bmr:
    """The MAP-E rule with `ea_bits` EA bits (None: the reference document's 13): the rule IPv4 prefix stays
    192.0.2.0/24 (8 bits of IPv4 suffix, ea_bits - 8 of PSID), the rule IPv6 prefix 2001:db8:ce::/51 is
    shortened (its leading bits kept) where /51 + EA bits would pass /64. ValueError in one line when the EA
    bits do not fit (fewer than the IPv4 suffix, a PSID beyond 16 bits)."""
    if ea_bits is None:
        return MAPE_BMR
    rule6 = ipaddress.IPv6Network(MAPE_BMR.ipv6_prefix)
    length = max(0, min(rule6.prefixlen, 64 - ea_bits))
    try:
        return Bmr(str(rule6.supernet(new_prefix=length)), MAPE_BMR.ipv4_prefix, ea_bits_len=ea_bits)
    except ValueError as error:
        raise ValueError(f"--ea-bits {ea_bits} does not fit the MAP rule (IPv4 {MAPE_BMR.ipv4_prefix}, "
                         f"IPv6 {rule6.supernet(new_prefix=length)}): {error}") from None


def _lwaftr_role(subscribers: int) -> LwAftrRole:
    return LwAftrRole(aftr_address=BR_ADDRESS, rule=rule_for(subscribers), subscribers=subscribers,
                      ipv4_interface="enp5s0f1", ipv6_interface="enp5s0f0")


def _encap_links() -> tuple[Link, ...]:
    return (
        Link("client-dut1", Endpoint("client", "enp5s0f0"), Endpoint("napt", "enp5s0f0")),
        Link("dut1-napt", Endpoint("dut1", "to_napt"), Endpoint("napt", "to_global"), internal=True),
        Link("dut1-dut2", Endpoint("dut1", "enp5s0f1"), Endpoint("dut2", "enp5s0f0")),
        Link("dut2-server", Endpoint("dut2", "enp5s0f1"), Endpoint("server", "enp5s0f0")),
    )


def _mape_note(ce: MapCe) -> str:
    return _ce_note(ce) + f", tunnel {ce.map_address} <-> BR {BR_ADDRESS} (IPv4 in IPv6, next header 4)"


def _b4_note(b: Binding) -> str:
    first, last = b.port_ranges[0]
    return (f"lwB4 subscriber {b.index}: IPv4 {b.ipv4_address}, PSID {b.psid}, ports {first}-{last}, "
            f"lwB4 address {b.b4_address}, tunnel to the lwAFTR {BR_ADDRESS}")


def _link_note() -> str:
    return (f"the BR's (lwAFTR's) tunnel address {BR_ADDRESS} is routed into its decapsulator; its link "
            f"address {BR_LINK} is our choice")


def mape(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """MAP-E: CE = `napt` (NAT44 into the port set) + MAP-E CE on DUT1; MAP-E BR on DUT2 (RFC 7597)."""
    role, napt, dut1 = _mape_ce()
    back = (Route(MAPE_BMR.ipv6_prefix, MAPT_CE_INNER),)
    return Topology(
        name="mape",
        description="IPv4 client -> CE (napt NAT44 + MAP-E CE) -> IPv4-in-IPv6 -> BR (MAP-E BR) -> "
                    "IPv4 server",
        hosts=(_client(), napt, dut1, _encap_br("dut2", _mape_br_role(), back),
               _server(Route(MAPE_BMR.ipv4_prefix, SERVER_GATEWAY))),
        links=_encap_links(),
        client_address=CLIENT,
        server_address=SERVER,
        notes=(_mape_note(role.ce), _link_note(),
               "the paper's tester: " + flows_fit(role.ce, PAPER_THREADS, PAPER_PORTS_PER_THREAD)),
    )


def lw4o6(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """lw4o6: lwB4 = `napt` (NAT44 into its port set) + lwB4 on DUT1; lwAFTR on DUT2 (RFC 7596)."""
    role, napt, dut1 = _lwb4()
    back = (Route(role.rule.b4_prefix, B4_LINK),)
    aftr = _lwaftr_role(LW4O6_SUBSCRIBERS)
    return Topology(
        name="lw4o6",
        description="IPv4 client -> lwB4 (napt NAT44 + lwB4) -> IPv4-in-IPv6 -> lwAFTR -> IPv4 server",
        hosts=(_client(), napt, dut1, _encap_br("dut2", aftr, back),
               _server(Route(aftr.rule.ipv4_pool, SERVER_GATEWAY))),
        links=_encap_links(),
        client_address=CLIENT,
        server_address=SERVER,
        notes=(_b4_note(role.binding), _link_note(),
               f"lwAFTR binding table: subscribers 0-{LW4O6_SUBSCRIBERS - 1} of pool {aftr.rule.ipv4_pool}, "
               f"{aftr.rule.psid_len}-bit PSIDs, lwB4 i at {aftr.rule.b4_prefix} interface ID i + 1 "
               "(our choice)"),
    )


# The most CEs (subscribers) a socket tester plays itself: the DUT serves every one of its rule (table); the
# tester's sockets are dealt over the first PLAYED_MAX of them (an AF_XDP tester computes its own).
PLAYED_MAX = 1024


def _played_note(ces: int) -> str:
    return (f"the socket tester plays the first {PLAYED_MAX} of the {ces} CEs (subscribers) the DUT serves "
            "(its sockets are dealt over them)")


def _tester_client(played: list[MapCe] | list[Binding], tunnel: TunnelEnd) -> Host:
    """The tester as CEs (lwB4s): their IPv4 addresses (the sources of its sockets); their tunnel addresses
    are routed into the tunnel end (not local: what arrives for them is decapsulated, then delivered)."""
    ipv4 = sorted({p.ipv4_address for p in played}, key=lambda a: ipaddress.IPv4Address(a))
    return Host(
        "client",
        (
            Interface("enp5s0f0", (f"{MAPT_CE_INNER}/64", *(f"{a}/32" for a in ipv4))),
            Route(f"{BR_ADDRESS}/128", BR_LINK),
            Forwarding(ipv4=False, ipv6=True),
            tunnel,
        ),
    )


def _tester_server(tunnel: TunnelEnd, back: Route) -> Host:
    """Knot behind the BR's (lwAFTR's) end of the tunnel, played by the emulation: the server's IPv4 address
    and the BR's link address on one interface."""
    return Host("server", (Interface("enp5s0f0", (f"{BR_LINK}/64", f"{SERVER}/32")), back,
                           Forwarding(ipv4=False, ipv6=True), tunnel))


def mape_br(nat64_prefix: str = WELL_KNOWN_PREFIX, ces: int = 1, ea_bits: int | None = None) -> Topology:
    """The tester as MAP-E CEs 0 .. ces - 1 (IPv4 in IPv6 from their MAP addresses) -> BR -> IPv4 Knot;
    `ea_bits`: the rule's EA-bits length (mape_rule)."""
    bmr = mape_rule(ea_bits)
    if not 1 <= ces <= rule_capacity(bmr):
        indexed_ces(bmr, ces)  # raises the one-line refusal
    played = indexed_ces(bmr, min(ces, PLAYED_MAX))
    tunnel = TunnelEnd("ce", BR_ADDRESS, "enp5s0f0", "enp5s0f0", bmr=bmr, subscribers=ces)
    notes = [_mape_note(c) for c in played[:4]] + ([f"... {ces - 4} more CEs"] if ces > 4 else [])
    notes += [_played_note(ces)] if ces > PLAYED_MAX else []
    notes.append("a socket tester sends IPv4 from the CEs' addresses and ports and the client host "
                 "encapsulates them as the CEs would; an AF_XDP tester builds the encapsulated frames of all "
                 f"{ces} CEs itself (xlatperf --encap)")
    if bmr != MAPE_BMR:
        notes.append(f"rule {' '.join(bmr.rule_fields())} ({ea_bits} EA bits: {bmr.psid_len()}-bit PSIDs; "
                     f"the rule IPv6 prefix shortened from {MAPE_BMR.ipv6_prefix} so end-user prefixes stay "
                     "within /64)" if bmr.ipv6_prefix != MAPE_BMR.ipv6_prefix else
                     f"rule {' '.join(bmr.rule_fields())} ({ea_bits} EA bits)")
    return _played_single("mape-br",
                          f"IPv4-in-IPv6 tester as {ces} MAP-E CE(s) -> BR (MAP-E BR) -> IPv4 server", "mape",
                          played, tunnel, _mape_br_role(bmr), bmr.ipv6_prefix, bmr.ipv4_prefix, notes)


def lwaftr(nat64_prefix: str = WELL_KNOWN_PREFIX, ces: int = 1) -> Topology:
    """The tester as lwB4 subscribers 0 .. ces - 1 -> lwAFTR (a binding table of them) -> IPv4 Knot."""
    rule = rule_for(ces)
    played = list(bindings(rule, min(ces, PLAYED_MAX)))
    tunnel = TunnelEnd("ce", BR_ADDRESS, "enp5s0f0", "enp5s0f0", rule=rule, subscribers=ces)
    notes = [_b4_note(b) for b in played[:4]] + ([f"... {ces - 4} more subscribers"] if ces > 4 else [])
    notes += [_played_note(ces)] if ces > PLAYED_MAX else []
    return _played_single("lwaftr", f"IPv4-in-IPv6 tester as {ces} lwB4(s) -> lwAFTR -> IPv4 server", "lw4o6",
                          played, tunnel, _lwaftr_role(ces), rule.b4_prefix, rule.ipv4_pool, notes)


def _played_single(name: str, description: str, of: str, played: list[MapCe] | list[Binding],
                   tunnel: TunnelEnd, role: MapeBrRole | LwAftrRole, tunnel_prefix: str, ipv4_prefix: str,
                   notes: list[str]) -> Topology:
    """A single-DUT BR (lwAFTR) whose CEs (lwB4s) the tester plays: the client with the CEs' IPv4 addresses
    and tunnel end, the DUT routing `tunnel_prefix` back to it, Knot routing `ipv4_prefix` to the DUT."""
    return _single(
        name,
        description,
        of,
        (_tester_client(played, tunnel),
         _encap_br("dut1", role, (Route(tunnel_prefix, MAPT_CE_INNER),)),
         _server_plain(Route(ipv4_prefix, SERVER_GATEWAY))),
        client_address=played[0].ipv4_address,
        server_address=SERVER,
        tester_subscribers=tuple(played),
        notes=(*notes, _link_note()),
    )


def mape_ce(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """IPv4 tester -> CE (napt NAT44 + MAP-E CE) -> the BR's end of the tunnel in front of IPv4 Knot."""
    role, napt, dut1 = _mape_ce()
    tunnel = TunnelEnd("br", BR_ADDRESS, "enp5s0f0", "enp5s0f0", bmr=MAPE_BMR)
    return _single(
        "mape-ce",
        "IPv4 client -> CE (napt NAT44 + MAP-E CE) -> IPv4-in-IPv6 -> server (BR's tunnel end, then Knot)",
        "mape",
        (_client(), napt, dut1,
         _tester_server(tunnel, Route(MAPE_BMR.ipv6_prefix, MAPT_CE_INNER))),
        client_address=CLIENT,
        server_address=SERVER,
        notes=(_mape_note(role.ce), _link_note(),
               "the server host decapsulates and encapsulates as the BR would (the emulation's own, "
               "not a DUT)"),
    )


def lwb4(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """IPv4 tester -> lwB4 (napt NAT44 + lwB4) -> the lwAFTR's end of the tunnel in front of IPv4 Knot."""
    role, napt, dut1 = _lwb4()
    rule = role.rule
    tunnel = TunnelEnd("br", BR_ADDRESS, "enp5s0f0", "enp5s0f0", rule=rule, subscribers=LW4O6_SUBSCRIBERS)
    return _single(
        "lwb4",
        "IPv4 client -> lwB4 (napt NAT44 + lwB4) -> IPv4-in-IPv6 -> server (lwAFTR's tunnel end, then Knot)",
        "lw4o6",
        (_client(), napt, dut1, _tester_server(tunnel, Route(rule.b4_prefix, B4_LINK))),
        client_address=CLIENT,
        server_address=SERVER,
        notes=(_b4_note(role.binding), _link_note(),
               "the server host decapsulates and encapsulates as the lwAFTR would (the emulation's own, "
               "not a DUT)"),
    )


SINGLE_DUT = ("plat", "clat", "ce", "br")  # the DUTs of the paper's translating chains; `nat44` stands alone
ENCAP_SINGLE_DUT = ("mape-br", "mape-ce", "lwaftr", "lwb4")  # the encapsulating ones (issue 34)


TOPOLOGIES: dict[str, Callable[[str], Topology]] = {
    "baseline": baseline,
    "464xlat": xlat464,
    "mapt": mapt,
    "mape": mape,
    "lw4o6": lw4o6,
    "plat": plat,
    "clat": clat,
    "ce": ce,
    "br": br,
    "nat44": nat44,
    "mape-br": mape_br,
    "mape-ce": mape_ce,
    "lwaftr": lwaftr,
    "lwb4": lwb4,
}
# Topologies whose tester plays several CEs (subscribers): `ces` applies to them.
TESTER_PLAYS_CES = {"br": br, "mape-br": mape_br, "lwaftr": lwaftr}


def topology(name: str, nat64_prefix: str = WELL_KNOWN_PREFIX, ces: int = 1,
             plat_netmap: bool = False, ea_bits: int | None = None,
             new_connection_cap: int | None = None) -> Topology:
    """The named testbed; `nat64_prefix` replaces the paper's 64:ff9b::/96 everywhere it appears (the
    encapsulating ones carry IPv4 end to end and use none); `ces`: how many CEs (lw4o6 subscribers) the
    tester plays in `br`, `mape-br`, `lwaftr`; `plat_netmap`: the `plat` topology's PLAT maps its clients
    one to one onto PLAT_NETMAP (see plat); `ea_bits`: the MAP-E rule's EA-bits length (`mape-br` only);
    `new_connection_cap`: the `nat44` gateway's new connections per second (see nat44)."""
    if name not in TOPOLOGIES:
        raise ValueError(f"unknown topology {name!r}: choose one of {', '.join(TOPOLOGIES)}")
    if new_connection_cap is not None:
        if name != "nat44":
            raise ValueError(f"new_connection_cap applies only to the nat44 topology, not {name}")
        return nat44(nat64_prefix, new_connection_cap)
    if ea_bits is not None and name != "mape-br":
        raise ValueError(f"ea_bits applies only to the mape-br topology, not {name}")
    if ea_bits is not None:
        return mape_br(nat64_prefix, ces, ea_bits)
    if plat_netmap and name != "plat":
        raise ValueError(f"plat_netmap applies only to the plat topology, not {name}")
    if plat_netmap:
        return plat(nat64_prefix, netmap=True)
    if name in TESTER_PLAYS_CES:
        return TESTER_PLAYS_CES[name](nat64_prefix, ces)
    if ces != 1:
        raise ValueError(
            f"ces = {ces} applies only to the {', '.join(TESTER_PLAYS_CES)} topologies (the tester plays "
            f"the CEs), not {name}"
        )
    return TOPOLOGIES[name](nat64_prefix)
