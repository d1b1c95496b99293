"""xlatperf --io xdp on two interface queues: one AF_XDP socket and one sender/receiver pair per queue.

A veth pair with two queues on each end into a namespace with a real knotd. Pair i sends every query of its
flows (the flows at positions i, i + 2, ...: with 64 flows of ports 20000-20063 in sequence, pair 0 the even
source ports, pair 1 the odd ones) on transmit queue i; a reply comes back on the receive queue the server
side's transmit hash puts its 5-tuple on, so each receiver also matches replies to the other pair's queries.
Known answers, none of them xlatperf's own: an nftables rule in the server namespace drops exactly every 7th
query, so valid == sent - sent/7 exactly, with every other bucket empty; two nftables counters in front of it
count the queries by source-port parity, which must equal the queries each queue's sender reports
(`io.per_queue[].frames_sent`); and the tester veth's own per-queue counter of frames its XDP program
redirected (`ethtool -S`: `rx_queue_N_xdp_redirect`, the kernel's) must equal the frames each queue's
receiver read. Both queues carry queries and replies, and some replies arrive on the other queue than their
queries left by (`io.other_queue_replies`).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdplink import SERVER_V4, TESTER_V4, XdpLink, attached_program, xdp_link

from xlatbench.zones import KnotConfig, KnotServer

pytestmark = pytest.mark.root

QUERIES = 6006  # a multiple of 7 and of the 2 queues: exactly 858 dropped, 3003 per queue
RATE_QPS = 3000
EVERY = 7

RULES = (
    "table inet xlbq {\n"
    "chain input {\n"
    "type filter hook input priority 0; policy accept;\n"
    "udp dport 53 udp sport & 1 == 0 counter\n"
    "udp dport 53 udp sport & 1 == 1 counter\n"
    f"udp dport 53 numgen inc mod {EVERY} == 0 counter drop\n"
    "}\n"
    "}\n"
)


@pytest.fixture
def link2() -> Iterator[XdpLink]:
    """A veth pair with two queues per end into a namespace of its own, always removed."""
    with xdp_link("xbq" + secrets.token_hex(2), queues=2) as made:
        yield made


@pytest.fixture
def knot(link2: XdpLink, tmp_path: Path) -> Iterator[KnotServer]:
    with KnotServer(tmp_path / "knot", KnotConfig(listen=((SERVER_V4, 53),)), netns=link2.netns) as server:
        yield server


def redirected_per_queue(ifname: str) -> dict[int, int]:
    """The veth's per-receive-queue count of frames its XDP program redirected (the kernel's counter)."""
    out = subprocess.run(["ethtool", "-S", ifname], capture_output=True, text=True, check=True).stdout
    found = re.finditer(r"rx_queue_(\d+)_xdp_redirect:\s*(\d+)", out)
    return {int(m.group(1)): int(m.group(2)) for m in found}


def nft_counters(link: XdpLink) -> list[int]:
    listed = subprocess.run(link.inside("nft", "-j", "list", "table", "inet", "xlbq"), capture_output=True,
                            text=True, check=True).stdout
    return [item["counter"]["packets"] for entry in json.loads(listed)["nftables"] if "rule" in entry
            for item in entry["rule"]["expr"] if "counter" in item]


def test_two_queues_count_exactly_and_match_replies_on_either_queue(link2, knot, run_xlatperf, validator):
    subprocess.run(link2.inside("nft", "-f", "-"), input=RULES, text=True, check=True, capture_output=True)
    before = redirected_per_queue(link2.outer)
    assert sorted(before) == [0, 1], f"the veth has no per-queue XDP counters: {before}"
    run = run_xlatperf("--server", SERVER_V4, "--source", f"{TESTER_V4},20000-20063", "--threads", "2",
                       "--ports-per-thread", "32", "--rate", str(RATE_QPS), "--queries", str(QUERIES),
                       "--io", "xdp", "--xdp-interface", link2.outer, "--sender-cpus", "0",
                       "--receiver-cpus", "0", "--quiet")
    after = redirected_per_queue(link2.outer)
    assert run.returncode == 0, run.stderr
    result = run.result
    assert result is not None, run.stderr
    validator.validate(result)
    totals = result["totals"]
    shown = json.dumps(totals)
    dropped = QUERIES // EVERY
    assert totals["sent"] == QUERIES, shown
    assert totals["valid"] == QUERIES - dropped, shown
    for bucket in ("late", "malformed", "unexpected", "duplicate", "nodata", "truncated",
                   "tester_receive_drops", "unbound_queue_replies"):
        assert totals[bucket] == 0, f"{bucket}: {shown}"
    assert result["verdict"]["status"] == "ok", result["verdict"]

    io = result["io"]
    assert (io["queue"], io["queues"], io["interface_queues"]) == (0, 2, 2)
    assert result["config"]["xdp_queues"] == [0, 1]
    queues = io["per_queue"]
    assert [q["queue"] for q in queues] == [0, 1]
    # Queries: each queue's sender sent its half, and the server counted them by source-port parity.
    even, odd, drops = nft_counters(link2)
    assert drops == dropped
    assert [q["frames_sent"] for q in queues] == [QUERIES // 2, QUERIES // 2]
    assert [even, odd] == [q["frames_sent"] for q in queues], json.dumps(io)
    # Replies: the frames each receiver read are those the kernel redirected on its queue; both carried some.
    received = [q["frames_received"] for q in queues]
    assert received == [after[n] - before[n] for n in (0, 1)], (before, after, json.dumps(io))
    assert sum(received) == QUERIES - dropped
    assert all(n > 0 for n in received), received
    assert io["frames_received"] == sum(received)
    # 32 flows per queue hashed over two queues: replies crossed between the queues, and were matched.
    assert io["other_queue_replies"] == sum(q["other_queue_replies"] for q in queues) > 0
    assert all(q["tester_drops"] == 0 for q in queues), json.dumps(io)
    counted = [after[n] - before[n] for n in (0, 1)]
    crossed = [q["other_queue_replies"] for q in queues]
    print(f"two queues: sent per queue {[q['frames_sent'] for q in queues]}, nftables {[even, odd]}; "
          f"replies per queue {received}, veth redirect counters {counted}; replies on the other queue "
          f"{crossed}; valid {totals['valid']} of {totals['sent']}")
    # Each pair's receiver counted the replies that arrived on its queue.
    assert [t["valid"] for t in result["threads"]] == received
    assert attached_program(link2.outer) is None


def test_a_queue_the_interface_lacks_is_refused_before_sending(link2, run_xlatperf):
    run = run_xlatperf("--server", SERVER_V4, "--source", f"{TESTER_V4},20000-20063", "--threads", "2",
                       "--ports-per-thread", "32", "--queries", "10", "--io", "xdp",
                       "--xdp-interface", link2.outer, "--xdp-queue", "1")
    assert run.returncode == 1, run.stderr
    assert "has 2 receive queues (0..1), no queue 2" in run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert attached_program(link2.outer) is None


def test_one_queue_of_two_bound_loses_the_replies_on_the_other_and_says_so(link2, knot, run_xlatperf,
                                                                          validator):
    before = redirected_per_queue(link2.outer)
    run = run_xlatperf("--server", SERVER_V4, "--source", f"{TESTER_V4},20000-20063",
                       "--ports-per-thread", "64", "--rate", "2000", "--queries", "2000", "--io", "xdp",
                       "--xdp-interface", link2.outer, "--quiet")
    after = redirected_per_queue(link2.outer)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    result = run.result
    # Only queue 0 has a socket: the replies the veth put on queue 1 were never redirected, and their
    # queries count as unanswered; the run says why.
    assert after[1] == before[1]
    assert result["totals"]["valid"] == after[0] - before[0] < 2000
    assert result["io"]["program"]["passed"] >= 2000 - result["totals"]["valid"]
    warnings = result["warnings"]
    assert any("has 2 receive queues and the tester bound 1" in w for w in warnings), warnings
    # The program counts exactly the replies that landed on the unbound queue: the tester's loss, so the
    # trial is tester-limited, not the DUT's failure.
    unbound = result["totals"]["unbound_queue_replies"]
    assert unbound == result["io"]["program"]["unbound"] == 2000 - (after[0] - before[0])
    assert result["verdict"]["status"] == "tester-limited"
    assert any("without a tester socket" in reason for reason in result["verdict"]["reasons"])
