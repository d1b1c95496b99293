"""The bpf tunnel ends (encap.bpf.c) on crafted frames through BPF_PROG_TEST_RUN (`bpftool prog run`): no
namespace, no interface, this kernel's verifier and the program's exact output.

Known answers from the Python arithmetic (setups/mapt.map_address_of, setups/lw4o6.binding_of), not from the
program: a MAP-E BR encapsulates a reply to the MAP address that RFC 7597 gives for its IPv4 destination and
the PSID of its port (random addresses and ports of the rule, and its corners), and decapsulates a query only
from the MAP address of its inner source and source port (a port of another PSID, or another address: dropped
and counted); a CE encapsulates from its MAP address only within its port set; a lwAFTR answers from its
binding table and drops what has no binding; the two test-only faults do what they say. Needs root, bpftool
and the built object; the program is pinned under /sys/fs/bpf for the test and removed after.
"""

from __future__ import annotations

import ipaddress
import random
import secrets
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from xlatbench.setups.backends.bpf import (
    BpfBackend,
    binding_entry,
    encap_config_value,
    encap_object_path,
    hex_bytes,
    read_stats,
    tunnel_plan,
)
from xlatbench.setups.lw4o6 import Lw4o6Rule, binding, binding_of
from xlatbench.setups.mapt import Bmr, ce_at, map_address_of
from xlatbench.setups.topology import LwAftrRole, MapeBrRole, MapeCeRole

pytestmark = [pytest.mark.root]

BMR = Bmr("2001:db8:ce::/51", "192.0.2.0/24", ea_bits_len=13)
BR = "2001:db8:6::1"
SERVER = "203.0.113.56"
TC_ACT_OK, TC_ACT_SHOT = 0, 2
MAC = bytes.fromhex("020000000001") * 2


def ipv4_udp(src: str, sport: int, dst: str, dport: int, payload: bytes = b"known answer") -> bytes:
    """An IPv4 UDP packet (header checksum not needed by the program)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                         ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed)
    return header + udp


def frame4(packet: bytes) -> bytes:
    return MAC + b"\x08\x00" + packet


def frame6(outer_src: str, outer_dst: str, packet: bytes) -> bytes:
    header = struct.pack("!IHBB16s16s", 6 << 28, len(packet), 4, 64, ipaddress.IPv6Address(outer_src).packed,
                         ipaddress.IPv6Address(outer_dst).packed)
    return MAC + b"\x86\xdd" + header + packet


def outer_of(out: bytes) -> tuple[str, str, bytes]:
    """(outer source, outer destination, inner packet) of an encapsulated output frame, its header checked."""
    assert out[12:14] == b"\x86\xdd", "an IPv6 frame"
    ip6 = out[14:54]
    assert ip6[0] >> 4 == 6 and ip6[6] == 4 and ip6[7] == 64, "IPv4 in IPv6, hop limit 64"
    assert struct.unpack("!H", ip6[4:6])[0] == len(out) - 54
    return (str(ipaddress.IPv6Address(ip6[8:24])), str(ipaddress.IPv6Address(ip6[24:40])), out[54:])


@pytest.fixture
def load(tmp_path: Path) -> Iterator:
    """load(role, fault=None) -> the pin directory of the program configured as the role's tunnel end."""
    backend = BpfBackend()
    if backend.unavailable():
        pytest.fail(backend.unavailable())  # not built is a failure: `make build` compiles the object
    made: list[Path] = []

    def make(role: object, fault: str | None = None) -> Path:
        plan = tunnel_plan(role)  # type: ignore[arg-type]
        pins = Path("/sys/fs/bpf") / f"xlatbench-test-{secrets.token_hex(4)}"
        table = Path(f"{pins}-bindings")
        made.extend((pins, table))
        subprocess.run(["bpftool", "map", "create", str(table), "type", "hash", "key", "8", "value", "16",
                        "entries", str(max(plan.binding_count, 1)), "name", "encap_bindings", "flags", "1"],
                       check=True, capture_output=True)
        subprocess.run(["bpftool", "prog", "loadall", str(encap_object_path()), str(pins), "type",
                        "classifier", "map", "name", "encap_bindings", "pinned", str(table),
                        "pinmaps", str(pins / "maps")], check=True, capture_output=True, text=True)
        subprocess.run(["bpftool", "map", "update", "pinned", str(pins / "maps" / "encap_config"), "key",
                        *hex_bytes(bytes(4)), "value", *hex_bytes(encap_config_value(plan, fault))],
                       check=True)
        lines = []
        for b in plan.bindings:
            key, value = binding_entry(b.ipv4_address, b.psid, b.b4_address) if hasattr(b, "b4_address") \
                else binding_entry(*b)  # type: ignore[misc]
            lines.append(" ".join(("map", "update", "pinned", str(table), "key", *hex_bytes(key),
                                   "value", *hex_bytes(value))))
        if lines:
            batch = tmp_path / "batch"
            batch.write_text("\n".join(lines) + "\n")
            subprocess.run(["bpftool", "batch", "file", str(batch)], check=True, capture_output=True)
        return pins

    yield make
    for path in made:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


