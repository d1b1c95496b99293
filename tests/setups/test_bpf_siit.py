"""The bpf backend's translator on its own, with every checksum checked by the receiving kernel.

Two namespaces joined by a veth pair: `client` (192.0.2.1) and `dut1`, a CLAT rendered by BpfBackend (EAM
192.0.2.1 = 2001:db8:2::1, prefix 64:ff9b::/96) that also owns 64:ff9b::c633:6407 (198.51.100.7 behind the
prefix), so the translated packets end in dut1's own sockets and the replies go back through the translator.
Every interface on the path has tx (and rx) checksum offload off, so packets carry full checksums that the
receiving kernel verifies (NOTES: with tx offload on, CHECKSUM_PARTIAL would hide a translator's error). A
control datagram with a wrong checksum shows that the receiver notices one. Needs root, bpftool and the
built object.
"""

from __future__ import annotations

import secrets
import string
import subprocess
import sys
from collections.abc import Iterator

import pytest

from xlatbench.setups.backends import RenderContext
from xlatbench.setups.backends.bpf import BpfBackend, read_stats
from xlatbench.setups.emulation import down, leftovers
from xlatbench.setups.emulation.names import netns_name, rundir
from xlatbench.setups.steps import Cmd, Step
from xlatbench.setups.topology import Clat, Host
from xlatbench.setups.transports import Netns

pytestmark = [pytest.mark.root]

CLIENT4, SERVER4, SERVER6, CLIENT6 = "192.0.2.1", "198.51.100.7", "64:ff9b::c633:6407", "2001:db8:2::1"
PORT = 5353

ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(3)
print("ready", flush=True)
try:
    while True:
        data, peer = s.recvfrom(65535)
        print(peer[0], len(data), flush=True)
        s.sendto(data[::-1], peer)
except socket.timeout:
    pass
"""

SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER = IP_PMTUDISC_DONT: large datagrams fragment
s.settimeout(1)
for size in map(int, sys.argv[3:]):
    payload = bytes((i * 7 + size) % 251 for i in range(size))
    s.sendto(payload, (sys.argv[1], int(sys.argv[2])))
    try:
        data, peer = s.recvfrom(65535)
        print(size, peer[0], data == payload[::-1], flush=True)
    except socket.timeout:
        print(size, "timeout", False, flush=True)
"""

# ICMP echo through a ping socket: the kernel checks the reply's checksum before handing it over.
PING = """
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
s.settimeout(1)
for seq in range(1, 4):
    payload = bytes(range(seq, seq + 57))
    s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, seq) + payload, (sys.argv[1], 0))
    data, peer = s.recvfrom(65535)
    print(peer[0], data[0], struct.unpack("!H", data[6:8])[0], data[8:] == payload, flush=True)
"""

BAD_CHECKSUM = """
import socket, struct, sys
payload = b"wrong checksum"
header = struct.pack("!HHHH", 4000, int(sys.argv[2]), 8 + len(payload), 0x1234)
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
s.sendto(header + payload, (sys.argv[1], 0))
"""


