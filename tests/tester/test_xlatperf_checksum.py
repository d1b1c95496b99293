"""A DUT that writes bad UDP checksums loses replies; the tester says so and does not blame itself.

Every 10th reply goes out through a raw socket with a wrong UDP checksum. Replies are long enough
(two AAAA records, 104 bytes) that the kernel checks the checksum only when the tester reads the
socket, so the drop also shows in the socket's SO_MEMINFO drop count, which alone would look like a
full receive buffer.
"""

from __future__ import annotations

import pytest

from .helpers import RELAXED_TIMING, check_consistency
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


def test_bad_checksums_are_counted_as_the_duts_lost_replies(run_xlatperf, validator):
    # A big peer buffer and a 4 s timeout: a Python peer on a loaded machine may fall behind by seconds.
    with Peer("127.0.0.1", corrupt_every_tenth, rcvbuf=16 << 20) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "2000",
                           "--queries", str(QUERIES), "--timeout", "4", "--quiet", *RELAXED_TIMING)
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
    assert totals["tester_socket_drops"] == bad
    assert totals["tester_buffer_drops"] == 0
    assert result["verdict"] == {"status": "ok", "reasons": []}
    assert "bad checksum" in run.stdout
