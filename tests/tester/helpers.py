"""Helpers for the xlatperf end-to-end tests: run results and their invariants."""

from __future__ import annotations

import importlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

import pytest

from xlatbench.paths import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "dnsperf" / "schema" / "result.schema.json"
BENCH_DIR = REPO_ROOT / "dnsperf" / "bench"

# Functional tests check counting, not timing: a loaded CI machine may delay a
# sender by milliseconds, which must not turn the verdict. Timing is benchmarked.
RELAXED_TIMING = ["--max-lag", "0", "--send-tolerance-abs", "0.5"]


@contextmanager
def bench_module(name: str) -> Iterator[ModuleType]:
    """A script of dnsperf/bench, imported the way `python dnsperf/bench/NAME.py` runs it."""
    sys.path.insert(0, str(BENCH_DIR))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH_DIR))


@dataclass
class Run:
    """One xlatperf run: exit code, stdout, stderr and the parsed JSON (None if not written)."""

    returncode: int
    stdout: str
    stderr: str
    result: dict | None

def check_consistency(result: dict) -> None:
    """Invariants every result must satisfy, whatever the trial."""
    totals = result["totals"]
    threads = result["threads"]
    assert sum(t["sent"] for t in threads) == totals["sent"]
    assert sum(t["valid"] for t in threads) == totals["valid"]
    assert sum(row["sent"] for row in result["series"]) == totals["sent"]
    assert sum(row["valid"] for row in result["series"]) == totals["valid"]
    tagged_after_s = result["latency"].get("from_s", 0)  # --latency-from: only queries sent from then on
    assert result["latency"]["count"] == sum(row["valid"] for row in result["series"]
                                             if row["second"] > tagged_after_s)
    assert totals["sent"] + totals["unsent"] == result["send"]["scheduled_queries"]
    answered = (totals["valid"] + totals["late"] + totals["rcode_errors"] + totals["nodata"]
                + totals["truncated"])
    assert totals["unanswered"] == totals["sent"] - answered
    datagrams = answered + totals["malformed"] + totals["unexpected"] + totals["duplicate"]
    assert totals["received"] == datagrams
    detail = totals["unexpected_detail"]
    assert detail["wrong_source"] + detail["unknown_id"] + detail["wrong_question"] == totals["unexpected"]
    if totals["sent"]:
        assert result["loss_ratio"] == pytest.approx(1 - totals["valid"] / totals["sent"])


@dataclass(frozen=True)
class PeerSide:
    """Where a Python peer answers (`host`, in `netns` or, None, the test's own namespace) and how xlatperf
    reaches it: io "socket" (its sockets) or "xdp" (AF_XDP on `interface`, flows from `source` and ports
    `first_port` on)."""

    io: str
    host: str
    netns: str | None = None
    interface: str = ""
    source: str = ""
    first_port: int = 0

    def senders(self, threads: int, ports_per_thread: int) -> list[str]:
        """Arguments for threads x ports_per_thread sockets; with xdp as many flows on one thread (AF_XDP
        runs one sender/receiver pair)."""
        if self.io == "socket":
            return ["--threads", str(threads), "--ports-per-thread", str(ports_per_thread)]
        flows = threads * ports_per_thread
        return ["--threads", "1", "--ports-per-thread", str(flows), "--io", "xdp", "--xdp-interface",
                self.interface, "--source", f"{self.source},{self.first_port}-{self.first_port + flows - 1}"]


@dataclass(frozen=True)
class VethPair:
    """Two namespaces joined by a veth: the tester's side (client, 10.213.0.1), the server's (10.213.0.2)."""

    client: str
    server: str
    client_device: str
    server_device: str
    server_address: str = "10.213.0.2"

    def server_rx_packets(self) -> int:
        """Packets the server's side of the veth received so far (the kernel's device counter)."""
        return int(sh("ip", "netns", "exec", self.server, "cat",
                      f"/sys/class/net/{self.server_device}/statistics/rx_packets"))


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@contextmanager
def veth_pair(prefix: str) -> Iterator[VethPair]:
    """A fresh namespace pair named prefix + random tag, deleted (with its veth) afterwards."""
    tag = secrets.token_hex(3)
    pair = VethPair(f"{prefix}c{tag}", f"{prefix}s{tag}", f"c{tag}", f"s{tag}")
    try:
        sh("ip", "netns", "add", pair.client)
        sh("ip", "netns", "add", pair.server)
        sh("ip", "link", "add", pair.client_device, "netns", pair.client, "type", "veth", "peer", "name",
           pair.server_device, "netns", pair.server)
        for ns, dev, address in ((pair.client, pair.client_device, "10.213.0.1/24"),
                                 (pair.server, pair.server_device, f"{pair.server_address}/24")):
            sh("ip", "-n", ns, "addr", "add", address, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield pair
    finally:
        for ns in (pair.client, pair.server):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
