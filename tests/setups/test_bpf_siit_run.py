"""The bpf backend's program on crafted frames through the kernel's BPF_PROG_TEST_RUN (`bpftool prog run`):
no namespace, no interface, the verifier of this kernel and the program's exact output.

Known answer: an IPv4 UDP datagram without a checksum (0, as Knot's XDP mode sends it) leaves as IPv6 with
a checksum that the independent sum here verifies over the IPv6 pseudo-header, 0xffff where the sum makes
it 0 (RFC 768), the payload untouched; the piece boundaries of the program's sum (256 bytes of UDP) and odd
tails are covered up to the longest datagram it sums (1536 bytes of UDP); one byte more is dropped and
counted, as is a UDP length beyond the IP packet. Needs root, bpftool and the built object; the program is
pinned under /sys/fs/bpf for the test and removed after.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from xlatbench.setups.backends.bpf import BpfBackend, config_value, hex_bytes, object_path, read_stats

pytestmark = [pytest.mark.root]

PREFIX = "64:ff9b::/96"
SERVER4, CLIENT4 = "203.0.113.56", "203.0.113.2"
TC_ACT_OK, TC_ACT_SHOT = 0, 2
LONGEST = 1536  # bytes of UDP the program sums (CSUM_CHUNK * CSUM_CHUNKS in siit.bpf.c)


def fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ones_sum(data: bytes) -> int:
    """The folded one's complement sum of 16-bit words (an odd tail padded with a zero byte)."""
    padded = data + b"\0" * (len(data) % 2)
    return fold(sum(struct.unpack(f"!{len(padded) // 2}H", padded)))


def embedded(address4: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6, PREFIX.split("/")[0])[:12] + socket.inet_aton(address4)


def pseudo6(length: int) -> bytes:
    return embedded(SERVER4) + embedded(CLIENT4) + struct.pack("!II", length, 17)


def reply_frame(size: int, checksum: str = "none", udp_length: int | None = None) -> bytes:
    """An Ethernet frame with Knot's reply (203.0.113.56:53 -> 203.0.113.2:40000) of `size` payload bytes.
    checksum: "none" (0), "ipv4" (a correct IPv4 one), "zero-in-ipv6" (none, and the last two payload
    bytes chosen so the IPv6 checksum computes to 0)."""
    payload = bytearray((i * 7 + size) % 251 for i in range(size))
    length = 8 + size
    header = struct.pack("!HHHH", 53, 40000, udp_length or length, 0)
    if checksum == "zero-in-ipv6":
        payload[-2:] = b"\0\0"
        total = fold(ones_sum(pseudo6(length)) + ones_sum(header + payload))
        payload[-2:] = struct.pack("!H", 0xFFFF - total)
    udp = header + bytes(payload)
    if checksum == "ipv4":
        pseudo4 = socket.inet_aton(SERVER4) + socket.inet_aton(CLIENT4) + struct.pack("!HH", 17, length)
        udp = udp[:6] + struct.pack("!H", (0xFFFF - ones_sum(pseudo4 + udp)) or 0xFFFF) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(SERVER4),
                     socket.inet_aton(CLIENT4))
    ip = ip[:10] + struct.pack("!H", 0xFFFF - ones_sum(ip)) + ip[12:]
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp


@pytest.fixture
def program() -> Iterator[Path]:
    """The pin directory of the loaded program, configured with the /96 prefix only."""
    backend = BpfBackend()
    if backend.unavailable():
        pytest.fail(backend.unavailable())  # not built is a failure: `make build` compiles the object
    if not Path("/sys/fs/bpf").is_dir():
        pytest.fail("/sys/fs/bpf is not mounted (mount -t bpf bpf /sys/fs/bpf)")
    pins = Path("/sys/fs/bpf") / f"xlatbench-test-{secrets.token_hex(4)}"
    try:
        subprocess.run(["bpftool", "prog", "loadall", str(object_path()), str(pins), "type", "classifier",
                        "pinmaps", str(pins / "maps")], check=True, capture_output=True, text=True)
        subprocess.run(["bpftool", "map", "update", "pinned", str(pins / "maps" / "siit_config"),
                        "key", *hex_bytes(bytes(4)), "value", *hex_bytes(config_value(PREFIX, None))],
                       check=True)
        yield pins
    finally:
        shutil.rmtree(pins, ignore_errors=True)