def run(pins: Path, frame: bytes, tmp_path: Path) -> tuple[int, bytes]:
    data_in, data_out = tmp_path / "in", tmp_path / "out"
    data_in.write_bytes(frame)
    done = subprocess.run(["bpftool", "prog", "run", "pinned", str(pins / "encap"), "data_in", str(data_in),
                           "data_out", str(data_out)], capture_output=True, text=True, check=True)
    return int(done.stdout.split("Return value:")[1].split(",")[0]), data_out.read_bytes()


def br_role() -> MapeBrRole:
    return MapeBrRole(BR, (BMR,), "enp5s0f1", "enp5s0f0")


def test_the_br_encapsulates_to_the_map_address_the_rule_gives(load, tmp_path):
    pins = load(br_role())
    rng = random.Random(7597)
    cases = [("192.0.2.0", 0), ("192.0.2.255", 65535), ("192.0.2.8", 55296), ("192.0.2.8", 57343)]
    cases += [(f"192.0.2.{rng.randrange(256)}", rng.randrange(65536)) for _ in range(60)]
    for dst, dport in cases:
        inner = ipv4_udp(SERVER, 53, dst, dport)
        verdict, out = run(pins, frame4(inner), tmp_path)
        assert verdict == TC_ACT_OK, (dst, dport)
        assert outer_of(out) == (BR, map_address_of(BMR, dst, dport), inner), (dst, dport)
    verdict, _ = run(pins, frame4(ipv4_udp(SERVER, 53, "198.51.100.1", 40000)), tmp_path)
    assert verdict == TC_ACT_SHOT
    stats = read_stats(str(pins))
    assert stats["encapsulated"] == len(cases) and stats["drop_outside_rule"] == 1


def test_the_br_decapsulates_only_from_the_map_address_of_the_inner_source_and_port(load, tmp_path):
    pins = load(br_role())
    rng = random.Random(7596)
    good = bad = 0
    for _ in range(40):
        src, sport = f"192.0.2.{rng.randrange(256)}", rng.randrange(65536)
        inner = ipv4_udp(src, sport, SERVER, 53)
        verdict, out = run(pins, frame6(map_address_of(BMR, src, sport), BR, inner), tmp_path)
        assert verdict == TC_ACT_OK and out == frame4(inner), (src, sport)
        good += 1
        other_set = sport ^ 0x800  # the lowest PSID bit (5-bit PSID, offset 0: port bits 11-15)
        verdict, _ = run(pins, frame6(map_address_of(BMR, src, other_set), BR, inner), tmp_path)
        assert verdict == TC_ACT_SHOT, "a source port outside the CE's port set"
        bad += 1
    other_ce = map_address_of(BMR, "192.0.2.9", 55296)  # another address, same PSID
    verdict, _ = run(pins, frame6(other_ce, BR, ipv4_udp("192.0.2.8", 55296, SERVER, 53)), tmp_path)
    assert verdict == TC_ACT_SHOT
    verdict, _ = run(pins, frame6(other_ce, "2001:db8:6::99", ipv4_udp("192.0.2.9", 55296, SERVER, 53)),
                     tmp_path)
    assert verdict == TC_ACT_SHOT, "not to the BR's tunnel address"
    stats = read_stats(str(pins))
    assert stats["decapsulated"] == good and stats["drop_source_mismatch"] == bad + 1
    assert stats["drop_not_tunnel"] == 1


