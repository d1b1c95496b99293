"""UDP GSO sends (--gso): every query still leaves as its own datagram, and counts come out exact.

Known answers: a peer on loopback that counts the datagrams it reads (the receiving socket cuts each GSO
batch), and the receive counter of the server's side of a veth (what the next namespace, a DUT in
emulation, really gets: a batch that crossed uncut counts once there).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .helpers import RELAXED_TIMING, check_consistency, sh, veth_pair
from .peer import Peer, answer_all

QUERIES = 20_000


def test_loopback_uses_gso_and_the_peer_reads_every_query_as_its_own_datagram(run_xlatperf, validator):
    for mode in ("auto", "off"):
        with Peer("127.0.0.1", answer_all, rcvbuf=8 << 20) as peer:
            run = run_xlatperf("--server", "127.0.0.1", "--port", str(peer.port), "--rate", "10000",
                               "--queries", str(QUERIES), "--gso", mode, *RELAXED_TIMING)
        assert run.returncode == 0, run.stderr
        validator.validate(run.result)
        check_consistency(run.result)
        gso = run.result["send"]["gso"]
        assert peer.queries == QUERIES and not peer.errors
        assert run.result["totals"]["valid"] == QUERIES and run.result["verdict"]["status"] == "ok"
        if mode == "auto":
            assert gso["used"] and gso["device"] == "lo" and "loopback" in gso["reason"]
            assert 0 < gso["calls"] <= sum(t["sendmmsg_calls"] for t in run.result["threads"])
        else:
            assert not gso["used"] and gso["calls"] == 0 and gso["reason"] == "off (--gso off)"


def trial_in(pair, xlatperf: Path, tmp_path: Path, mode: str, *extra: str) -> tuple[dict, int]:
    """A trial from the client namespace to the server side (nothing answers); the JSON and the packets the
    server's side of the veth received meanwhile."""
    out = tmp_path / f"{mode}.json"
    before = pair.server_rx_packets()
    args = ["--server", pair.server_address, "--port", "5300", "--rate", "20000", "--queries", str(QUERIES),
            "--timeout", "0.05", "--gso", mode, "--quiet", "--json", str(out), *RELAXED_TIMING, *extra]
    proc = subprocess.run(["ip", "netns", "exec", pair.client, str(xlatperf), *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), pair.server_rx_packets() - before


@pytest.mark.root
def test_a_veth_that_would_pass_uncut_batches_on_is_sent_to_without_gso(xlatperf, tmp_path, validator):
    with veth_pair("xtg") as pair:
        result, arrived = trial_in(pair, xlatperf, tmp_path, "auto")
        validator.validate(result)
        gso = result["send"]["gso"]
        assert not gso["used"] and gso["device"] == pair.client_device
        assert "tx-udp-segmentation on" in gso["reason"]
        assert QUERIES <= arrived <= QUERIES + 10  # give or take ARP / neighbour discovery

        # The hazard "auto" avoids: forced on, batches cross the veth uncut (one packet each over there).
        forced, arrived = trial_in(pair, xlatperf, tmp_path, "on")
        assert forced["send"]["gso"]["used"] and forced["totals"]["sent"] == QUERIES
        assert arrived < QUERIES / 4


@pytest.mark.root
def test_a_device_that_cuts_batches_itself_gets_gso_and_the_next_hop_sees_every_query(xlatperf, tmp_path,
                                                                                        validator):
    with veth_pair("xtg") as pair:
        sh("ip", "netns", "exec", pair.client, "ethtool", "-K", pair.client_device, "tx-udp-segmentation",
           "off")
        result, arrived = trial_in(pair, xlatperf, tmp_path, "auto")
        validator.validate(result)
        gso = result["send"]["gso"]
        assert gso["used"] and gso["calls"] > 0 and "tx-udp-segmentation off" in gso["reason"]
        assert result["totals"]["sent"] == QUERIES
        assert QUERIES <= arrived <= QUERIES + 10


@pytest.mark.root
def test_a_source_on_lo_routed_through_a_veth_is_judged_by_the_route(xlatperf, tmp_path, validator):
    """The source address lives on lo, the route to the server leaves by the veth: auto must follow the route
    (before, it asked which device owns the source address, saw lo, and sent uncut batches into the veth)."""
    with veth_pair("xtg") as pair:
        source = "10.213.5.1"
        sh("ip", "-n", pair.client, "addr", "add", f"{source}/32", "dev", "lo")
        sh("ip", "-n", pair.server, "route", "add", f"{source}/32", "via", "10.213.0.1")
        result, arrived = trial_in(pair, xlatperf, tmp_path, "auto", "--bind", source)
        validator.validate(result)
        gso = result["send"]["gso"]
        assert gso["device"] == pair.client_device and not gso["used"] and gso["calls"] == 0
        assert "tx-udp-segmentation on" in gso["reason"]
        assert result["totals"]["sent"] == QUERIES
        assert QUERIES <= arrived <= QUERIES + 10  # every query its own packet at the next hop
