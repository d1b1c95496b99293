"""xlatperf against a peer that misbehaves on purpose: every reply lands in its bucket, nothing crashes.

Both I/O paths against the same peer and the same known answers (the `peer_side` fixture): sockets on
loopback, and AF_XDP with the peer in the server namespace of a veth pair (root). One difference is by
design: AF_XDP's reply filter takes only datagrams from the server's address and port, so a reply from the
peer's other port never reaches the tester; the kernel gets it (the program counts it as passed) and the
tester's buckets show only its query unanswered, where the socket path counts it as unexpected
(wrong_source).
"""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, PeerSide, check_consistency
from .peer import Peer, Query, answer_all, question_for, reply

QUERIES = 1300
TIMEOUT_S = 0.5
LATE_DELAY_S = 1.0
LATE_BEFORE = 200  # only early queries get a late reply: it still arrives before the receivers stop

MODES = ("valid", "garbage", "wrong_id", "duplicate", "nxdomain", "servfail", "wrong_qname", "nodata",
         "wrong_source", "silent", "late", "tc", "garbage_qr")


def mode_of(k: int) -> str:
    mode = MODES[k % len(MODES)]
    return "valid" if mode == "late" and k >= LATE_BEFORE else mode


def misbehave(peer: Peer, query: Query, source: tuple) -> None:
    mode = mode_of(query.index())
    if mode == "valid":
        peer.send(reply(query), source)
    elif mode == "garbage":
        peer.send(b"\x00\x01\x02", source)
    elif mode == "garbage_qr":
        peer.send(b"\xff" * 40, source)
    elif mode == "wrong_id":
        peer.send(reply(query, qid=query.id ^ 0x8000), source)
    elif mode == "duplicate":
        peer.send(reply(query), source)
        peer.send(reply(query), source)
    elif mode == "nxdomain":
        peer.send(reply(query, rcode=3, answers=0), source)
    elif mode == "servfail":
        peer.send(reply(query, rcode=2, answers=0), source)
    elif mode == "wrong_qname":
        other = (b"010-000-255-254",) + query.labels[1:]
        peer.send(reply(query, question=question_for(other)), source)
    elif mode == "nodata":
        peer.send(reply(query, answers=0), source)
    elif mode == "wrong_source":
        peer.send(reply(query), source, from_other=True)
    elif mode == "late":
        peer.send(reply(query), source, delay_s=LATE_DELAY_S)
    elif mode == "tc":
        peer.send(reply(query, answers=0, tc=True), source)
    # "silent": no reply at all


def count(mode: str) -> int:
    return sum(1 for k in range(QUERIES) if mode_of(k) == mode)


@pytest.mark.slow
def test_every_kind_of_bad_reply_lands_in_its_bucket(peer_side: PeerSide, run_xlatperf, validator):
    with Peer(peer_side.host, misbehave, netns=peer_side.netns) as peer:
        run = run_xlatperf("--server", peer_side.host, "--port", str(peer.port), "--rate", "1000",
                           "--queries", str(QUERIES), "--timeout", str(TIMEOUT_S), *peer_side.senders(2, 2),
                           *RELAXED_TIMING)
    assert not peer.errors
    assert peer.queries == QUERIES
    assert run.returncode == 0, run.stderr
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["sent"] == QUERIES
    assert totals["valid"] == count("valid") + count("duplicate")
    assert totals["duplicate"] == count("duplicate")
    assert totals["late"] == count("late") > 0
    assert totals["rcode"]["NXDOMAIN"] == count("nxdomain")
    assert totals["rcode"]["SERVFAIL"] == count("servfail")
    assert totals["rcode_errors"] == count("nxdomain") + count("servfail")
    assert totals["nodata"] == count("nodata")
    assert totals["truncated"] == count("tc")
    assert totals["malformed"] == count("garbage") + count("garbage_qr")
    detail = totals["unexpected_detail"]
    # AF_XDP: the filter passes the other port's replies to the kernel, so the tester never sees them.
    seen_wrong_source = count("wrong_source") if peer_side.io == "socket" else 0
    assert detail == {"unknown_id": count("wrong_id"), "wrong_question": count("wrong_qname"),
                      "wrong_source": seen_wrong_source}
    assert totals["unanswered"] == sum(count(m) for m in ("garbage", "garbage_qr", "wrong_id", "wrong_qname",
                                                          "wrong_source", "silent"))
    assert result["loss_ratio"] == pytest.approx(1 - totals["valid"] / QUERIES)
    assert result["verdict"]["status"] == "ok"
    if peer_side.io == "xdp":
        io = result["io"]
        assert io["mode"] == "xdp"
        assert totals["received"] == io["program"]["redirected"]  # every datagram it took was counted
        assert io["program"]["passed"] >= count("wrong_source")
        assert all(n == 0 for n in io["frame_errors"].values()), io["frame_errors"]
        assert io["tester_drops"] == 0


def test_an_ipv6_peer_answering_everything_gives_no_loss(run_xlatperf, validator):
    with Peer("::1", answer_all) as peer:
        run = run_xlatperf("--server", "::1", "--port", str(peer.port), "--rate", "2000", "--queries", "1000",
                           "--ports-per-thread", "4", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    assert run.result["totals"]["valid"] == 1000
    assert run.result["loss_ratio"] == 0
