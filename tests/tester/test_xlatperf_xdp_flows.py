"""xlatperf --io xdp with flows beyond the socket limits, and with IPv6: known answers from a real knotd.

The veth pair into a Knot namespace (dnsperf/bench/xdplink.py). The flows' source addresses are not the
tester's: they come from a range (`--source 198.19.0.1-198.19.0.4,1024-63523`, 250 000 flows) that the server
namespace routes back via the tester's own address on the veth, so the server's kernel asks ARP / ND only for
that address, which the tester's kernel answers, and the replies reach the tester's interface, where its XDP
program takes them. No address of the range is assigned anywhere.

Known answers, each checked against what the server namespace counted itself (its nftables, and its
kernel's count of queries dropped at knotd's full socket buffer, UdpRcvbufErrors: with a quarter million
queries in a few seconds knotd's 208 KiB buffer overflows now and then; the tester must miss exactly those):
- every flow once, in sequence: valid == sent, and a dynamic nftables set of (source address, source port)
  filled in the server namespace holds exactly as many distinct pairs as there are flows;
- the RFC 4814 pseudorandom order with a given seed over the same flows, with a rule that drops exactly every
  7th query: valid == sent - sent/7, every flow still reached the server, the seed is in the JSON;
- the matching state stays at most 64 bytes per query in flight plus a fixed part, as the JSON says;
- IPv6 (the BR and PLAT single-DUT clients send IPv6): from the tester's own address, all valid; from a routed
  IPv6 range, an exact drop of every 50th query.
- any number of sources: the tester's address and 199 routed addresses, each its own `--source` with two
  port ranges (400 (address, port range) pairs; the reply filter once held 64): an exact drop of every 10th
  query, every flow reaching the server, and the filter's prefix keys as many as the standard library's CIDR
  summary of each port range gives;
- traffic that is not a reply to the tester reaches the tester's kernel during an AF_XDP trial: UDP from the
  server's address but another port, from another address but port 53, from the server's port 53 to a port
  outside the flows, and a TCP exchange (management traffic such as SSH); a kernel socket bound to one of the
  flows' ports gets only those datagrams, never a DNS reply;
- `--vlan 100`: this kernel has no 802.1Q devices, so the server's end of the veth is a VLAN end made of two
  tc programs (dnsperf/tests/vlan_tag.bpf.c): UDP must arrive tagged 100 (the tag is taken off) or is
  dropped, and UDP leaves tagged 100. With --vlan every query is valid; the same run untagged gets no answer.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdplink import (
    SERVER_V4,
    SERVER_V6,
    TESTER_V4,
    TESTER_V6,
    XdpLink,
    attached_program,
)

from xlatbench.paths import build_dir
from xlatbench.zones import KnotConfig, KnotServer

from .helpers import RELAXED_TIMING, Run, check_consistency
from .netns import in_netns
from .peer import udp_checksum

pytestmark = pytest.mark.root

FLOW_RANGE_V4 = "198.19.0.0/24"      # routed back via TESTER_V4, assigned nowhere
FLOW_RANGE_V6 = "fd00:78::/64"       # routed back via TESTER_V6
ADDRESSES_V4 = "198.19.0.1-198.19.0.4"
PORTS = "1024-63523"                 # 62 500 ports per address
FLOWS = 4 * 62_500
RATE_QPS = 30_000  # well inside one knotd worker's capacity, so the server itself drops nothing


@pytest.fixture
def routed(link: XdpLink) -> XdpLink:
    """The server namespace routes the flow ranges back via the tester's addresses on the veth."""
    for argv in (("ip", "route", "add", FLOW_RANGE_V4, "via", TESTER_V4),
                 ("ip", "-6", "route", "add", FLOW_RANGE_V6, "via", TESTER_V6)):
        subprocess.run(link.inside(*argv), check=True, capture_output=True, text=True)
    return link


@pytest.fixture
def knot(routed: XdpLink, tmp_path: Path) -> Iterator[KnotServer]:
    # knotd on CPU 1, the tester on CPU 0: a knotd sharing the tester's CPU drops queries at its socket.
    config = KnotConfig(listen=((SERVER_V4, 53), (SERVER_V6, 53)), cpus=(1,))
    with KnotServer(tmp_path / "knot", config, netns=routed.netns) as server:
        yield server


