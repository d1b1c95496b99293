"""The three testbeds of Lencse & Nagy (Int J Commun Syst 2022, section 3) as data.

Addresses, routes and translator parameters are the paper's. Interface names are the paper's too
(enp5s0f0 faces the client side, enp5s0f1 the server side; to_napt/to_global join the CE's two halves).
What the paper leaves open is marked as our choice.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import replace

from .mapt import Bmr, MapCe, derive_ces, flows_fit
from .topology import (
    Clat,
    Endpoint,
    Forwarding,
    Host,
    Interface,
    Link,
    MapBrRole,
    MapCeRole,
    Nat44,
    Plat,
    Route,
    Topology,
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
    if len(ce.port_ranges) != 1:
        raise ValueError("the napt's iptables SNAT takes one contiguous port range: use PSID offset 0")
    napt = Host(
        "napt",
        (
            Interface("enp5s0f0", (f"{CLIENT_GATEWAY}/24",)),
            Interface("to_global", ("10.0.0.2/24",)),
            Route("default", "10.0.0.1"),
            Forwarding(ipv4=True),
            Nat44(
                source=CLIENT_NET,
                out_interface="to_global",
                to_address=ce.ipv4_address,
                ports=ce.port_ranges[0],
            ),
        ),
        parent="dut1",
    )
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


SINGLE_DUT = ("plat", "clat", "ce", "br")  # the DUTs of the paper's chains; `nat44` stands alone


TOPOLOGIES: dict[str, Callable[[str], Topology]] = {
    "baseline": baseline,
    "464xlat": xlat464,
    "mapt": mapt,
    "plat": plat,
    "clat": clat,
    "ce": ce,
    "br": br,
    "nat44": nat44,
}


def topology(name: str, nat64_prefix: str = WELL_KNOWN_PREFIX, ces: int = 1,
             plat_netmap: bool = False, new_connection_cap: int | None = None) -> Topology:
    """The named testbed; `nat64_prefix` replaces the paper's 64:ff9b::/96 everywhere it appears;
    `ces`: how many CEs the tester plays in the `br` topology; `plat_netmap`: the `plat` topology's PLAT
    maps its clients one to one onto PLAT_NETMAP (see plat); `new_connection_cap`: the `nat44` gateway's
    new connections per second (see nat44)."""
    if name not in TOPOLOGIES:
        raise ValueError(f"unknown topology {name!r}: choose one of {', '.join(TOPOLOGIES)}")
    if new_connection_cap is not None:
        if name != "nat44":
            raise ValueError(f"new_connection_cap applies only to the nat44 topology, not {name}")
        return nat44(nat64_prefix, new_connection_cap)
    if plat_netmap and name != "plat":
        raise ValueError(f"plat_netmap applies only to the plat topology, not {name}")
    if plat_netmap:
        return plat(nat64_prefix, netmap=True)
    if name == "br":
        return br(nat64_prefix, ces)
    if ces != 1:
        raise ValueError(
            f"ces = {ces} applies only to the br topology (the tester plays the CEs), not {name}"
        )
    return TOPOLOGIES[name](nat64_prefix)
