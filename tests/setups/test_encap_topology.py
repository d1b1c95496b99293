"""The MAP-E and lw4o6 topologies as data (issue 34): RFC 7597 / 7596 arithmetic checked against worked
numbers, the CE numbering the encapsulation helpers share, and the bad input refused in one line."""

import ipaddress

import pytest

from xlatbench.setups.lw4o6 import Lw4o6Rule, binding, bindings, rule_for
from xlatbench.setups.mapt import Bmr, ce_at, indexed_ces, map_ce, rule_capacity
from xlatbench.setups.paper import ENCAP_SINGLE_DUT, topology
from xlatbench.setups.topology import LwAftrRole, LwB4Role, MapeBrRole, MapeCeRole, TunnelEnd

BMR = Bmr("2001:db8:ce::/51", "192.0.2.0/24", ea_bits_len=13, psid_offset=0)


def test_ce_number_is_its_ea_bits_value():
    ce = ce_at(BMR, 0x11B)
    assert ce == map_ce(BMR, "2001:db8:ce:11b::/64")  # the paper's CE (section 3.5)
    assert (ce.ipv4_address, ce.psid, ce.port_ranges) == ("192.0.2.8", 27, ((55296, 57343),))
    assert ce.map_address == "2001:db8:ce:11b:0:c000:208:1b"
    first = ce_at(BMR, 0)
    assert (first.ipv4_address, first.psid, first.map_address) == ("192.0.2.0", 0, "2001:db8:ce::c000:200:0")
    last = ce_at(BMR, 8191)
    assert (last.ipv4_address, last.psid, last.port_ranges) == ("192.0.2.255", 31, ((63488, 65535),))
    assert rule_capacity(BMR) == 8192 and len(indexed_ces(BMR, 8192)) == 8192


def test_shorter_end_user_prefix_when_rule_and_ea_bits_are_shorter_than_64():
    rule = Bmr("2001:db8::/40", "192.0.2.0/24", ea_bits_len=20)  # 8 + 12 PSID bits, /60 end-user
    ce = ce_at(rule, 0x12345)
    assert ce.end_user_prefix == "2001:db8:12:3450::/60"
    assert ce.ipv4_address == "192.0.2.18" and ce.psid == 0x345 and ce.port_count == 16
    suffix = int(ipaddress.IPv6Address(ce.map_address)) & ((1 << 64) - 1)
    assert suffix == (int(ipaddress.IPv4Address("192.0.2.18")) << 16) | 0x345


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Bmr("2001:db8:ce::/56", "192.0.2.0/24", 13), "exceeds /64"),
    (lambda: Bmr("2001:db8:ce::/51", "192.0.2.0/24", 6), "IPv4 suffix"),
    (lambda: indexed_ces(BMR, 8193), "8193 CEs do not fit rule"),
    (lambda: topology("mape-br", ces=8193), "8193 CEs do not fit rule"),
    (lambda: topology("lwaftr", ces=1 << 30), "subscribers do not fit pool"),
    (lambda: topology("mape", ces=2), "applies only to the br, mape-br, lwaftr"),
])
def test_bad_rules_and_counts_are_one_line(make, message):
    with pytest.raises(ValueError, match=message) as caught:
        make()
    assert "\n" not in str(caught.value)


def test_lw4o6_bindings_follow_the_shared_numbering():
    rule = Lw4o6Rule()
    zero, paper = binding(rule, 0), binding(rule, 0x11B)
    assert (zero.ipv4_address, zero.psid, zero.b4_address) == ("192.0.2.0", 0, "2001:db8:b4::1")
    assert (paper.ipv4_address, paper.psid, paper.port_ranges) == ("192.0.2.8", 27, ((55296, 57343),))
    assert paper.b4_address == "2001:db8:b4::11c"
    table = list(bindings(rule, 8192))
    assert len({(b.ipv4_address, b.psid) for b in table}) == 8192
    assert len({b.b4_address for b in table}) == 8192
    assert rule_for(8192).ipv4_pool == "192.0.2.0/24" and rule_for(8193).ipv4_pool == "100.64.0.0/10"