def counters(netns: str, path: str, names: tuple[str, ...]) -> dict[str, int]:
    """Named counters of /proc/net/snmp (two-line tables) or /proc/net/snmp6 (name value lines)."""
    text = subprocess.run(["ip", "netns", "exec", netns, "cat", path], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    values: dict[str, int] = {}
    if path.endswith("snmp6"):
        for line in text:
            key, value = line.split()
            values[key] = int(value)
    else:
        for head, row in zip(text[::2], text[1::2], strict=True):
            table = head.split(":")[0]
            for key, value in zip(head.split()[1:], row.split()[1:], strict=True):
                values[f"{table}{key}"] = int(value)
    return {n: values[n] for n in names}


def csum_errors(client: str, dut: str) -> dict[str, int]:
    return {
        **counters(client, "/proc/net/snmp", ("UdpInCsumErrors", "IcmpInCsumErrors")),
        **counters(dut, "/proc/net/snmp6", ("Udp6InCsumErrors", "Icmp6InCsumErrors")),
    }


@pytest.fixture
def siit() -> Iterator[tuple[str, str, str]]:
    """(client netns, dut netns, pin directory) of a CLAT made by BpfBackend; taken down afterwards."""
    prefix = "xbf" + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(4))
    client, dut = netns_name(prefix, "client"), netns_name(prefix, "dut1")
    run = rundir(prefix)
    run.mkdir(parents=True, exist_ok=True)
    ctx = RenderContext(world="netns", rundir=str(run), prefix=prefix)
    backend = BpfBackend()
    if backend.unavailable():
        pytest.fail(backend.unavailable())  # not built is a failure: `make build` compiles the object
    role = Clat(pool6="64:ff9b::/96", eam=((CLIENT4, CLIENT6),), ipv4_interface="r0", ipv6_interface="lo")
    outer, inner = backend.devices(ctx)
    offload_off = [Cmd(("ethtool", "-K", dev, "tx", "off", "rx", "off")) for dev in (outer, inner)]
    plan: list[tuple[str | None, Step]] = [
        (None, Cmd(("ip", "netns", "add", client))),
        (None, Cmd(("ip", "netns", "add", dut))),
        (None, Cmd(("ip", "-n", client, "link", "add", "l0", "type", "veth", "peer", "name", "r0",
                    "netns", dut))),
        *[(None, s) for s in backend.machine_steps(ctx)],
        *[("client", Cmd(tuple(line.split()))) for line in (
            "ip link set lo up", f"ip address add {CLIENT4}/24 dev l0", "ip link set l0 up",
            "ethtool -K l0 tx off rx off", "ip route add default via 192.0.2.254")],
        ("client", Cmd(("sysctl", "-qw", "net.ipv4.ping_group_range=0 0"))),  # root may use ping sockets
        *[("dut1", Cmd(tuple(line.split()))) for line in (
            "ip link set lo up", "sysctl -qw net.ipv6.conf.all.accept_dad=0",
            "sysctl -qw net.ipv6.conf.default.accept_dad=0", "sysctl -qw net.ipv4.conf.all.rp_filter=0",
            "sysctl -qw net.ipv4.conf.default.rp_filter=0", "sysctl -qw net.ipv4.conf.all.forwarding=1",
            "sysctl -qw net.ipv6.conf.all.forwarding=1", f"ip -6 address add {SERVER6}/128 dev lo",
            "ip address add 192.0.2.254/24 dev r0", "ip link set r0 up", "ethtool -K r0 tx off rx off")],
        *[("dut1", s) for s in backend.render(role, Host("dut1", (role,)), ctx)],
        *[("dut1", s) for s in offload_off],
    ]
    transport = Netns({"client": client, "dut1": dut})
    try:
        for host, step in plan:
            transport.run(host, step)
        yield client, dut, backend.pins("dut1", ctx)
    finally:
        down(prefix)
        assert leftovers(prefix) == []


