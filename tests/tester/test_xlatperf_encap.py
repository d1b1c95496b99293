"""xlatperf --io xdp --encap map-e end to end: the tester plays 8 CEs against a self-contained BR peer.

The veth pair of dnsperf/bench/xdplink.py; in its server namespace the BR's address 2001:db8:6::1 and a
Python BR (encap_br_peer.py) on an AF_PACKET socket that checks each query's outer source against the MAP
address setups/mapt.py gives for its inner source and port (independent of the tester's C++), answers the
DNS query itself and encapsulates the reply back. 8 CEs of the reference document's rule x the last 64 ports
of each set = 512 flows, 2048 queries (4 whole rounds of the RFC 4814 pseudorandom order), so every flow
takes exactly 4 queries. Known answers: every query valid and every outer source right; a BR that takes the
first 32 of those 64 ports for outside the port set drops exactly half (1024), and the tester loses exactly
those; a BR that encapsulates every 10th reply to the next CE makes the tester count exactly 204 wrong-CE
replies (io.encap.wrong_ce) and match none of them. The same for 8 lw4o6 subscribers (the peer checks the
binding with setups/lw4o6.py) with every 8th reply to the next subscriber: exactly 256 wrong-CE replies.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdplink import SERVER_V4, XdpLink, attached_program

pytestmark = pytest.mark.root

PEER = Path(__file__).with_name("encap_br_peer.py")
RULE = "2001:db8:ce::/51,192.0.2.0/24,13,0"
BR = "2001:db8:6::1"
CES, PORTS, QUERIES = 8, 64, 2048


@pytest.fixture
def br_link(link: XdpLink) -> Iterator[XdpLink]:
    """The BR's address on the server end (the kernel there drops IPv4-in-IPv6: it has no tunnel)."""
    subprocess.run(link.inside("ip", "-6", "addr", "add", f"{BR}/64", "dev", link.inner, "nodad"), check=True)
    rules = ("table ip6 xlbbr {\nchain input {\ntype filter hook input priority 0; policy accept;\n"
             "meta l4proto 4 drop\n}\n}\n")
    subprocess.run(link.inside("nft", "-f", "-"), input=rules, text=True, check=True)
    subprocess.run(["ip", "-6", "route", "add", "2001:db8:6::/64", "dev", link.outer], check=True)
    yield link  # the route goes with the veth


def run_with_peer(link: XdpLink, run_xlatperf, *peer_args: str, mode: str = "map-e", rule: str = RULE):
    lw4o6 = ("--lw4o6",) if mode == "lw4o6" else ()
    peer = subprocess.Popen(link.inside(sys.executable, str(PEER), "--interface", link.inner, "--rule", rule,
                                        "--br", BR, *lw4o6, *peer_args), stdout=subprocess.PIPE, text=True)
    try:
        assert peer.stdout is not None and peer.stdout.readline().strip() == "ready"
        run = run_xlatperf("--server", SERVER_V4, "--io", "xdp", "--xdp-interface", link.outer,
                           "--encap", mode, "--encap-rule", rule, "--encap-ces", str(CES),
                           "--encap-ports", str(PORTS), "--encap-br", BR, "--flow-order", "pseudorandom",
                           "--rate", "1000", "--queries", str(QUERIES), "--max-lag", "0.5", "--quiet")
    finally:
        peer.send_signal(signal.SIGTERM)
        out, _ = peer.communicate(timeout=10)
    assert attached_program(link.outer) is None
    assert run.returncode == 0, run.stderr
    assert run.result is not None, run.stderr
    return run.result, json.loads(out.strip().splitlines()[-1])


def check_common(result: dict, validator, peer: dict) -> dict:
    validator.validate(result)
    totals, io = result["totals"], result["io"]
    assert totals["sent"] == QUERIES and io["frames_sent"] == QUERIES
    assert io["flows"] == CES * PORTS
    assert io["encap"]["ces"] == CES and io["encap"]["ports_per_ce"] == PORTS and io["encap"]["br"] == BR
    assert peer["received"] == QUERIES and peer["bad_source"] == 0, peer  # every outer source the MAP address
    for bucket in ("late", "malformed", "unexpected", "duplicate", "nodata", "truncated"):
        assert totals[bucket] == 0, f"{bucket}: {json.dumps(totals)}"
    errors = {k: v for k, v in io["frame_errors"].items() if k != "wrong_ce"}
    assert all(n == 0 for n in errors.values()), json.dumps(io)
    return io


def test_every_encapsulated_query_is_answered_valid(br_link, run_xlatperf, validator):
    result, peer = run_with_peer(br_link, run_xlatperf)
    io = check_common(result, validator, peer)
    assert result["totals"]["valid"] == QUERIES, json.dumps(result["totals"])
    assert io["encap"]["wrong_ce"] == 0 and io["frame_errors"]["wrong_ce"] == 0
    assert io["program"]["redirected"] == QUERIES


def test_a_br_dropping_ports_outside_its_set_loses_exactly_those(br_link, run_xlatperf, validator):
    # The set is 2048 ports; the tester sends from its last 64 (indices 1984..2047); the BR takes the
    # first 2016 for outside: indices 1984..2015, half the flows, so exactly half the queries.
    result, peer = run_with_peer(br_link, run_xlatperf, "--drop-below", "2016")
    check_common(result, validator, peer)
    assert peer["dropped_port"] == QUERIES // 2
    assert result["totals"]["valid"] == QUERIES // 2, json.dumps(result["totals"])


def test_replies_encapsulated_to_the_wrong_ce_are_counted_as_such(br_link, run_xlatperf, validator):
    result, peer = run_with_peer(br_link, run_xlatperf, "--wrong-ce-every", "10")
    io = check_common(result, validator, peer)
    assert peer["wrong_ce_sent"] == QUERIES // 10
    assert io["encap"]["wrong_ce"] == QUERIES // 10 == io["frame_errors"]["wrong_ce"]
    assert result["totals"]["valid"] == QUERIES - QUERIES // 10, json.dumps(result["totals"])
    said = f"{QUERIES // 10} replies were encapsulated to another CE"
    assert any(w.startswith(said) for w in result["warnings"]), result["warnings"]


def test_lw4o6_subscribers_are_answered_and_a_wrong_binding_is_counted(br_link, run_xlatperf, validator):
    # lwB4s 0..7 of 2001:db8:b4::/64 (interface IDs 1..8), pool 192.0.2.0/24, 5 PSID bits; every 8th reply to
    # the next subscriber's lwB4 address.
    result, peer = run_with_peer(br_link, run_xlatperf, "--wrong-ce-every", "8", mode="lw4o6",
                                 rule="2001:db8:b4::/64,192.0.2.0/24,5,0")
    io = check_common(result, validator, peer)
    assert io["encap"]["mode"] == "lw4o6"
    assert peer["wrong_ce_sent"] == QUERIES // 8 == io["encap"]["wrong_ce"]
    assert result["totals"]["valid"] == QUERIES - QUERIES // 8, json.dumps(result["totals"])
