"""A server that rewrites the letter case of the query name is named as such, once.

xlatperf carries a socket's ID epoch in the case of the domain's first eight letters (DNS 0x20). A peer
that upper- or lower-cases the question it echoes makes replies spell an epoch their query did not carry.
Truth, from the peer's rule and the tester's documented name case: an upper-casing peer spells epoch 255
(all eight letters flipped) from the first query on, which no query with that ID has carried; a
lower-casing peer asked for "DNS64perf.test" spells epoch 7 (D, N, S lowered); a lower-casing peer asked for
the lower-case default matches every epoch-0 query and from query 65 536 on (epoch 1, one socket) spells
epoch 0, whose query with that ID already had its reply. Each such reply matches no query; the JSON says
case_rewrite.detected with their count and the first one, the verdict carries one warning, and stderr
carries one warning line, whatever the number of such replies. A reply held past its ID's reuse
(test_xlatperf_wrap.py) is not blamed on the server.

The rewriting peers run on both I/O paths (`peer_side`): sockets on loopback, and AF_XDP with the peer behind
a veth in a namespace (root), where one flow's IDs and epochs wrap as one socket's do and the first rewrite
is named by the flow's address and port.
"""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, PeerSide, check_consistency
from .peer import Behaviour, Peer, Query, reply

WARNING = "warning: the server rewrites the letter case of the query name"


def rewrite_case(change: str) -> Behaviour:
    """A behaviour: answer every query, its echoed QNAME upper- or lower-cased (QTYPE, QCLASS kept)."""

    def behaviour(peer: Peer, query: Query, source: tuple) -> None:
        name = query.question[:-4]
        name = name.upper() if change == "upper" else name.lower()
        peer.send(reply(query, question=name + query.question[-4:]), source)

    return behaviour


def check_detected(run, validator, side: PeerSide, *, valid: int, rewritten: int, evidence: str,
                   query_epoch: int, reply_epoch: int) -> None:
    assert run.returncode == 0, run.stderr
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["valid"] == valid
    assert totals["unexpected_detail"]["unknown_id"] == rewritten
    assert totals["unanswered"] == rewritten
    case = result["case_rewrite"]
    assert case["detected"] is True
    assert case["replies"] == rewritten
    first = case["first"]
    assert first["evidence"] == evidence
    assert (first["query_epoch"], first["reply_epoch"]) == (query_epoch, reply_epoch)
    if side.io == "socket":
        assert first["port"] == result["threads"][0]["ports"][0]
    else:
        assert (first["address"], first["port"]) == (side.source, side.first_port)
    assert len(result["warnings"]) == 1
    assert str(rewritten) in result["warnings"][0]
    assert run.stderr.count(WARNING) == 1, run.stderr


@pytest.mark.parametrize(("change", "domain", "reply_epoch"), [("upper", "dns64perf.test", 255),
                                                               ("lower", "DNS64perf.test", 7)])
def test_a_case_rewriting_server_is_named_from_its_first_reply(peer_side: PeerSide, run_xlatperf, validator,
                                                               change, domain, reply_epoch):
    queries = 2000
    with Peer(peer_side.host, rewrite_case(change), netns=peer_side.netns) as peer:
        run = run_xlatperf("--server", peer_side.host, "--port", str(peer.port), "--rate", "2000",
                           "--queries", str(queries), *peer_side.senders(1, 1), "--domain", domain,
                           "--quiet", *RELAXED_TIMING)
    assert not peer.errors
    check_detected(run, validator, peer_side, valid=0, rewritten=queries, evidence="never-sent",
                   query_epoch=0, reply_epoch=reply_epoch)


@pytest.mark.slow
def test_a_lowercasing_server_is_named_when_the_ids_wrap(peer_side: PeerSide, run_xlatperf, validator):
    # One socket: queries 0 .. 65 535 are epoch 0 (the domain as given, lower case: the peer's lowering
    # changes nothing); 65 536 .. 69 999 are epoch 1 and come back spelled epoch 0. 8 000 queries/s and a
    # 4 s timeout, as in test_xlatperf_wrap.py: a Python peer on a loaded machine falls behind by seconds.
    queries = 70_000
    with Peer(peer_side.host, rewrite_case("lower"), rcvbuf=64 << 20, netns=peer_side.netns) as peer:
        run = run_xlatperf("--server", peer_side.host, "--port", str(peer.port), "--rate", "8000",
                           "--queries", str(queries), *peer_side.senders(1, 1), "--timeout", "4",
                           "--quiet", *RELAXED_TIMING)
    assert not peer.errors
    check_detected(run, validator, peer_side, valid=65_536, rewritten=queries - 65_536,
                   evidence="answered-before", query_epoch=1, reply_epoch=0)


def test_a_server_that_echoes_the_case_is_not_named(run_xlatperf, validator):
    with Peer("127.0.0.1", lambda peer, query, source: peer.send(reply(query), source)) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "2000",
                           "--queries", "2000", "--domain", "DNS64perf.test", "--quiet", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    assert run.result["totals"]["valid"] == 2000
    assert run.result["case_rewrite"] == {"detected": False, "replies": 0, "first": None}
    assert run.result["warnings"] == []
    assert WARNING not in run.stderr