def test_a_ce_tunnels_from_its_map_address_only_inside_its_port_set(load, tmp_path):
    ce = ce_at(BMR, 0x11B)
    pins = load(MapeCeRole(ce.end_user_prefix, BMR, BR, "to_napt", "enp5s0f1"))
    inner = ipv4_udp("192.0.2.8", 55296, SERVER, 53)
    verdict, out = run(pins, frame4(inner), tmp_path)
    assert verdict == TC_ACT_OK and outer_of(out) == ("2001:db8:ce:11b:0:c000:208:1b", BR, inner)
    verdict, _ = run(pins, frame4(ipv4_udp("192.0.2.8", 1000, SERVER, 53)), tmp_path)
    assert verdict == TC_ACT_SHOT
    reply = ipv4_udp(SERVER, 53, "192.0.2.8", 57343)
    verdict, out = run(pins, frame6(BR, ce.map_address, reply), tmp_path)
    assert verdict == TC_ACT_OK and out == frame4(reply)
    verdict, _ = run(pins, frame6("2001:db8:6::7", ce.map_address, reply), tmp_path)
    assert verdict == TC_ACT_SHOT, "only the BR is its peer"
    stats = read_stats(str(pins))
    counted = ("encapsulated", "decapsulated", "drop_no_binding", "drop_unknown_peer")
    assert [stats[name] for name in counted] == [1, 1, 1, 1]


def test_the_lwaftr_answers_from_its_binding_table(load, tmp_path):
    rule = Lw4o6Rule()
    pins = load(LwAftrRole(BR, rule, 64, "enp5s0f1", "enp5s0f0"))
    for index in (0, 1, 31, 32, 63):
        b = binding(rule, index)
        port = b.port_ranges[0][0] + 17
        query = ipv4_udp(b.ipv4_address, port, SERVER, 53)
        verdict, out = run(pins, frame6(b.b4_address, BR, query), tmp_path)
        assert verdict == TC_ACT_OK and out == frame4(query), index
        reply = ipv4_udp(SERVER, 53, b.ipv4_address, port)
        verdict, out = run(pins, frame4(reply), tmp_path)
        bound = binding_of(rule, b.ipv4_address, port, 64)
        assert verdict == TC_ACT_OK and bound is not None and outer_of(out) == (BR, bound.b4_address, reply)
    unbound = binding(rule, 64)  # 192.0.2.2 PSID 0: beyond the table
    verdict, _ = run(pins, frame4(ipv4_udp(SERVER, 53, unbound.ipv4_address, 1000)), tmp_path)
    assert verdict == TC_ACT_SHOT
    wrong = binding(rule, 5).b4_address  # bound, but to another subscriber
    verdict, _ = run(pins, frame6(wrong, BR, ipv4_udp("192.0.2.0", 1000, SERVER, 53)), tmp_path)
    assert verdict == TC_ACT_SHOT
    stats = read_stats(str(pins))
    assert (stats["decapsulated"], stats["encapsulated"]) == (5, 5)
    assert (stats["drop_no_binding"], stats["drop_source_mismatch"]) == (1, 1)


def test_the_test_only_faults(load, tmp_path):
    drops = load(br_role(), "odd-port-drop")
    for sport in (1024, 1025):
        inner = ipv4_udp("192.0.2.0", sport, SERVER, 53)
        verdict, _ = run(drops, frame6(map_address_of(BMR, "192.0.2.0", sport), BR, inner), tmp_path)
        assert verdict == (TC_ACT_SHOT if sport & 1 else TC_ACT_OK)
    assert read_stats(str(drops))["fault_port_dropped"] == 1
    wrong = load(br_role(), "wrong-ce")
    next_ce = map_address_of(BMR, "192.0.2.0", 3072)  # PSID 1
    for dport, to in ((1024, map_address_of(BMR, "192.0.2.0", 1024)), (1025, next_ce)):
        verdict, out = run(wrong, frame4(ipv4_udp(SERVER, 53, "192.0.2.0", dport)), tmp_path)
        assert verdict == TC_ACT_OK and outer_of(out)[1] == to, "odd ports: the next CE (PSID + 1)"
    stats = read_stats(str(wrong))
    assert (stats["encapsulated"], stats["fault_wrong_ce"]) == (2, 1)
