"""CPU per packet of the emulated translators (tayga, bpf) on the 464XLAT chain at one rate, side by side.

Both DUTs on CPU 1 (cpuset for a user-space translator, RPS masks for the kernel's work), xlatperf and Knot on
CPU 0. Per trial it prints, as JSON lines: CPU 1's user/sys/softirq seconds (/proc/stat, with whatever else
runs there), a user-space translator's own CPU time per packet it translated (user + sys of /proc/PID/stat of
the processes its backend starts; each query and each reply crosses each DUT once), and an in-kernel
translator's own run time per packet as the kernel accounts it (the backend's `run_time`;
kernel.bpf_stats_enabled set for the run and restored). Which processes and programs those are is the
backend's business (setups/backends): the benchmark asks the chain. Needs root and the machine lock:

    flock /tmp/xlatbench-machine.lock .venv/bin/python dnsperf/bench/translator_cpu.py --rate 20000 \
        --duration 10 tayga bpf tayga bpf
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from xlatbench.paths import tester_binary
from xlatbench.setups.backends import registry
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig, down
from xlatbench.setups.plan import BackendChoice

HZ = os.sysconf("SC_CLK_TCK")
# The kernel's run-time accounting of its programs (off by default: it costs a clock read per run).
RUN_TIME_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def cpu_seconds(cpu: str = "cpu1") -> dict[str, float]:
    """One CPU's cumulative user (with nice), sys, softirq and idle time in seconds."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"{cpu} "):
            f = [int(x) for x in line.split()[1:9]]
            return {"user": (f[0] + f[1]) / HZ, "sys": f[2] / HZ, "softirq": f[6] / HZ, "idle": f[3] / HZ}
    raise RuntimeError(f"{cpu} not in /proc/stat")


def process_seconds(pid: int) -> float:
    """user + sys CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def trial(backend: str, rate: int, duration: int) -> dict[str, object]:
    prefix = f"xm{os.getpid() % 100000}"
    chain = EmulatedChain.up(EmulationConfig("464xlat", prefix=prefix, backends=BackendChoice.parse(backend),
                                             knot_cpus=(0,), dut_cpus=(1,)))
    try:
        emulation = chain.emulation
        out = Path(emulation.ctx.rundir) / "trial.json"
        argv = ["taskset", "-c", "0", *chain.client_argv([
            str(tester_binary()), "--server", chain.server_address, "--rate", str(rate), "--duration",
            str(duration), "--threads", "1", "--ports-per-thread", "10", "--timeout", "0.25",
            "--json", str(out), "--quiet"])]
        pids = {host: pid for host, found in emulation.translator_pids().items() for pid in found}
        time.sleep(1)
        cpu0, proc0 = cpu_seconds(), {h: process_seconds(p) for h, p in pids.items()}
        run0 = emulation.translator_run_times()
        subprocess.run(argv, check=True, capture_output=True)
        cpu1, proc1 = cpu_seconds(), {h: process_seconds(p) for h, p in pids.items()}
        run1 = emulation.translator_run_times()
        totals = json.loads(out.read_text())["totals"]
        queries = int(totals["sent"])
        used = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0}
        result: dict[str, object] = {
            "backend": backend, "rate_qps": rate, "duration_s": duration, "sent": queries,
            "valid": totals["valid"], "cpu1_s": used,
            "cpu1_sys_softirq_us_per_query": round((used["sys"] + used["softirq"]) / queries * 1e6, 2),
            "implementations": {h: r.get("version") for h, r in emulation.describe()["translators"].items()},
        }
        if pids:
            result[f"{backend}_us_per_packet"] = {
                h: round((proc1[h] - proc0[h]) / (2 * queries) * 1e6, 2) for h in pids}
        if run1:
            result[f"{backend}_ns_per_packet"] = {
                h: round((run1[h][0] - run0[h][0]) / max(1, run1[h][1] - run0[h][1]), 1) for h in run1}
            result[f"{backend}_runs"] = {h: run1[h][1] - run0[h][1] for h in run1}
        return result
    finally:
        down(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=20000, help="queries/s (default: %(default)s)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per trial (default: %(default)s)")
    parser.add_argument("backends", nargs="+", choices=registry.names())
    args = parser.parse_args()
    old = RUN_TIME_STATS.read_text().strip()
    try:
        RUN_TIME_STATS.write_text("1")
        for backend in args.backends:
            print(json.dumps(trial(backend, args.rate, args.duration)), flush=True)
    finally:
        RUN_TIME_STATS.write_text(old)
    print(json.dumps({"load_average": Path("/proc/loadavg").read_text().split()[:3]}))


if __name__ == "__main__":
    main()
