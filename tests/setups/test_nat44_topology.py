"""The `nat44` topology (the scalability draft's Figure 1) as data and as rendered: enough tester sources for
10^7 AF_XDP flows, a NETMAP pool that maps each of them, the optional cap on new connections, the packets
`setup check` expects on each side, and the one-line refusals of the stateful settings. No root needed."""

from __future__ import annotations

import pytest

from xlatbench.scripts.stateful.emulated import timeout_refusal
from xlatbench.scripts.xlatperf import MAX_XDP_FLOWS, place_args
from xlatbench.setups.backends import RenderContext
from xlatbench.setups.chain import place_tester
from xlatbench.setups.emulation import EmulationConfig
from xlatbench.setups.emulation.check import expected_on_link
from xlatbench.setups.emulation.rootsysctl import conntrack_limits
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import BackendChoice, render
from xlatbench.setups.topology import Nat44


def test_ten_million_flows_fit_the_tester_sources_and_the_pool():
    t = topology("nat44")
    assert (t.client_address, t.server_address, t.knot_address) == \
        ("10.0.0.2", "203.0.113.56", "203.0.113.56")
    assert t.translators() == {} and t.max_flows() is None, "no translator role: the linux NAT44 only"
    place = place_tester(t, "xdp", 10_000_000, 1024)
    # 64 512 ports per address: 156 addresses, 64 103 flows each
    assert place_args(place) == ["--xdp-interface", "enp5s0f0", "--source", "10.0.0.2-10.0.0.157,1024-65126"]
    assert t.client_sources * (65536 - 1024) > MAX_XDP_FLOWS, "the tester's own limit binds first"
    nat = next(i for i in t.host("dut1").items if isinstance(i, Nat44))
    assert nat.public_address("10.0.0.157") == "198.18.0.157" and nat.public_address("10.0.255.254") == \
        "198.18.255.254", "one public address per source, host part kept"


def test_rendered_nat44_and_cap():
    t = topology("nat44", new_connection_cap=5000)
    steps = [" ".join(s.argv) for s in render(t, BackendChoice(), RenderContext(world="netns"))["dut1"]]
    assert "iptables -t nat -A POSTROUTING -s 10.0.0.0/16 -o enp5s0f1 -p udp -j NETMAP --to 198.18.0.0/16" \
        in steps
    assert any(s.endswith("ip saddr 10.0.0.0/16 ct state new limit rate over 5000/second burst 500 packets "
                          "counter drop") for s in steps)
    assert "198.18.0.0/16" in " ".join(" ".join(s.argv) for s in render(t, BackendChoice(),
                                                                          RenderContext(world="netns"))["server"])
    assert not any("limit" in s for s in
                   (" ".join(s.argv) for s in render(topology("nat44"), BackendChoice(),
                                                     RenderContext(world="netns"))["dut1"]))


def test_setup_check_expects_the_netmapped_source():
    t = topology("nat44")
    inside, outside = (expected_on_link(t, link)[0] for link in t.check_links)
    assert (inside.src, inside.dst) == ("10.0.0.2", "203.0.113.56")
    assert (outside.src, outside.dst) == ("198.18.0.2", "203.0.113.56")


@pytest.mark.parametrize("options, message", [
    ({"topology": "plat", "new_connection_cap": 100}, "only to the nat44 topology"),
    ({"topology": "nat44", "new_connection_cap": 0}, "at least 1/s"),
    ({"topology": "nat44", "conntrack_max": 0}, "conntrack_max must be a positive"),
    ({"topology": "nat44", "conntrack_buckets": "many"}, "conntrack_buckets must be a positive"),
])
def test_bad_stateful_options_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError, match=message) as refused:
        EmulationConfig(**options)
    assert "\n" not in str(refused.value)


def test_conntrack_limits_names_only_what_is_set():
    assert conntrack_limits(None, None) == {}
    assert conntrack_limits(1000, None) == {"net.netfilter.nf_conntrack_max": 1000}
    assert conntrack_limits(None, 1024) == {"net.netfilter.nf_conntrack_buckets": 1024}


def test_a_timeout_shorter_than_the_run_is_said_in_one_line():
    assert timeout_refusal(3600, 10_000_000, 100_000, phase_two_s=60) is None    # 100 + 60 + 30.5 s
    refusal = timeout_refusal(120, 10_000_000, 100_000, phase_two_s=60)
    assert refusal is not None and "\n" not in refusal and "190.5 s" in refusal


def test_a_record_of_the_gateway_names_the_kernels_nat44():
    from xlatbench.data.records import implementation_label

    dut = {"topology": "nat44", "translators": {}, "kernel": {"implementation": "linux", "version": "6.18"},
           "nat44": {"dut1": {"implementation": "linux", "nat": "iptables NETMAP",
                              "nat44": "iptables v1.8.9"}}}
    assert implementation_label(dut) == "nat44: linux NAT44 (iptables NETMAP, iptables v1.8.9, kernel 6.18)"


def test_the_demo_campaign_states_its_known_answers_where_the_dut_sets_them():
    """campaigns/stateful-demo.toml: the table size K of its point is the gateway's conntrack_max, the cap R
    is the setup's, and its N stays below K (every phase 1 of the rate search fits the table)."""
    from pathlib import Path

    from xlatbench.scripts.campaignfile import load_campaign

    campaign = load_campaign(Path(__file__).resolve().parents[2] / "campaigns" / "stateful-demo.toml")
    (setup,) = campaign.setups
    options = setup.params["options"]
    assert setup.params["topology"] == "nat44"
    assert (options["conntrack_max"], options["new_connection_cap"]) == (25000, 5000)
    assert campaign.stateful is not None
    (point,) = campaign.stateful.points
    assert point.table.max_connections == options["conntrack_max"] > point.connections
    config = EmulationConfig("nat44", new_connection_cap=options["new_connection_cap"])
    nat = next(i for i in config.chain_topology().host("dut1").items if isinstance(i, Nat44))
    assert nat.cap_burst == 500
