"""The three testbeds of Lencse & Nagy (Int J Commun Syst 2022, section 3) as data.

Addresses, routes and translator parameters are the paper's. Interface names are the paper's too
(enp5s0f0 faces the client side, enp5s0f1 the server side; to_napt/to_global join the CE's two halves).
What the paper leaves open is marked as our choice.
"""

from __future__ import annotations

from collections.abc import Callable

from xlatbench.setups.mapt import Bmr, flows_fit
from xlatbench.setups.topology import (
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
)

WELL_KNOWN_PREFIX = "64:ff9b::/96"
CLIENT = "192.168.0.4"
CLIENT_NET = "192.168.0.0/24"
CLIENT_GATEWAY = "192.168.0.1"
SERVER = "203.0.113.56"
SERVER_NET = "203.0.113.0/24"
SERVER_GATEWAY = "203.0.113.2"
# Our choice: the paper does not print the baseline's DUT1-DUT2 addresses (its Figure 6); TEST-NET-2.
BASELINE_INNER = ("198.51.100.1", "198.51.100.2")

MAPT_BMR = Bmr("2001:db8:ce::/51", "192.0.2.0/24", ea_bits_len=13, psid_offset=0)
MAPT_END_USER_PREFIX = "2001:db8:ce:11b::/64"
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


def mapt(nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """MAP-T: CE = `napt` namespace (NAT44 into the port set) + MAP-T CE on DUT1; BR on DUT2 (Figs 12, 13)."""
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
    first_port_set = ce.port_ranges[0]
    napt = Host(
        "napt",
        (
            Interface("enp5s0f0", (f"{CLIENT_GATEWAY}/24",)),
            Interface("to_global", ("10.0.0.2/24",)),
            Route("default", "10.0.0.1"),
            Forwarding(ipv4=True),
            Nat44(
                source=CLIENT_NET, out_interface="to_global", to_address=ce.ipv4_address, ports=first_port_set
            ),
        ),
        parent="dut1",
    )
    dut1 = Host(
        "dut1",
        (
            Interface("to_napt", ("10.0.0.1/24",)),
            Interface("enp5s0f1", ("2001:db8:6::11b/64",)),
            Route(nat64_prefix, "2001:db8:6::1"),
            Route(f"{ce.ipv4_address}/32", "10.0.0.2"),
            Forwarding(ipv4=True, ipv6=True),
            ce_role,
        ),
    )
    dut2 = Host(
        "dut2",
        (
            Interface("enp5s0f0", ("2001:db8:6::1/64",)),
            Interface("enp5s0f1", (f"{SERVER_GATEWAY}/24",)),
            Route(MAPT_END_USER_PREFIX, "2001:db8:6::11b"),
            Forwarding(ipv4=True, ipv6=True),
            MapBrRole(
                instance="BR",
                dmr=nat64_prefix,
                fmrs=(MAPT_BMR,),
                served_end_user_prefixes=(MAPT_END_USER_PREFIX,),
                ipv4_interface="enp5s0f1",
                ipv6_interface="enp5s0f0",
            ),
        ),
    )
    links = (
        Link("client-dut1", Endpoint("client", "enp5s0f0"), Endpoint("napt", "enp5s0f0")),
        Link("dut1-napt", Endpoint("dut1", "to_napt"), Endpoint("napt", "to_global"), internal=True),
        Link("dut1-dut2", Endpoint("dut1", "enp5s0f1"), Endpoint("dut2", "enp5s0f0")),
        Link("dut2-server", Endpoint("dut2", "enp5s0f1"), Endpoint("server", "enp5s0f0")),
    )
    return Topology(
        name="mapt",
        description="IPv4 client -> CE (napt NAT44 + MAP-T CE) -> IPv6 -> BR (MAP-T BR) -> IPv4 server",
        hosts=(_client(), napt, dut1, dut2, _server(Route(MAPT_BMR.ipv4_prefix, SERVER_GATEWAY))),
        links=links,
        client_address=CLIENT,
        server_address=SERVER,
        nat64_prefix=nat64_prefix,
        notes=(
            f"CE {ce.end_user_prefix}: EA bits {ce.ea_bits_binary()}, IPv4 {ce.ipv4_address}, "
            f"PSID {ce.psid}, ports {first_port_set[0]}-{first_port_set[1]}, MAP address {ce.map_address}",
            "the paper's tester: " + flows_fit(ce, PAPER_THREADS, PAPER_PORTS_PER_THREAD),
        ),
    )


TOPOLOGIES: dict[str, Callable[[str], Topology]] = {
    "baseline": baseline,
    "464xlat": xlat464,
    "mapt": mapt,
}


def topology(name: str, nat64_prefix: str = WELL_KNOWN_PREFIX) -> Topology:
    """The named testbed; `nat64_prefix` replaces the paper's 64:ff9b::/96 everywhere it appears."""
    try:
        return TOPOLOGIES[name](nat64_prefix)
    except KeyError:
        raise ValueError(f"unknown topology {name!r}: choose one of {', '.join(TOPOLOGIES)}") from None
