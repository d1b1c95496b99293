"""CPU per packet of the emulated translators (tayga, bpf) on the 464XLAT chain at one rate, side by side.

Both DUTs on CPU 1 (cpuset for tayga, RPS masks for the kernel's work), xlatperf and Knot on CPU 0. Per trial
it prints, as JSON lines: CPU 1's user/sys/softirq seconds (/proc/stat, with whatever else runs there), the
tayga processes' own CPU time per packet they translated (user + sys of /proc/PID/stat; each query and each
reply crosses each DUT once), and the bpf program's own run time per packet (kernel.bpf_stats_enabled, set for
the run and restored). Needs root and the machine lock:

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
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig, down

HZ = os.sysconf("SC_CLK_TCK")
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
DUTS = ("dut1", "dut2")


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


def bpf_run(netns: str, pinned: str) -> tuple[int, int]:
    """(run time in ns, runs) of a pinned BPF program."""
    out = subprocess.run(["ip", "netns", "exec", netns, "bpftool", "-j", "prog", "show", "pinned", pinned],
                         capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


def trial(backend: str, rate: int, duration: int) -> dict[str, object]:
    prefix = f"xm{os.getpid() % 100000}"
    chain = EmulatedChain.up(EmulationConfig("464xlat", prefix=prefix, backend=backend, knot_cpus=(0,),
                                             dut_cpus=(1,)))
    try:
        emulation = chain.emulation
        out = Path(f"/run/xlatbench/{prefix}/trial.json")
        argv = ["taskset", "-c", "0", *chain.client_argv([
            str(tester_binary()), "--server", chain.server_address, "--rate", str(rate), "--duration",
            str(duration), "--threads", "1", "--ports-per-thread", "10", "--timeout", "0.25",
            "--json", str(out), "--quiet"])]
        pids = {host: pid for host, found in emulation.translator_pids().items() for pid in found}
        pins = {h: f"/run/xlatbench/{prefix}/bpf/{h}/siit" for h in DUTS} if backend == "bpf" else {}
        time.sleep(1)
        cpu0, proc0 = cpu_seconds(), {h: process_seconds(p) for h, p in pids.items()}
        bpf0 = {h: bpf_run(emulation.netns_of[h], p) for h, p in pins.items()}
        subprocess.run(argv, check=True, capture_output=True)
        cpu1, proc1 = cpu_seconds(), {h: process_seconds(p) for h, p in pids.items()}
        bpf1 = {h: bpf_run(emulation.netns_of[h], p) for h, p in pins.items()}
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
            result["tayga_us_per_packet"] = {
                h: round((proc1[h] - proc0[h]) / (2 * queries) * 1e6, 2) for h in pids}
        if pins:
            result["bpf_ns_per_packet"] = {
                h: round((bpf1[h][0] - bpf0[h][0]) / max(1, bpf1[h][1] - bpf0[h][1]), 1) for h in pins}
            result["bpf_runs"] = {h: bpf1[h][1] - bpf0[h][1] for h in pins}
        return result
    finally:
        down(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=20000, help="queries/s (default: %(default)s)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per trial (default: %(default)s)")
    parser.add_argument("backends", nargs="+", choices=("tayga", "bpf"))
    args = parser.parse_args()
    old = BPF_STATS.read_text().strip()
    try:
        BPF_STATS.write_text("1")
        for backend in args.backends:
            print(json.dumps(trial(backend, args.rate, args.duration)), flush=True)
    finally:
        BPF_STATS.write_text(old)
    print(json.dumps({"load_average": Path("/proc/loadavg").read_text().split()[:3]}))


if __name__ == "__main__":
    main()
