"""A DUT that writes bad UDP checksums loses replies; the tester says so and does not blame itself.

Every 10th reply goes out through a raw socket with a wrong UDP checksum. Replies are long enough
(two AAAA records, 104 bytes) that the kernel checks the checksum only when the tester reads the
socket, so the drop also shows in the socket's SO_MEMINFO drop count, which alone would look like a
full receive buffer.

With AF_XDP (the peer behind a veth in a namespace, `peer_side`) no kernel socket checks the checksum: the
tester's frame parser does, counts exactly the bad ones (io.frame_errors.bad_checksum) and, as the kernel
does at a socket, among its socket drops, which the checksum errors then explain: the same totals.
"""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, PeerSide, check_consistency
from .peer import Peer, Query, reply

pytestmark = pytest.mark.root

QUERIES = 2000
EVERY = 10


def corrupt_every_tenth(peer: Peer, query: Query, source: tuple) -> None:
    data = reply(query, answers=2)
    if query.index() % EVERY == 0:
        peer.send_bad_checksum(data, source)
    else:
        peer.send(data, source)


def test_bad_checksums_are_counted_as_the_duts_lost_replies(peer_side: PeerSide, run_xlatperf, validator):
    # A big peer buffer and a 4 s timeout: a Python peer on a loaded machine may fall behind by seconds.
    with Peer(peer_side.host, corrupt_every_tenth, rcvbuf=16 << 20, netns=peer_side.netns) as peer:
        run = run_xlatperf("--server", peer_side.host, "--port", str(peer.port), "--rate", "2000",
                           "--queries", str(QUERIES), *peer_side.senders(1, 4), "--timeout", "4", "--quiet",
                           *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    assert not peer.errors
    result = run.result
    validator.validate(result)
    check_consistency(result)
    totals = result["totals"]
    bad = QUERIES // EVERY
    assert totals["valid"] == QUERIES - bad
    assert totals["unanswered"] == bad
    # Other namespaces' traffic does not count; another process here could only add to the figure.
    assert totals["checksum_errors"] >= bad
    if peer_side.io == "xdp":
        assert result["io"]["frame_errors"]["bad_checksum"] == bad
    assert totals["tester_receive_drops"] == 0 and result["io"]["tester_drops"] == 0
    assert result["io"]["checksum_errors"] == totals["checksum_errors"]
    assert result["warnings"] == []  # a tenth bad is the DUT's: no veth-offload hint
    assert result["verdict"] == {"status": "ok", "reasons": []}
    assert "bad checksum" in run.stdout
