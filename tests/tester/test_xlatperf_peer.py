"""xlatperf against a peer that misbehaves on purpose: every reply lands in its bucket, nothing crashes."""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, check_consistency
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
def test_every_kind_of_bad_reply_lands_in_its_bucket(run_xlatperf, validator):
    with Peer("127.0.0.1", misbehave) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "1000",
                           "--queries", str(QUERIES), "--timeout", str(TIMEOUT_S), "--threads", "2",
                           "--ports-per-thread", "2", *RELAXED_TIMING)
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
    assert detail == {"unknown_id": count("wrong_id"), "wrong_question": count("wrong_qname"),
                      "wrong_source": count("wrong_source")}
    assert totals["unanswered"] == sum(count(m) for m in ("garbage", "garbage_qr", "wrong_id", "wrong_qname",
                                                          "wrong_source", "silent"))
    assert result["loss_ratio"] == pytest.approx(1 - totals["valid"] / QUERIES)
    assert result["verdict"]["status"] == "ok"


def test_an_ipv6_peer_answering_everything_gives_no_loss(run_xlatperf, validator):
    with Peer("::1", answer_all) as peer:
        run = run_xlatperf("--server", "::1", "--port", str(peer.port), "--rate", "2000", "--queries", "1000",
                           "--ports-per-thread", "4", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    check_consistency(run.result)
    assert run.result["totals"]["valid"] == 1000
    assert run.result["loss_ratio"] == 0
