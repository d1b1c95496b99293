"""Test doubles for the chain side: a Chain whose client runs a fake xlatperf that answers like a DUT of
known capacity (so ChainMeasurer and campaigns run their real code paths without namespaces)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

FAKE_XLATPERF = r'''#!{python}
"""Writes an xlatperf-shaped JSON for a DUT of capacity $FAKE_CAPACITY queries/s (and tester limit)."""
import argparse, json, os, sys, time
p = argparse.ArgumentParser()
for flag in ("--server", "--port", "--rate", "--duration", "--threads", "--ports-per-thread", "--timeout",
             "--json", "--sender-cpus", "--receiver-cpus"):
    p.add_argument(flag)
p.add_argument("--quiet", action="store_true")
a = p.parse_args()
rate, duration = float(a.rate), float(a.duration)
if rate > 1e9:
    print("xlatperf: --rate too high", file=sys.stderr); sys.exit(2)
capacity = float(os.environ.get("FAKE_CAPACITY", "5000"))
limit = float(os.environ.get("FAKE_TESTER_LIMIT", "1e12"))
time.sleep(duration if os.environ.get("FAKE_REALTIME") else 0)
sent = round(rate * duration)
valid = min(sent, round(capacity * duration))
status, reasons = ("ok", [])
if rate > limit:
    status, reasons = "tester-limited", ["fake tester cannot send faster than %g" % limit]
doc = {"schema_version": 1, "header": {"tool": "xlatperf", "version": "fake-1.0", "argv": sys.argv},
       "config": {"server": a.server, "rate_qps": rate, "duration_s": duration},
       "totals": {"sent": sent, "valid": valid}, "loss_ratio": 1 - valid / sent if sent else 1.0,
       "send": {"achieved_rate_qps": rate}, "verdict": {"status": status, "reasons": reasons}}
open(a.json, "w").write(json.dumps(doc))
'''


def install_fake_xlatperf(build_dir: Path) -> Path:
    """Put a fake tester where xlatbench.paths.tester_binary() looks: $XLATBENCH_BUILD/dnsperf/xlatperf."""
    path = build_dir / "dnsperf" / "xlatperf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAKE_XLATPERF.replace("{python}", sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class FakeChain:
    """Implements the Chain protocol of docs/ARCHITECTURE.md without any namespace."""

    server_address = "203.0.113.56"
    client_address = "192.168.0.4"
    max_flows: int | None = None

    def __init__(self, topology: str, log: list) -> None:
        self.topology = topology
        self.log = log
        self.cpus: list[int] = []
        self.calls = 0

    def describe(self) -> dict:
        return {"topology": self.topology,
                "implementations": {"dut1": "fake-clat 1.0", "dut2": "fake-plat 1.0"}}

    def client_argv(self, argv: list[str]) -> list[str]:
        self.log.append(("client_argv", list(argv)))
        return list(argv)

    def set_dut_cpus(self, cpus: list[int], per_dut: dict[str, list[int]] | None = None) -> dict:
        self.cpus = list(cpus)
        self.log.append(("set_dut_cpus", list(cpus)))
        return {dut: list((per_dut or {}).get(dut, cpus)) for dut in ("dut1", "dut2")}

    def dut_cpu_times(self) -> dict[str, float]:
        self.calls += 1
        return {"dut1": 0.5 * self.calls, "dut2": 0.25 * self.calls}

    def component_pids(self) -> dict[str, int]:
        return {}  # no process of its own can die mid-trial

    def gone(self, pids: dict[str, int]) -> list[str]:
        return []

    def counters(self) -> dict[str, dict[str, int]]:
        return {"dut1:eth0": {"rx_dropped": 3 * self.calls, "rx_packets": 100 * self.calls}}


LOG: list = []


@contextlib.contextmanager
def fake_chain(topology: str, **options: object) -> Iterator[FakeChain]:
    LOG.append(("up", topology, options))
    try:
        yield FakeChain(topology, LOG)
    finally:
        LOG.append(("down", topology))


def env_with_fake_tester(tmp: Path, capacity: float, **extra: str) -> dict[str, str]:
    install_fake_xlatperf(tmp / "build")
    return {**os.environ, "XLATBENCH_BUILD": str(tmp / "build"), "FAKE_CAPACITY": str(capacity), **extra}


def dumps(obj: object) -> str:
    return json.dumps(obj)
