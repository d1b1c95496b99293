"""The echo server's I/O mode without root: knot.conf's `xdp:` section, the XDP program read back from
`ip -j -d link` (hand-built output whose truth is fixed), and a campaign's [server] io reaching a chain."""

from __future__ import annotations

import json

import pytest

from xlatbench import xdp
from xlatbench.scripts.campaignfile import parse_campaign
from xlatbench.zones import KnotConfig
from xlatbench.zones.knot import xdp_section


def test_socket_mode_writes_no_xdp_section():
    config = KnotConfig(listen=(("203.0.113.56", 53),))
    assert config.io == "socket"
    assert xdp_section(config) == ""


def test_xdp_mode_listens_on_the_interface_at_the_first_listen_port():
    config = KnotConfig(listen=(("203.0.113.56", 5353), ("::1", 53)), xdp_interface="enp5s0f0")
    assert config.io == "xdp"
    section = xdp_section(config)
    assert "xdp:\n    listen: [ enp5s0f0@5353 ]\n    udp: on\n    tcp: off\n" in section
    assert "route-check: off" in section


LINKS = [
    {"ifname": "lo"},
    {"ifname": "enp5s0f0", "xdp": {"mode": 1, "prog": {"id": 17, "name": "xdp_redirect_dn", "tag": "ab"}}},
    {"ifname": "eth1", "xdp": {"mode": 2, "prog": {"id": 18, "name": "xlb_reply_filt"}}},
    {"ifname": "eth2", "xdp": {"mode": 4, "attached": [
        {"mode": 1, "prog": {"id": 19, "name": "a"}}, {"mode": 2, "prog": {"id": 20, "name": "b"}}]}},
]


def test_attached_programs_are_read_with_their_modes():
    found = xdp.parse_links(json.dumps(LINKS))
    assert [(p.interface, p.program, p.program_id, p.mode) for p in found] == [
        ("enp5s0f0", "xdp_redirect_dn", 17, "native"),
        ("eth1", "xlb_reply_filt", 18, "generic"),
        ("eth2", "a", 19, "native"),
        ("eth2", "b", 20, "generic"),
    ]
    assert found[0].text() == "xdp_redirect_dn (id 17, native) on enp5s0f0"


def test_no_program_and_no_output_read_as_none():
    assert xdp.parse_links(json.dumps([{"ifname": "veth0"}])) == []
    assert xdp.parse_links("") == []


CAMPAIGN = {
    "campaign": {"name": "x", "cores": [1]},
    "search": {"max_rate_qps": 4000, "error_qps": 1000, "duration_s": 1, "rest_s": 0, "repetitions": 1},
    "setup": [{"name": "b", "kind": "chain", "topology": "baseline", "options": {"prefix": "xq1"}},
              {"name": "sim", "kind": "fake", "capacity_qps": 5000}],
}


@pytest.mark.parametrize("io", ["socket", "xdp"])
def test_server_io_reaches_the_chain_as_knot_io(io):
    campaign = parse_campaign({**CAMPAIGN, "server": {"io": io}}, "x.toml")
    assert campaign.server_io == io
    chain = campaign.setup("b")
    assert chain.params["options"].get("knot_io", "socket") == io
    assert chain.params["options"]["prefix"] == "xq1"
    assert campaign.setup("sim").params == {"capacity_qps": 5000}  # a fake has no server


def test_without_server_table_the_chain_options_are_unchanged():
    campaign = parse_campaign(CAMPAIGN, "x.toml")
    assert campaign.server_io == "socket"
    assert campaign.setup("b").params["options"] == {"prefix": "xq1"}
