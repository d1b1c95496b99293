"""A peer across a veth with tx checksum offload on: xlatperf --io xdp names the likely cause and the fix.

Such a peer sends UDP with a partial checksum (CHECKSUM_PARTIAL: veth leaves it for a NIC that never comes);
the kernel's sockets accept it, but the AF_XDP reader sees the raw frame and every reply fails its checksum.
Known answer: with offload on at the peer's end, every one of the replies is a bad checksum (the DUT's, the
status stays `ok`), and the summary and the JSON `warnings` carry one line naming the veth offload and
`ethtool -K IF tx off`; with offload off (the harness's default) the same run has no such line.
"""

from __future__ import annotations

import subprocess

import pytest
from xdplink import SERVER_V4, TESTER_V4

from .helpers import RELAXED_TIMING, check_consistency
from .peer import Peer, Query, reply

pytestmark = pytest.mark.root

QUERIES = 500


def answer(peer: Peer, query: Query, source: tuple) -> None:
    peer.send(reply(query, answers=2), source)


def run_against_peer(link, run_xlatperf):
    with Peer(SERVER_V4, answer, rcvbuf=16 << 20, netns=link.netns) as peer:
        run = run_xlatperf("--server", SERVER_V4, "--port", str(peer.port), "--rate", "1000",
                           "--queries", str(QUERIES), "--threads", "1", "--ports-per-thread", "4",
                           "--io", "xdp",
                           "--xdp-interface", link.outer, "--source", f"{TESTER_V4},20000-20003",
                           "--timeout", "2", "--quiet", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    assert not peer.errors
    return run


def test_every_reply_failing_its_checksum_names_the_veth_offload_and_the_fix(link, run_xlatperf, validator):
    subprocess.run(link.inside("ethtool", "-K", link.inner, "tx", "on"), check=True, capture_output=True)
    run = run_against_peer(link, run_xlatperf)
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["valid"] == 0 and totals["unanswered"] == QUERIES
    assert result["io"]["frame_errors"]["bad_checksum"] == QUERIES
    assert totals["checksum_errors"] >= QUERIES
    assert result["verdict"] == {"status": "ok", "reasons": []}   # the loss is not the tester's
    hints = [w for w in result["warnings"] if "checksum offload" in w]
    assert len(hints) == 1, result["warnings"]
    assert "veth" in hints[0] and "ethtool -K IF tx off" in hints[0]
    assert f"({QUERIES} of {QUERIES} datagrams)" in hints[0]
    lines = [line for line in run.stdout.splitlines() if "checksum offload" in line]
    assert len(lines) == 1 and lines[0].lstrip().startswith("warning"), run.stdout


def test_full_checksums_give_no_offload_hint(link, run_xlatperf, validator):
    run = run_against_peer(link, run_xlatperf)    # the harness's peer end has tx off
    result = run.result
    validator.validate(result)
    assert result["totals"]["valid"] == QUERIES
    assert result["warnings"] == []
    assert "checksum offload" not in run.stdout