def echo_server(dut: str) -> subprocess.Popen[str]:
    server = subprocess.Popen(["ip", "netns", "exec", dut, sys.executable, "-c", ECHO, SERVER6, str(PORT)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    return server


def send(client: str, sizes: list[int]) -> list[str]:
    done = subprocess.run(["ip", "netns", "exec", client, sys.executable, "-c", SEND, SERVER4, str(PORT),
                           *map(str, sizes)], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()


def test_udp_and_echo_translated_both_ways_with_valid_checksums(siit: tuple[str, str, str]) -> None:
    client, dut, pins = siit
    before = csum_errors(client, dut)
    server = echo_server(dut)
    sizes = [0, 1, 2, 3, 17, 512, 1000, 1451]
    replies = send(client, sizes)
    seen, _ = server.communicate(timeout=10)
    assert replies == [f"{size} {SERVER4} True" for size in sizes], "every datagram came back, reversed"
    assert seen.splitlines() == [f"{CLIENT6} {size}" for size in sizes], "the EAM source reached the server"
    ping = subprocess.run(["ip", "netns", "exec", client, sys.executable, "-c", PING, SERVER4],
                          capture_output=True, text=True, timeout=30, check=False)
    assert ping.stdout.splitlines() == [f"{SERVER4} 0 {seq} True" for seq in (1, 2, 3)], ping.stderr
    assert csum_errors(client, dut) == before, "no checksum error at either receiving kernel"
    stats = read_stats(pins, dut)
    assert stats["translated_4to6"] == len(sizes) + 3
    assert stats["translated_6to4"] == len(sizes) + 3
    # The host's own MLD reports on the translator's device are multicast, counted apart.
    assert {k: v for k, v in stats.items() if k.startswith("drop_") and k != "drop_multicast" and v} == {}


def test_a_wrong_checksum_would_be_seen(siit: tuple[str, str, str]) -> None:
    """Control: the receiving kernel counts a wrong UDP checksum (translated unchanged, still wrong)."""
    client, dut, pins = siit
    server = echo_server(dut)
    before = csum_errors(client, dut)["Udp6InCsumErrors"]
    subprocess.run(["ip", "netns", "exec", client, sys.executable, "-c", BAD_CHECKSUM, SERVER4, str(PORT)],
                   check=True, timeout=10)
    seen, _ = server.communicate(timeout=10)
    assert seen == ""
    assert csum_errors(client, dut)["Udp6InCsumErrors"] == before + 1
    assert read_stats(pins, dut)["translated_4to6"] == 1


def test_fragments_are_dropped_and_counted(siit: tuple[str, str, str]) -> None:
    client, dut, pins = siit
    server = echo_server(dut)
    assert send(client, [3000]) == ["3000 timeout False"]
    server.communicate(timeout=10)
    stats = read_stats(pins, dut)
    # 3008 bytes of UDP in 1480-byte fragments on a 1500-byte MTU: three fragments.
    assert stats["drop_fragment"] == 3
    assert stats["translated_4to6"] == 0



# IPv4 UDP without a checksum (0, as Knot's XDP mode sends it), from a raw socket with the source port of an
# ordinary socket that receives the (kernel-checksummed) replies. "zero" sizes make the IPv6 checksum come out
# as 0, which must go out as 0xffff (RFC 768): the IPv6 receiver drops a 0.
ZERO_CHECKSUM = """
import socket, struct, sys
server4, port, client6, server6 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 0))
rx.settimeout(1)
sport = rx.getsockname()[1]
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
raw.setsockopt(socket.IPPROTO_IP, 10, 0)

def fold(total):
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return total

def words(data):
    data += b"\\0" * (len(data) % 2)
    return sum(struct.unpack(f"!{len(data) // 2}H", data))

for spec in sys.argv[5:]:
    size = int(spec.rstrip("z"))
    payload = bytearray((i * 13 + size) % 251 for i in range(size))
    header = struct.pack("!HHHH", sport, port, 8 + size, 0)
    if spec.endswith("z"):  # the last two bytes make the IPv6 one's complement sum 0xffff: checksum 0
        payload[-2:] = b"\\0\\0"
        pseudo = socket.inet_pton(socket.AF_INET6, client6) + socket.inet_pton(socket.AF_INET6, server6)
        pseudo += struct.pack("!II", 8 + size, 17)
        payload[-2:] = struct.pack("!H", 0xffff - fold(words(pseudo) + words(header + bytes(payload))))
    raw.sendto(header + bytes(payload), (server4, 0))
    try:
        data, peer = rx.recvfrom(65535)
        print(spec, peer[0], data == bytes(payload)[::-1], flush=True)
    except socket.timeout:
        print(spec, "timeout", False, flush=True)
"""


def raise_mtu(client: str, dut: str, mtu: int) -> None:
    """Every link of the path carries `mtu` bytes unfragmented (the translator's veth pair included)."""
    subprocess.run(["ip", "-n", client, "link", "set", "l0", "mtu", str(mtu)], check=True)
    links = subprocess.run(["ip", "-n", dut, "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    siit = [line.split(": ")[1].split("@")[0] for line in links.splitlines() if "-siit" in line]
    for name in ["r0", *siit]:
        subprocess.run(["ip", "-n", dut, "link", "set", name, "mtu", str(mtu)], check=True)


def test_a_missing_ipv4_udp_checksum_is_computed_for_ipv6(siit: tuple[str, str, str]) -> None:
    """Known answer: the receiving IPv6 kernel delivers a datagram only if its checksum is right (and not 0),
    so every size must reach the server; the piece boundaries of the program's sum (256 bytes) and odd tails
    are covered, the largest it sums (1536 bytes of UDP) too, and the next byte is dropped and counted."""
    client, dut, pins = siit
    raise_mtu(client, dut, 1600)
    before = csum_errors(client, dut)
    server = echo_server(dut)
    computed = ["0", "1", "2z", "3", "17", "100z", "247", "248", "249", "503", "504", "505", "1000z", "1451",
                "1527", "1528"]
    done = subprocess.run(["ip", "netns", "exec", client, sys.executable, "-c", ZERO_CHECKSUM, SERVER4,
                           str(PORT), CLIENT6, SERVER6, *computed, "1529"],
                          capture_output=True, text=True, timeout=60, check=True)
    seen, _ = server.communicate(timeout=10)
    want = [f"{spec} {SERVER4} True" for spec in computed]
    assert done.stdout.splitlines() == [*want, "1529 timeout False"]
    assert seen.splitlines() == [f"{CLIENT6} {spec.rstrip('z')}" for spec in computed]
    assert csum_errors(client, dut) == before, "no checksum error at either receiving kernel"
    stats = read_stats(pins, dut)
    assert stats["udp_zero_checksum_computed"] == len(computed)
    assert stats["translated_4to6"] == len(computed)
    assert stats["translated_6to4"] == len(computed)
    assert stats["drop_udp_zero_checksum"] == 1, "1537 bytes of UDP: longer than the program sums"
