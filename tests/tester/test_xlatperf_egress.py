"""Queries dropped at the tester's own egress are the tester's fault, and counted.

A namespace pair joined by a veth; the client side gets a tiny tbf (1 Mbit/s, a 3 000-byte queue), so
most of 20 000 queries/s are dropped by the qdisc after sendmmsg accepted them. The kernel hides that
ENOBUFS from a socket without IP_RECVERR, so only the namespace's UDP SndbufErrors show it. Known
answer: the drops tc counts on that qdisc (give or take a few ARP / neighbour-discovery packets).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .helpers import sh, veth_pair

pytestmark = pytest.mark.root


@pytest.fixture
def namespaces():
    with veth_pair("xt13") as pair:
        sh("tc", "-n", pair.client, "qdisc", "add", "dev", pair.client_device, "root", "tbf", "rate", "1mbit",
           "burst", "1600", "limit", "3000")
        yield pair.client, pair.client_device


def test_egress_drops_are_tester_limited_and_counted(xlatperf: Path, namespaces, tmp_path, validator):
    client, device = namespaces
    out = tmp_path / "egress.json"
    args = ["--server", "10.213.0.2", "--port", "5300", "--rate", "20000", "--queries", "20000",
            "--ports-per-thread", "1", "--timeout", "0.1", "--max-lag", "0", "--send-tolerance-abs", "0.5",
            "--quiet", "--json", str(out)]
    proc = subprocess.run(["ip", "netns", "exec", client, str(xlatperf), *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    validator.validate(result)
    stats = sh("tc", "-n", client, "-s", "qdisc", "show", "dev", device)
    dropped = int(re.search(r"dropped (\d+)", stats).group(1))
    assert dropped > 1000
    # The qdisc also carries (and may drop) a few non-UDP packets: ARP, IPv6 neighbour discovery.
    assert dropped - 10 <= result["totals"]["tester_egress_drops"] <= dropped
    assert result["verdict"]["status"] == "tester-limited"
    assert any("egress dropped" in reason for reason in result["verdict"]["reasons"])
