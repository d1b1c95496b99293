"""The jool backend renders, line for line, the commands Lencse & Nagy list in section 3.

The listings below are the paper's, with three deliberate corrections, each marked where it is:
- 464XLAT PLAT: `net-ipv6.conf.all.forwarding` -> `net.ipv6.conf.all.forwarding` (a typo in the paper);
- MAP-T CE: `ip netns exec napt ip link set tp_global up` -> `to_global` (a typo in the paper);
- MAP-T BR: the paper stops before Jool ("its type is not set to BR, because it is the default"); the
  four jool_mapt lines are those of Jool's MAP-T documentation, which our renderer prints.
The paper spells `ip addr add` in the 464XLAT listings and `ip address add` in the MAP-T ones; both are the
same iproute2 command, and the comparison reads `addr` as `address`. Lines are compared as argument
vectors (shlex), so quoting style ("CE 11b" vs 'CE 11b') does not matter.
"""

import shlex

import pytest

from xlatbench.setups.backends import RenderContext
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import BackendChoice, render
from xlatbench.setups.steps import Cmd

CLIENT = """
ip link set enp5s0f0 up
ip addr add 192.168.0.4/24 dev enp5s0f0
ip route add 203.0.113.0/24 via 192.168.0.1
"""
SERVER = """
ip link set enp5s0f0 up
ip addr add 203.0.113.56/24 dev enp5s0f0
ip route add 192.168.0.0/24 via 203.0.113.2
"""
SERVER_MAPT = SERVER + "ip route add 192.0.2.0/24 via 203.0.113.2\n"

CLAT = """
ip link set enp5s0f0 up
ip addr add 192.168.0.1/24 dev enp5s0f0
ip link set enp5s0f1 up
ip addr add 2001:db8:100::1/64 dev enp5s0f1
sysctl -w net.ipv4.conf.all.forwarding=1
sysctl -w net.ipv6.conf.all.forwarding=1
modprobe jool_siit
jool_siit instance add --netfilter --pool6 64:ff9b::/96
jool_siit eamt add 192.168.0.4 2001:db8:2::4
ip route add 64:ff9b::/96 via 2001:db8:100::2
"""
PLAT = """
ip link set enp5s0f0 up
ip addr add 2001:db8:100::2/64 dev enp5s0f0
ip link set enp5s0f1 up
ip addr add 203.0.113.2/24 dev enp5s0f1
sysctl -w net.ipv4.conf.all.forwarding=1
sysctl -w net.ipv6.conf.all.forwarding=1
modprobe jool
jool instance add --netfilter --pool6 64:ff9b::/96
jool pool4 add 203.0.113.2 --udp 0-65535
ip route add 2001:db8:2::/64 via 2001:db8:100::1
"""  # paper: "sysctl -w net-ipv6.conf.all.forwarding=1" (typo corrected)

CE = """
ip netns add napt
ip link add to_napt type veth peer name to_global netns napt
ip link set enp5s0f0 netns napt
ip netns exec napt ip link set enp5s0f0 up
ip netns exec napt ip address add 192.168.0.1/24 dev enp5s0f0
ip netns exec napt ip link set to_global up
ip netns exec napt ip address add 10.0.0.2/24 dev to_global
ip netns exec napt ip route add default via 10.0.0.1
ip netns exec napt sysctl -w net.ipv4.conf.all.forwarding=1
ip netns exec napt iptables -t nat -A POSTROUTING -s 192.168.0.0/24 -o to_global -p udp -j SNAT \\
--to-source 192.0.2.8:55296-57343
ip link set to_napt up
ip address add 10.0.0.1/24 dev to_napt
ip link set enp5s0f1 up
ip address add 2001:db8:6::11b/64 dev enp5s0f1
ip route add 64:ff9b::/96 via 2001:db8:6::1
ip route add 192.0.2.8/32 via 10.0.0.2
sysctl -w net.ipv4.conf.all.forwarding=1
sysctl -w net.ipv6.conf.all.forwarding=1
modprobe jool_mapt
jool_mapt instance add "CE 11b" --netfilter --dmr 64:ff9b::/96
jool_mapt -i "CE 11b" global update end-user-ipv6-prefix 2001:db8:ce:11b::/64
jool_mapt -i "CE 11b" global update bmr 2001:db8:ce::/51 192.0.2.0/24 13 0
jool_mapt -i "CE 11b" global update map-t-type CE
"""  # paper: "ip netns exec napt ip link set tp_global up" (typo corrected)

BR = """
ip link set enp5s0f0 up
ip address add 2001:db8:6::1/64 dev enp5s0f0
ip link set enp5s0f1 up
ip address add 203.0.113.2/24 dev enp5s0f1
ip route add 2001:db8:ce:11b::/64 via 2001:db8:6::11b
sysctl -w net.ipv4.conf.all.forwarding=1
sysctl -w net.ipv6.conf.all.forwarding=1
modprobe jool_mapt
jool_mapt instance add "BR" --netfilter --dmr 64:ff9b::/96
jool_mapt -i "BR" fmrt add 2001:db8:ce::/51 192.0.2.0/24 13 0
jool_mapt -i "BR" global update map-t-type BR
"""  # paper: listing ends at the sysctl lines; the jool_mapt lines are from Jool's MAP-T documentation

