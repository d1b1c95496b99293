"""A reply held until its transaction ID comes round again never answers the newer query.

One thread, one port: query j and j + 65536 share the 16-bit ID, the ring slot and (with the /16
subnet) the name. The peer holds the reply to one query until the query 65 536 later arrives, drops
that newer query and then sends the held reply. Truth: both queries are unanswered in time
(valid = sent - 2); the held reply matches no outstanding query.

The same known answer on both I/O paths (the `peer_side` fixture): a socket on loopback, and one AF_XDP flow
with the peer behind a veth in a namespace (root), where the flow's IDs and 0x20 epochs wrap as a socket's do.
"""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, PeerSide, check_consistency
from .peer import Peer, Query, reply

HELD = 1000
QUERIES = 70_000


def hold_one_reply() -> object:
    held: dict[str, bytes] = {}

    def behaviour(peer: Peer, query: Query, source: tuple) -> None:
        if query.index() != HELD:
            peer.send(reply(query), source)
        elif "reply" not in held:
            held["reply"] = reply(query)  # the first use of the ID: answer only much later
        else:
            peer.send(held["reply"], source)  # the second use: dropped, the old answer goes out instead

    return behaviour


@pytest.mark.slow
def test_a_reply_held_past_its_id_reuse_is_not_the_newer_answer(peer_side: PeerSide, run_xlatperf, validator):
    # 8 000 queries/s and a 4 s timeout: a Python peer on a loaded machine falls behind by seconds, but
    # its big buffer keeps every query and its replies stay in time.
    with Peer(peer_side.host, hold_one_reply(), rcvbuf=64 << 20, netns=peer_side.netns) as peer:
        run = run_xlatperf("--server", peer_side.host, "--port", str(peer.port), "--rate", "8000",
                           "--queries", str(QUERIES), *peer_side.senders(1, 1), "--timeout", "4",
                           "--quiet", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    assert not peer.errors
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    assert totals["sent"] == QUERIES
    assert totals["valid"] == QUERIES - 2
    assert totals["unanswered"] == 2
    assert totals["unexpected_detail"]["unknown_id"] == 1
    # The held reply spells epoch 0, whose query had no reply: it may be late, so no case rewrite is claimed.
    assert result["case_rewrite"]["detected"] is False
    if peer_side.io == "xdp":
        assert result["io"]["flows"] == 1
        assert result["io"]["tester_drops"] == 0
        assert totals["received"] == result["io"]["program"]["redirected"]
