"""xlatperf --source: sockets spread over several source addresses, each on the ports of its ranges.

A peer records the (address, port) every query came from; the independent answer is the assignment rule
(thread i, socket j -> source (i*K + j) mod S, that source's ports in order) computed here.
"""

from __future__ import annotations

from .helpers import RELAXED_TIMING, check_consistency
from .peer import Peer, Query, reply

# Ports above the kernel's ephemeral range (32768-60999 by default): no other socket takes them by chance.
SOURCES = {"127.0.0.2": [(61100, 61101), (61110, 61119)], "127.0.0.3": [(61200, 61211)],
           "127.0.0.4": [(61300, 61311)]}
THREADS, PORTS = 3, 8


def expected_sockets() -> list[tuple[str, int]]:
    names = list(SOURCES)
    ports = {name: [p for first, last in SOURCES[name] for p in range(first, last + 1)] for name in names}
    out = []
    for g in range(THREADS * PORTS):
        name = names[g % len(names)]
        out.append((name, ports[name][g // len(names)]))
    return out


def test_sockets_spread_over_sources_in_the_documented_order(run_xlatperf, validator):
    seen: set[tuple[str, int]] = set()

    def record(peer: Peer, query: Query, source: tuple) -> None:
        seen.add((source[0], source[1]))
        peer.send(reply(query), source)

    args = []
    for address, ranges in SOURCES.items():
        args += ["--source", ",".join([address, *(f"{a}-{b}" for a, b in ranges)])]
    with Peer("127.0.0.1", record) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "2000", "--queries",
                           "2400", "--threads", str(THREADS), "--ports-per-thread", str(PORTS), *args,
                           *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    result = run.result
    validator.validate(result)
    check_consistency(result)
    assert result["totals"]["valid"] == 2400
    want = expected_sockets()
    got = [(a, p) for t in result["threads"] for a, p in zip(t["source_addresses"], t["ports"], strict=True)]
    assert got == want
    assert seen == set(want), "every socket sent, from the address and port the JSON names"
    assert [(s["address"], s["sockets"]) for s in result["config"]["sources"]] == [
        ("127.0.0.2", 8), ("127.0.0.3", 8), ("127.0.0.4", 8)]
    assert result["config"]["sources"][0]["port_ranges"] == [[61100, 61101], [61110, 61119]]


def test_bind_and_first_port_still_make_one_source(run_xlatperf, validator):
    with Peer("127.0.0.1", lambda peer, q, s: peer.send(reply(q), s)) as peer:
        run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "1000", "--queries",
                           "200", "--threads", "2", "--ports-per-thread", "2", "--bind", "127.0.0.5",
                           "--first-port", "61400", *RELAXED_TIMING)
    assert run.returncode == 0, run.stderr
    validator.validate(run.result)
    assert [t["ports"] for t in run.result["threads"]] == [[61400, 61401], [61402, 61403]]
    assert run.result["config"]["sources"] == [
        {"address": "127.0.0.5", "port_ranges": [[61400, 61403]], "sockets": 4}]