def nft(link: XdpLink, family: str, drop_every: int | None) -> None:
    """A table in the server namespace: a set of every (source address, port) that sent to port 53, and
    optionally a rule dropping exactly every `drop_every`-th of those queries (after the set took it)."""
    key, saddr = ("ipv4_addr", "ip saddr") if family == "ip" else ("ipv6_addr", "ip6 saddr")
    drop = f"udp dport 53 numgen inc mod {drop_every} == 0 counter drop\n" if drop_every else ""
    rules = (
        f"table {family} xlbflows {{\n"
        f"set seen {{\ntype {key} . inet_service\nsize 1048576\nflags dynamic\n}}\n"
        "chain input {\n"
        "type filter hook input priority 0; policy accept;\n"
        f"udp dport 53 add @seen {{ {saddr} . udp sport }}\n"
        f"{drop}"
        "}\n"
        "}\n"
    )
    subprocess.run(link.inside("nft", "-f", "-"), input=rules, text=True, check=True, capture_output=True)


def nft_counts(link: XdpLink, family: str) -> tuple[int, list[int]]:
    """Distinct (address, port) pairs in the set, and the drop rule's counter (if any)."""
    listed = json.loads(subprocess.run(link.inside("nft", "-j", "list", "table", family, "xlbflows"),
                                       capture_output=True, text=True, check=True).stdout)["nftables"]
    elements = [len(entry["set"].get("elem", [])) for entry in listed if "set" in entry]
    counters = [item["counter"]["packets"] for entry in listed if "rule" in entry
                for item in entry["rule"]["expr"] if "counter" in item]
    return sum(elements), counters


def run_flows(run_xlatperf, link: XdpLink, server: str, source: str, flows: int, queries: int, rate: int,
              *extra: str) -> Run:
    return run_xlatperf("--server", server, "--source", source, "--ports-per-thread", str(flows),
                        "--rate", str(rate), "--queries", str(queries), "--io", "xdp",
                        "--xdp-interface", link.outer, "--sender-cpus", "0", "--receiver-cpus", "0",
                        "--quiet", *RELAXED_TIMING, *extra, timeout_s=60)


def knot_socket_drops(link: XdpLink) -> int:
    """Queries the server namespace's kernel dropped at knotd's full socket buffer so far (UDP and UDPv6
    RcvbufErrors): the server's own count, which the tester must find lost too."""
    out = subprocess.run(link.inside("nstat", "-az", "UdpRcvbufErrors", "Udp6RcvbufErrors"),
                         capture_output=True, text=True, check=True).stdout
    return sum(int(line.split()[1]) for line in out.splitlines() if line.split()[0].endswith("RcvbufErrors"))


def measured(link: XdpLink, run) -> tuple[Run, int]:
    """A run and the queries knotd's socket dropped during it (the server kernel's own count)."""
    before = knot_socket_drops(link)
    result = run()
    return result, knot_socket_drops(link) - before


def check_run(run: Run, validator, sent: int, valid: int, flows: int, server_dropped: int = 0) -> dict:
    """`valid` is what the server answers when only the test's own rule drops; queries the server's
    kernel dropped at knotd's socket (`server_dropped`, its own counter) must be missing as well."""
    assert server_dropped <= sent // 50, f"knotd's socket dropped {server_dropped} of {sent} queries"
    valid -= server_dropped
    assert run.returncode == 0, run.stderr
    result = run.result
    assert result is not None, run.stderr
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    shown = f"{json.dumps(totals)}; knotd socket drops {server_dropped}"
    assert totals["sent"] == sent, shown
    assert totals["valid"] == valid, shown
    assert totals["unanswered"] == sent - valid, shown
    for bucket in ("late", "malformed", "unexpected", "duplicate", "nodata", "truncated",
                   "tester_receive_drops", "unbound_queue_replies"):
        assert totals[bucket] == 0, f"{bucket}: {shown}"
    io = result["io"]
    assert io["flows"] == flows
    assert all(n == 0 for n in io["frame_errors"].values()), json.dumps(io)
    matching = io["matching"]
    assert matching["flows"] == flows
    # At most 64 B per query in flight (plus 64 B per query of a batch), and a fixed part that does not
    # grow with the flows (the sources' table, a few hundred bytes a source): a list of 250 000 flows alone
    # would take megabytes.
    batch = result["config"]["batch"]
    assert matching["bytes"] <= 64 * matching["in_flight_queries"] + 64 * batch, json.dumps(matching)
    sources = len(result["config"]["sources"])
    assert matching["fixed_bytes"] < 12_288 + 1024 * sources, json.dumps(matching)
    assert result["threads"][0]["ports"] == []
    return result


