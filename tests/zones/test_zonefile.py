import ipaddress

import pytest

from xlatbench.zones.zonefile import aaaa_for, query_name, write_zone


def test_names_follow_dns64perf_convention():
    assert query_name(0, "10.0.0.0/8") == "010-000-000-000.dns64perf.test."
    assert query_name(1, "10.0.0.0/8") == "010-000-000-001.dns64perf.test."
    assert query_name(256, "10.0.0.0/8") == "010-000-001-000.dns64perf.test."


def test_names_wrap_at_subnet_size():
    assert query_name(65536, "10.0.0.0/16") == query_name(0, "10.0.0.0/16")
    assert query_name(65537, "10.1.0.0/16", "example.") == "010-001-000-001.example."


def test_zone_has_one_record_per_name(tmp_path):
    path = tmp_path / "z.zone"
    assert write_zone(path, subnet="192.0.2.0/30") == 4
    records = [line.split() for line in path.read_text().splitlines() if " AAAA " in line]
    assert [r[0] for r in records] == [f"192-000-002-00{i}" for i in range(4)]
    # The AAAA data is the address in the low 32 bits of 2001:db8::/96, as ipaddress spells it.
    assert [ipaddress.IPv6Address(r[2]) for r in records] == [
        aaaa_for(ipaddress.IPv4Address(f"192.0.2.{i}")) for i in range(4)
    ]


@pytest.mark.parametrize("bad", ["10.0.0.1/16", "10.0.0.0/7", "nonsense", "2001:db8::/64"])
def test_bad_subnet_is_refused_with_a_reason(tmp_path, bad):
    with pytest.raises(ValueError, match="subnet"):
        write_zone(tmp_path / "z.zone", subnet=bad)