def run(pins: Path, frame: bytes, tmp_path: Path) -> tuple[int, bytes]:
    """The program's verdict and output frame for one input frame."""
    data_in, data_out = tmp_path / "in", tmp_path / "out"
    data_in.write_bytes(frame)
    done = subprocess.run(["bpftool", "prog", "run", "pinned", str(pins / "siit"), "data_in", str(data_in),
                           "data_out", str(data_out)], capture_output=True, text=True, check=True)
    verdict = int(done.stdout.split("Return value:")[1].split(",")[0])
    return verdict, data_out.read_bytes()


def translated_udp(out: bytes) -> bytes:
    """The UDP datagram of an IPv6 output frame, after checking its IPv6 header."""
    assert out[12:14] == b"\x86\xdd", "an IPv6 frame"
    ip6, udp = out[14:54], out[54:]
    assert ip6[6] == 17 and struct.unpack("!H", ip6[4:6])[0] == len(udp)
    assert ip6[8:40] == embedded(SERVER4) + embedded(CLIENT4)
    return udp


SIZES = [0, 1, 2, 3, 247, 248, 249, 503, 504, 505, 1000, 1451, 1472, LONGEST - 9, LONGEST - 8]


def test_a_missing_checksum_is_computed_over_the_ipv6_pseudo_header(program, tmp_path):
    for size in SIZES:
        frame = reply_frame(size)
        verdict, out = run(program, frame, tmp_path)
        assert verdict == TC_ACT_OK, size
        udp = translated_udp(out)
        assert udp[:6] + udp[8:] == frame[34:40] + frame[42:], f"{size}: only the checksum changed"
        assert udp[6:8] != b"\0\0" and ones_sum(pseudo6(len(udp)) + udp) == 0xFFFF, f"{size}: checksum"
    stats = read_stats(str(program))
    assert stats["udp_zero_checksum_computed"] == stats["translated_4to6"] == len(SIZES)


def test_a_computed_zero_goes_out_as_all_ones(program, tmp_path):
    for size in (2, 100, 1000):  # even: the last two bytes are one 16-bit word of the sum
        verdict, out = run(program, reply_frame(size, "zero-in-ipv6"), tmp_path)
        assert verdict == TC_ACT_OK
        assert translated_udp(out)[6:8] == b"\xff\xff", size
    assert read_stats(str(program))["udp_zero_checksum_computed"] == 3


def test_a_datagram_with_a_checksum_is_updated_not_recomputed(program, tmp_path):
    verdict, out = run(program, reply_frame(120, "ipv4"), tmp_path)
    assert verdict == TC_ACT_OK
    udp = translated_udp(out)
    assert ones_sum(pseudo6(len(udp)) + udp) == 0xFFFF
    stats = read_stats(str(program))
    assert (stats["translated_4to6"], stats["udp_zero_checksum_computed"]) == (1, 0)


def test_what_the_sum_does_not_cover_is_dropped_and_counted(program, tmp_path):
    assert run(program, reply_frame(LONGEST - 7), tmp_path)[0] == TC_ACT_SHOT  # 1537 bytes of UDP
    assert run(program, reply_frame(2000), tmp_path)[0] == TC_ACT_SHOT
    assert run(program, reply_frame(100, udp_length=200), tmp_path)[0] == TC_ACT_SHOT  # beyond the packet
    assert run(program, reply_frame(100, udp_length=7), tmp_path)[0] == TC_ACT_SHOT  # shorter than a header
    stats = read_stats(str(program))
    assert stats["drop_udp_zero_checksum"] == 2 and stats["drop_malformed"] == 2
    assert stats["translated_4to6"] == stats["udp_zero_checksum_computed"] == 0
