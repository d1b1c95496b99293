"""knotd's CPU in socket mode and in XDP mode, side by side, through the emulated baseline.

Prints figures; asserts nothing. For each mode the emulated baseline (in-kernel forwarding on its two DUTs,
setups.emulation) comes up with Knot (1 UDP worker, every thread pinned to CPU 1) taking its queries either
through the kernel's UDP sockets or in XDP mode on the server namespace's interface (`knot_io`); xlatperf
(sockets, 1 thread x 4 ports) in the client namespace and the router's receive steering stay on CPU 0. At
each fixed rate (default 50 000 and 100 000 queries/s, --duration s each) it reports the queries sent and
validly answered, knotd's CPU time (user + system of every thread, /proc/PID/stat, so its AF_XDP and socket
syscalls are in it) as CPU-seconds per million queries answered and as % of one core, CPU 1's total busy
share (/proc/stat: knotd plus any softirq that landed there), and the server's kernel UDP counters (zero in
XDP mode: Knot's program took the queries first). XDP mode's redirect itself runs in the veth's receive
softirq on the sending CPU (CPU 0, the router's), which knotd's figure does not include. Only ratios from
one run mean anything on a shared 2-vCPU VM.

Run as root, under the machine lock on a shared machine:
    flock /tmp/xlatbench-machine.lock .venv/bin/python dnsperf/bench/knot_io_bench.py --out knot-io.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from xlatbench.cpuload import read_jiffies, usage_between
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig

TESTER_CPU, SERVER_CPU = 0, 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU-seconds of every thread of pid so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def per_million(cpu_s: float, answered: int) -> float | None:
    return round(cpu_s / answered * 1e6, 3) if answered else None


def measure(io: str, rates: list[int], duration_s: int, prefix: str) -> list[dict[str, Any]]:
    config = EmulationConfig("baseline", prefix=prefix, knot_cpus=(SERVER_CPU,), client_cpus=(TESTER_CPU,),
                             dut_cpus=(TESTER_CPU,), knot_io=io)
    tester = TesterOptions(sender_cpus=str(TESTER_CPU), receiver_cpus=str(TESTER_CPU))
    rows = []
    with EmulatedChain.up(config) as chain:
        knot = chain.describe()["knot"]
        pid = int(knot["pid"])
        measurer = ChainMeasurer(chain, tester)
        for rate in rates:
            cpu_before, ticks_before = cpu_seconds(pid), read_jiffies()
            result = measurer.measure(duration_s, rate)
            cpu = cpu_seconds(pid) - cpu_before
            busy = 100.0 - usage_between(ticks_before, read_jiffies())[str(SERVER_CPU)]["idle"]
            udp = (result.dut_stats or {}).get("counters", {}).get("server:udp", {})
            rows.append({
                "io": io, "rate_qps": rate, "duration_s": duration_s, "sent": result.sent,
                "valid": result.valid, "knotd_cpu_s": round(cpu, 3),
                "knotd_cpu_s_per_million_answered": per_million(cpu, result.valid),
                "knotd_core_pct": round(100.0 * cpu / duration_s, 1),
                "cpu1_busy_pct": round(busy, 1),
                "server_kernel_udp_in": udp.get("InDatagrams"),
                "xdp_program": (knot.get("xdp") or {}).get("attached"),
            })
            print(f"{io:6} {rate:7d} q/s: sent {result.sent}, valid {result.valid}, knotd {cpu:.2f} CPU-s "
                  f"({rows[-1]['knotd_cpu_s_per_million_answered']} CPU-s per million answered, "
                  f"{rows[-1]['knotd_core_pct']} % of a core), CPU {SERVER_CPU} busy {busy:.1f} %, server "
                  f"kernel UDP in {udp.get('InDatagrams')}", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="50000,100000", help="queries/s, comma-separated")
    parser.add_argument("--duration", type=int, default=10, help="s per trial (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    prefix = "xkb" + secrets.token_hex(2)
    rows = [row for io in ("socket", "xdp") for row in measure(io, rates, args.duration, prefix)]
    conditions = {"topology": "baseline (in-kernel forwarding)", "knot_udp_workers": 1,
                  "knot_cpus": [SERVER_CPU], "tester_and_router_cpus": [TESTER_CPU],
                  "tester": "xlatperf sockets, 1 thread x 4 ports", "kernel": os.uname().release}
    text = json.dumps({"conditions": conditions, "rows": rows}, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
