"""MAP-T arithmetic against the two worked examples of Lencse & Nagy (section 2.2 and 3.5)."""

import pytest

from xlatbench.setups.mapt import Bmr, derive_ces, flows_fit, map_ce, port_set

BMR = Bmr("2001:db8:ce::/51", "192.0.2.0/24", ea_bits_len=13, psid_offset=0)


def test_ce_41_section_2_2():
    ce = map_ce(BMR, "2001:db8:ce:41::/64")
    assert ce.ea_bits == 0x41
    assert ce.ea_bits_binary() == "00000010|00001"
    assert ce.ipv4_suffix == 2
    assert ce.ipv4_address == "192.0.2.2"
    assert ce.psid == 1
    assert ce.port_ranges == ((2048, 4095),)
    assert ce.map_address == "2001:db8:ce:41:0:c000:202:1"


def test_ce_11b_section_3_5():
    ce = map_ce(BMR, "2001:db8:ce:11b::/64")
    assert ce.ea_bits == 0x11B
    assert ce.ea_bits_binary() == "00001000|11011"
    assert ce.ipv4_address == "192.0.2.8"
    assert ce.psid == 27
    assert ce.psid_len == 5
    assert ce.port_ranges == ((55296, 57343),)
    assert ce.port_count == 2048
    assert ce.map_address == "2001:db8:ce:11b:0:c000:208:1b"


def test_psid_31_is_the_last_port_set():
    assert port_set(31, 5, 0) == ((63488, 65535),)
    assert port_set(0, 5, 0) == ((0, 2047),)


def test_psid_offset_excludes_system_ports():
    # RFC 7597 default offset 6: A runs 1..63, so port 0-1023 is never in a set.
    ranges = port_set(psid=3, psid_len=4, psid_offset=6)
    assert len(ranges) == 63
    assert ranges[0] == (1024 + 3 * 64, 1024 + 3 * 64 + 63)
    assert all(first >= 1024 for first, _ in ranges)


def test_paper_tester_flows_fit_the_port_set():
    ce = map_ce(BMR, "2001:db8:ce:11b::/64")
    sentence = flows_fit(ce, threads=16, ports_per_thread=100)
    assert "1600 distinct flows fit the 2048-port set" in sentence


def test_too_many_flows_are_refused():
    ce = map_ce(BMR, "2001:db8:ce:11b::/64")
    with pytest.raises(ValueError, match="2100 flows do not fit"):
        flows_fit(ce, threads=21, ports_per_thread=100)


def test_end_user_prefix_outside_rule_is_refused():
    with pytest.raises(ValueError, match="not inside the rule IPv6 prefix"):
        map_ce(BMR, "2001:db8:cf::/64")


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="exceeds /64"):
        Bmr("2001:db8:ce::/56", "192.0.2.0/24", 13)
    with pytest.raises(ValueError, match="IPv4 suffix"):
        Bmr("2001:db8:ce::/51", "192.0.2.0/24", 6)


def test_derived_ces_start_at_the_papers_ce_and_each_has_its_own_ipv4_address():
    ces = derive_ces(BMR, "2001:db8:ce:11b::/64", 8)
    assert ces[0] == map_ce(BMR, "2001:db8:ce:11b::/64")
    assert [ce.ipv4_address for ce in ces] == [f"192.0.2.{8 + i}" for i in range(8)]
    assert {ce.psid for ce in ces} == {27} and {ce.port_ranges for ce in ces} == {((55296, 57343),)}
    # EA bits of CE i = paper's + i * 2^k (k = 5 PSID bits): 0x11b, 0x13b, ...
    assert [ce.ea_bits for ce in ces] == [0x11B + i * 32 for i in range(8)]
    assert ces[1].end_user_prefix == "2001:db8:ce:13b::/64"
    assert ces[1].map_address == "2001:db8:ce:13b:0:c000:209:1b"
    for ce in ces:  # each one is what the BMR assigns to its end-user prefix
        assert map_ce(BMR, ce.end_user_prefix) == ce


def test_derived_ces_wrap_inside_the_rule_and_stop_at_its_size():
    ces = derive_ces(BMR, "2001:db8:ce:11b::/64", 256)
    assert len({ce.ipv4_address for ce in ces}) == 256
    assert ces[248].ipv4_address == "192.0.2.0"
    with pytest.raises(ValueError, match="do not fit rule 192.0.2.0/24 .256 addresses.: ask for 1 to 256"):
        derive_ces(BMR, "2001:db8:ce:11b::/64", 257)
    with pytest.raises(ValueError, match="ask for 1 to 256"):
        derive_ces(BMR, "2001:db8:ce:11b::/64", 0)