PAPER = {
    "464xlat": {"client": CLIENT, "dut1": CLAT, "dut2": PLAT, "server": SERVER},
    "mapt": {"client": CLIENT, "dut1": CE, "dut2": BR, "server": SERVER_MAPT},
}


# Single-DUT setups (RFC 8219 Figure 5): the DUT's lines are the paper's for its role, unchanged; the tester
# and Knot take the other translator's place with its addresses (our listings, derived in setups/testbeds.py).
TESTER_AS_CLAT = """
ip link set enp5s0f0 up
ip addr add 2001:db8:100::1/64 dev enp5s0f0
ip addr add 2001:db8:2::4/128 dev enp5s0f0
ip route add 64:ff9b::/96 via 2001:db8:100::2 src 2001:db8:2::4
"""
SERVER_IPV4_ONLY = """
ip link set enp5s0f0 up
ip addr add 203.0.113.56/24 dev enp5s0f0
"""
SERVER_AS_PLAT = """
ip link set enp5s0f0 up
ip addr add 2001:db8:100::2/64 dev enp5s0f0
ip addr add 64:ff9b::cb00:7138/128 dev enp5s0f0
ip route add 2001:db8:2::/64 via 2001:db8:100::1
"""
SERVER_AS_BR = """
ip link set enp5s0f0 up
ip address add 2001:db8:6::1/64 dev enp5s0f0
ip address add 64:ff9b::cb00:7138/128 dev enp5s0f0
ip route add 2001:db8:ce:11b::/64 via 2001:db8:6::11b
"""
TESTER_AS_CE = """
ip link set enp5s0f0 up
ip address add 2001:db8:6::11b/64 dev enp5s0f0
ip address add 2001:db8:ce:11b:0:c000:208:1b/128 dev enp5s0f0
ip route add 64:ff9b::/96 via 2001:db8:6::1 src 2001:db8:ce:11b:0:c000:208:1b
"""

SINGLE_DUT = {
    "plat": {"client": TESTER_AS_CLAT, "dut1": PLAT, "server": SERVER_IPV4_ONLY},
    "clat": {"client": CLIENT, "dut1": CLAT, "server": SERVER_AS_PLAT},
    "ce": {"client": CLIENT, "dut1": CE, "server": SERVER_AS_BR},
    "br": {
        "client": TESTER_AS_CE,
        "dut1": BR,
        "server": SERVER_IPV4_ONLY + "ip route add 192.0.2.0/24 via 203.0.113.2\n",
    },
}


def argvs(listing: str) -> list[list[str]]:
    lines = listing.replace("\\\n", " ").strip().splitlines()
    return [
        ["address" if word == "addr" and argv[:1] == ["ip"] else word for word in argv]
        for argv in (shlex.split(line) for line in lines)
    ]


def rendered(topology_name: str) -> dict[str, list[list[str]]]:
    plan = render(topology(topology_name), BackendChoice.parse("jool"), RenderContext(world="real"))
    out = {}
    for host, steps in plan.items():
        assert all(isinstance(s, Cmd) for s in steps), f"{host}: jool renders commands only"
        out[host] = [list(s.argv) for s in steps]
    return out


@pytest.mark.parametrize("topology_name", ["464xlat", "mapt"])
def test_jool_rendering_is_the_papers_listing(topology_name):
    got = rendered(topology_name)
    assert sorted(got) == sorted(PAPER[topology_name]), "one rendering per physical host"
    for host, listing in PAPER[topology_name].items():
        want = argvs(listing)
        assert len(got[host]) == len(want), f"{host}: {len(got[host])} lines rendered, paper has {len(want)}"
        for number, (line_got, line_want) in enumerate(zip(got[host], want, strict=True), 1):
            assert line_got == line_want, f"{host} line {number}"


@pytest.mark.parametrize("topology_name", sorted(SINGLE_DUT))
def test_jool_single_dut_rendering_is_the_papers_dut_between_tester_and_knot(topology_name):
    got = rendered(topology_name)
    assert sorted(got) == ["client", "dut1", "server"], "two hosts plus the DUT (the napt lives in the CE)"
    for host, listing in SINGLE_DUT[topology_name].items():
        assert got[host] == argvs(listing), f"{topology_name}: {host}"


def test_napt_is_a_namespace_of_the_ce_not_a_machine():
    assert "napt" not in rendered("mapt")


def test_baseline_forwards_ipv4_on_both_duts():
    got = rendered("baseline")
    for host in ("dut1", "dut2"):
        assert ["sysctl", "-w", "net.ipv4.conf.all.forwarding=1"] in got[host]
        assert not any(argv[0].startswith("jool") or argv[0] == "modprobe" for argv in got[host])
    assert ["ip", "route", "add", "203.0.113.0/24", "via", "198.51.100.2"] in got["dut1"]
    assert ["ip", "route", "add", "192.168.0.0/24", "via", "198.51.100.1"] in got["dut2"]