@pytest.mark.slow  # hundreds of thousands of flows: the sanitizer stage leaves it out
def test_a_quarter_million_flows_in_sequence_all_valid_each_reaching_the_server(routed, knot, run_xlatperf,
                                                                               validator):
    nft(routed, "ip", None)
    source = f"{ADDRESSES_V4},{PORTS}"
    run, dropped = measured(routed, lambda: run_flows(run_xlatperf, routed, SERVER_V4, source, FLOWS, FLOWS,
                                                      RATE_QPS))
    result = check_run(run, validator, FLOWS, FLOWS, FLOWS, dropped)
    assert result["io"]["flow_order"]["order"] == "sequential"
    assert len(result["config"]["sources"]) == 4
    distinct, _ = nft_counts(routed, "ip")
    assert distinct == FLOWS


@pytest.mark.slow  # hundreds of thousands of flows: the sanitizer stage leaves it out
def test_the_pseudorandom_order_reaches_every_flow_and_an_exact_drop_is_counted(routed, knot, run_xlatperf,
                                                                                validator):
    nft(routed, "ip", 7)
    queries = 210_000  # a multiple of 7: numgen counts from 0, so exactly queries / 7 are dropped
    flows = 200_000
    source = f"{ADDRESSES_V4},{PORTS}"
    run, dropped = measured(routed, lambda: run_flows(run_xlatperf, routed, SERVER_V4, source, flows, queries,
                                                      RATE_QPS, "--flow-order", "pseudorandom", "--flow-seed",
                                                      "4814"))
    result = check_run(run, validator, queries, queries - queries // 7, flows, dropped)
    assert result["io"]["flow_order"] == {"order": "pseudorandom", "seed": 4814}
    assert result["config"]["flow_seed"] == 4814
    distinct, dropped = nft_counts(routed, "ip")
    assert distinct == flows
    assert dropped == [queries // 7]


def test_ipv6_from_the_testers_own_address_is_all_valid(routed, knot, run_xlatperf, validator):
    run = run_flows(run_xlatperf, routed, SERVER_V6, f"{TESTER_V6},20000-20999", 1000, 5000, 2000)
    result = check_run(run, validator, 5000, 5000, 1000)
    assert result["io"]["xdp_mode"] == "native"
    assert result["totals"]["checksum_errors"] == 0


def test_ipv6_from_a_routed_range_counts_an_exact_drop(routed, knot, run_xlatperf, validator):
    nft(routed, "ip6", 50)
    queries = 40_000
    flows = 2 * 10_000
    run, dropped = measured(routed, lambda: run_flows(run_xlatperf, routed, SERVER_V6,
                                                      "fd00:78::1-fd00:78::2,30000-39999", flows, queries,
                                                      RATE_QPS // 2, "--flow-order", "pseudorandom"))
    result = check_run(run, validator, queries, queries - queries // 50, flows, dropped)
    assert result["io"]["flow_order"]["seed"] > 0  # drawn, and recorded
    distinct, dropped = nft_counts(routed, "ip6")
    assert distinct == flows
    assert dropped == [queries // 50]


# The tester's own address and 199 routed ones, each a --source of its own with 10 ports in two ranges.
OWN_PORTS = (20000, 20009)
ROUTED_RANGES = ((30000, 30004), (30010, 30014))
ROUTED_ADDRESSES = [f"198.19.0.{i}" for i in range(1, 200)]
MANY_FLOWS = 10 * (1 + len(ROUTED_ADDRESSES))


def many_sources() -> list[str]:
    args = ["--source", f"{TESTER_V4},{OWN_PORTS[0]}-{OWN_PORTS[1]}"]
    ranges = ",".join(f"{first}-{last}" for first, last in ROUTED_RANGES)
    for address in ROUTED_ADDRESSES:
        args += ["--source", f"{address},{ranges}"]
    return args


def blocks(first: int, last: int) -> int:
    """Aligned power-of-two blocks that cover ports first..last: the standard library's CIDR summary of the
    IPv4 addresses numbered as the ports (independent of the tester's code)."""
    return len(list(ipaddress.summarize_address_range(ipaddress.IPv4Address(first),
                                                      ipaddress.IPv4Address(last))))


def test_two_hundred_sources_with_two_ranges_each_count_an_exact_drop(routed, knot, run_xlatperf, validator):
    nft(routed, "ip", 10)
    queries = 10_000  # five rounds of the 2 000 flows; a multiple of 10, so exactly queries / 10 dropped
    run, dropped = measured(routed, lambda: run_xlatperf(
        "--server", SERVER_V4, *many_sources(), "--ports-per-thread", str(MANY_FLOWS), "--rate", "5000",
        "--queries", str(queries), "--io", "xdp", "--xdp-interface", routed.outer, "--sender-cpus", "0",
        "--receiver-cpus", "0", "--quiet", *RELAXED_TIMING, timeout_s=60))
    result = check_run(run, validator, queries, queries - queries // 10, MANY_FLOWS, dropped)
    assert len(result["config"]["sources"]) == 1 + len(ROUTED_ADDRESSES)
    keys = blocks(*OWN_PORTS) + len(ROUTED_ADDRESSES) * sum(blocks(*r) for r in ROUTED_RANGES)
    assert result["io"]["program"]["filter_keys"] == keys == 2 + 199 * (2 + 3)
    assert result["io"]["program"]["redirected"] == result["totals"]["received"]
    distinct, counters = nft_counts(routed, "ip")
    assert distinct == MANY_FLOWS
    assert counters == [queries // 10]


OTHER_SERVER_V4 = "198.18.77.4"  # a second address of the server namespace: another source


def udp(bound: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(bound)
    sock.settimeout(5)
    return sock


def raw_udp(source: tuple[str, int], destination: tuple[str, int], data: bytes) -> bytes:
    """A UDP header (with its checksum) and data, for an IPPROTO_UDP raw socket."""
    length = 8 + len(data)
    checksum = udp_checksum(source[0], destination[0], source[1], destination[1], data)
    return struct.pack("!HHHH", source[1], destination[1], length, checksum) + data


def tcp_exchange(client: socket.socket, conn: socket.socket, rounds: int = 8, size: int = 8192) -> None:
    """Blocks of `size` bytes from the client, echoed back: what a management session sends."""
    for n in range(rounds):
        block = bytes([n]) * size
        client.sendall(block)
        got = b""
        while len(got) < size:
            got += conn.recv(size - len(got))
        conn.sendall(got)
        back = b""
        while len(back) < size:
            back += client.recv(size - len(back))
        assert back == block


def exchange_other_traffic(link: XdpLink, at_flow: socket.socket, outside: socket.socket,
                           listener: socket.socket) -> None:
    """From the server namespace to the tester's kernel sockets: everything must arrive (and be answered)."""
    with in_netns(link.netns):
        other_port = udp((SERVER_V4, 5353))
        other_source = udp((OTHER_SERVER_V4, 53))
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        raw.bind((SERVER_V4, 0))
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    flow_port, outside_port = at_flow.getsockname()[1], outside.getsockname()[1]
    with other_port, other_source, raw, client:
        # From the server's address but another port, to a flow's port; and an answer back.
        other_port.sendto(b"another port", (TESTER_V4, flow_port))
        assert at_flow.recvfrom(100) == (b"another port", (SERVER_V4, 5353))
        at_flow.sendto(b"answer", (SERVER_V4, 5353))
        assert other_port.recvfrom(100) == (b"answer", (TESTER_V4, flow_port))
        # From another address, from port 53, to a flow's port.
        other_source.sendto(b"another source", (TESTER_V4, flow_port))
        assert at_flow.recvfrom(100) == (b"another source", (OTHER_SERVER_V4, 53))
        # From the server's address and port 53 to a port outside the flows.
        raw.sendto(raw_udp((SERVER_V4, 53), (TESTER_V4, outside_port), b"outside"), (TESTER_V4, 0))
        assert outside.recvfrom(100) == (b"outside", (SERVER_V4, 53))
        client.settimeout(5)
        client.connect((TESTER_V4, listener.getsockname()[1]))
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            tcp_exchange(client, conn)


def test_traffic_not_for_the_tester_reaches_its_kernel_during_a_trial(routed, knot, xlatperf, tmp_path,
                                                                      validator):
    subprocess.run(routed.inside("ip", "addr", "add", f"{OTHER_SERVER_V4}/24", "dev", routed.inner),
                   check=True, capture_output=True)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((TESTER_V4, 0))
    listener.listen(1)
    listener.settimeout(5)
    out = tmp_path / "trial.json"
    argv = [str(xlatperf), "--server", SERVER_V4, *many_sources(), "--ports-per-thread", str(MANY_FLOWS),
            "--rate", "2000", "--queries", "8000", "--io", "xdp", "--xdp-interface", routed.outer, "--quiet",
            *RELAXED_TIMING, "--json", str(out)]
    knot_drops_before = knot_socket_drops(routed)
    with udp((TESTER_V4, 20005)) as at_flow, udp((TESTER_V4, 40000)) as outside, listener:
        with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            deadline = time.monotonic() + 10
            while attached_program(routed.outer) is None and proc.poll() is None:
                assert time.monotonic() < deadline, "xlatperf never attached its program"
                time.sleep(0.05)
            time.sleep(0.5)  # replies are flowing now
            exchange_other_traffic(routed, at_flow, outside, listener)
            assert proc.poll() is None, "the exchanges must happen while the trial runs"
            _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        # Not one of the DNS replies to flow port 20005 (one a round) reached the kernel socket bound to it.
        at_flow.setblocking(False)
        with pytest.raises(BlockingIOError):
            at_flow.recvfrom(100)
    knot_dropped = knot_socket_drops(routed) - knot_drops_before
    result = json.loads(out.read_text())
    validator.validate(result)
    check_consistency(result)
    totals, io = result["totals"], result["io"]
    assert totals["sent"] == 8000
    assert totals["valid"] == 8000 - knot_dropped
    assert io["program"]["redirected"] == totals["received"]
    assert io["program"]["passed"] >= 3 + 8  # the three datagrams and at least the TCP data segments


def vlan_end(link: XdpLink) -> None:
    """The server's veth end takes VLAN 100 off arriving UDP (dropping untagged UDP) and tags leaving UDP;
    with tx VLAN offload off, the tag is in the frame's bytes, where the tester's XDP program sees it."""
    objects = build_dir() / "dnsperf"
    for argv in (("ethtool", "-K", link.inner, "txvlan", "off"),
                 ("tc", "qdisc", "add", "dev", link.inner, "clsact"),
                 ("tc", "filter", "add", "dev", link.inner, "ingress", "bpf", "da", "obj",
                  str(objects / "vlan_untag.bpf.o"), "sec", "tc"),
                 ("tc", "filter", "add", "dev", link.inner, "egress", "bpf", "da", "obj",
                  str(objects / "vlan_tag.bpf.o"), "sec", "tc")):
        subprocess.run(link.inside(*argv), check=True, capture_output=True, text=True)


def test_vlan_frames_are_tagged_and_tagged_replies_taken(routed, knot, run_xlatperf, validator):
    vlan_end(routed)
    args = ("--server", SERVER_V4, "--source", f"{TESTER_V4},20000-20063", "--ports-per-thread", "64",
            "--rate", "2000", "--queries", "4000", "--io", "xdp", "--xdp-interface", routed.outer, "--quiet",
            *RELAXED_TIMING)
    result = check_run(run_xlatperf(*args, "--vlan", "100"), validator, 4000, 4000, 64)
    assert result["io"]["vlan"] == 100 and result["config"]["vlan"] == 100
    assert result["io"]["program"]["redirected"] == 4000
    untagged = run_xlatperf(*args)
    assert untagged.returncode == 0, untagged.stderr
    assert untagged.result["totals"]["sent"] == 4000
    assert untagged.result["totals"]["valid"] == 0
    assert untagged.result["io"]["vlan"] == 0