def test_the_new_topologies_and_their_roles():
    roles = {name: {type(r) for r in topology(name).translators().values()}
             for name in ("mape", "lw4o6", "mape-br", "mape-ce", "lwaftr", "lwb4")}
    assert roles == {"mape": {MapeCeRole, MapeBrRole}, "lw4o6": {LwB4Role, LwAftrRole},
                     "mape-br": {MapeBrRole}, "mape-ce": {MapeCeRole}, "lwaftr": {LwAftrRole},
                     "lwb4": {LwB4Role}}
    assert {"mape-br", "mape-ce", "lwaftr", "lwb4"} == set(ENCAP_SINGLE_DUT)
    assert all(topology(name).single_dut_of in ("mape", "lw4o6") for name in ENCAP_SINGLE_DUT)
    mape = topology("mape")
    ce = mape.host("dut1").translator
    assert isinstance(ce, MapeCeRole) and ce.ce.map_address == "2001:db8:ce:11b:0:c000:208:1b"
    assert ce.br_address == "2001:db8:6::1" and mape.max_flows() == 2048
    br = topology("mape-br", ces=4)
    assert [s.ipv4_address for s in br.tester_subscribers] == ["192.0.2.0"] * 4
    assert [s.psid for s in br.tester_subscribers] == [0, 1, 2, 3]
    tunnel = br.host("client").tester_tunnel
    assert isinstance(tunnel, TunnelEnd) and tunnel.side == "ce" and tunnel.bmr == BMR
    assert topology("mape-ce").host("server").tester_tunnel.side == "br"
    aftr = topology("lwaftr", ces=64).host("dut1").translator
    assert isinstance(aftr, LwAftrRole) and len(aftr.bindings()) == 64


@pytest.mark.parametrize(("argv", "message"), [
    (["mape-br", "--ea-bits", "6"], "--ea-bits 6 does not fit the MAP rule"),
    (["mape-br", "--ea-bits", "25"], "no room for a 17-bit PSID"),
    (["mape-br", "--ces", "8193"], "8193 CEs do not fit rule"),
    (["lwaftr", "--ces", "300000000"], "subscribers do not fit pool 100.64.0.0/10"),
    (["lwaftr", "--ces", "100000000", "--backend", "bpf"], "binding table of 100000000 entries needs"),
    (["mape-br", "--backend", "mape-br=tayga"], "backend tayga does not serve the mape-br role"),
    (["mape", "--ea-bits", "14"], "ea_bits applies only to the mape-br topology"),
])
def test_bad_input_is_one_line_before_anything_is_brought_up(argv, message, capsys, monkeypatch):
    from xlatbench.cli import main
    from xlatbench.setups.backends import bpf

    monkeypatch.setattr(bpf, "mem_available", lambda: 8 << 30)  # 8 GiB available: 100 M bindings do not fit
    assert main(["setup", "render", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_the_socket_tester_plays_the_ces_ipv4_addresses_and_port_sets():
    from xlatbench.scripts.xlatperf import place_args
    from xlatbench.setups.chain import place_tester

    place = place_tester(topology("mape-br", ces=2), "socket", 4, None)
    assert place.ce
    # Both CEs share 192.0.2.0 (PSIDs 0 and 1): one --source (xlatperf takes each address once), 2 sockets
    # each
    assert place_args(place) == ["--source", "192.0.2.0,1024-1025,2048-2049"]
    forty = place_args(place_tester(topology("lwaftr", ces=40), "socket", 10, None))
    assert forty == ["--source", "192.0.2.0,1024-1024,2048-2048,4096-4096,6144-6144,8192-8192",
                     "--source", "192.0.2.1,1024-1024,2048-2048,4096-4096,6144-6144,8192-8192"], forty
    assert place_args(place_tester(topology("lwaftr"), "socket", 4, None)) == \
        ["--bind", "192.0.2.0", "--first-port", "1024"]
    xdp = place_tester(topology("mape-br", ces=1 << 20, ea_bits=20), "xdp", 4, None)
    assert xdp.encap is not None and not xdp.sources and xdp.interface == "enp5s0f0"
    assert (xdp.encap.mode, xdp.encap.rule, xdp.encap.ces, xdp.encap.br) == \
        ("map-e", "2001:db8:c0::/44,192.0.2.0/24,20,0", 1 << 20, "2001:db8:6::1")
    lw = place_tester(topology("lwaftr", ces=3000), "xdp", 4, None).encap
    assert lw is not None and (lw.mode, lw.ces, lw.br) == ("lw4o6", 3000, "2001:db8:6::1")
    with pytest.raises(ValueError, match="owns only ports 0-0, which a socket cannot bind"):
        place_tester(topology("mape-br", ces=2, ea_bits=24), "socket", 4, None)


def test_a_16m_ce_rule_renders_without_holding_16m_ces(capsys):
    from xlatbench.cli import main

    t = topology("mape-br", ces=1 << 24, ea_bits=24)
    assert len(t.tester_subscribers) == 1024 and t.host("dut1").translator.fmrs[0].rule_fields() == \
        ["2001:db8::/40", "192.0.2.0/24", "24", "0"]
    assert main(["setup", "render", "mape-br", "--ces", str(1 << 24), "--ea-bits", "24"]) == 0
    assert "the socket tester plays the first 1024 of the 16777216 CEs" in capsys.readouterr().out
