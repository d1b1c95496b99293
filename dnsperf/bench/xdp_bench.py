"""Benchmark of the AF_XDP layer (tools/xdp_probe, and xlatperf --io xdp) against Knot's kxdpgun.

Prints figures; asserts nothing. A veth pair runs from the root namespace into a namespace where knotd
(socket mode, 1 UDP worker, its threads pinned to CPU 1) answers (setups.emulation.xdplink); both
generators attach their AF_XDP program to the root end and run pinned to CPU 0, one after the other, at
each fixed rate (default 100 000 and 200 000 queries/s, --duration s each). For each run it reports the
queries sent, the replies received (kxdpgun: its own count of answers; xdp_probe: replies matched to their
query and valid) and the generator's CPU time from getrusage of the child (user + system, so the AF_XDP
syscalls are in it; the veth receive softirq that runs the XDP program on the replying CPU is not, for
either generator), as CPU-seconds per million queries sent, and each one's CPU relative to kxdpgun's.
xlatperf runs too, with sockets and with --io xdp (one sender/receiver pair, both threads on CPU 0, 64
source ports or flows; its replies are the valid ones).
Only ratios from one run mean anything on a shared 2-vCPU VM.

Run as root, under the machine lock on a shared machine:
    flock /tmp/xlatbench-machine.lock .venv/bin/python dnsperf/bench/xdp_bench.py --out xdp-bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xlatbench.paths import build_dir
from xlatbench.setups.emulation import rootsysctl
from xlatbench.setups.emulation.xdplink import SERVER_V4, TESTER_V4, XdpLink, xdp_link
from xlatbench.zones import KnotConfig, KnotServer
from xlatbench.zones.zonefile import DEFAULT_DOMAIN, query_name

TESTER_CPU, SERVER_CPU = 0, 1
NAMES = 65536  # the zone's names (10.0.0.0/16), in kxdpgun's query file as in xdp_probe's --subnet


def run_metered(argv: list[str]) -> tuple[str, str, float, float]:
    """Runs argv; returns its stdout, stderr, user and system CPU-seconds (wait4 rusage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"xdp_bench: {argv[0]} failed (exit {proc.returncode}): {stderr.strip()[-300:]}")
    return stdout, stderr, usage.ru_utime, usage.ru_stime


def kxdpgun(link: XdpLink, queries: Path, rate: int, duration_s: int) -> dict[str, Any]:
    argv = ["kxdpgun", "-t", str(duration_s), "-Q", str(rate), "-F", str(TESTER_CPU), "-I", link.outer,
            "-i", str(queries), SERVER_V4]
    stdout, stderr, user_s, system_s = run_metered(argv)
    # kxdpgun leaves its XDP program ('xdp_redirect_dns') attached when it ends; this bench made the link.
    subprocess.run(["ip", "link", "set", "dev", link.outer, "xdp", "off"], check=True)
    text = stdout + stderr
    sent = re.search(r"total queries:\s+(\d+)", text)
    answered = re.search(r"total replies:\s+(\d+)", text)
    if not sent or not answered:
        raise SystemExit(f"xdp_bench: cannot read kxdpgun's totals from: {text.strip()[-400:]}")
    return {"sent": int(sent.group(1)), "replies": int(answered.group(1)), "user_s": user_s,
            "system_s": system_s}


def xdp_probe(link: XdpLink, rate: int, duration_s: int, flows: int) -> dict[str, Any]:
    argv = [str(build_dir() / "dnsperf" / "xdp_probe"), "--interface", link.outer, "--server", SERVER_V4,
            "--source", f"{TESTER_V4},10000-{10000 + flows - 1}", "--order", "random", "--rate", str(rate),
            "--queries", str(rate * duration_s), "--cpu", str(TESTER_CPU)]
    stdout, _, user_s, system_s = run_metered(argv)
    result = json.loads(stdout)
    return {"sent": result["sent"], "replies": result["buckets"]["valid"], "user_s": user_s,
            "system_s": system_s, "max_lag_ms": result["max_lag_ms"],
            "frames_per_kick": result["frames_per_kick"], "xsk_statistics": result["xsk_statistics"],
            "xdp_mode": result["xdp_mode"]}


def xlatperf(link: XdpLink, rate: int, duration_s: int, io: str) -> dict[str, Any]:
    argv = [str(build_dir() / "dnsperf" / "xlatperf"), "--server", SERVER_V4, "--source",
            f"{TESTER_V4},30000-30063", "--ports-per-thread", "64", "--rate", str(rate), "--duration",
            str(duration_s), "--sender-cpus", str(TESTER_CPU), "--receiver-cpus", str(TESTER_CPU), "--quiet",
            "--json", "-", "--io", io]
    if io == "xdp":
        argv += ["--xdp-interface", link.outer]
    stdout, _, user_s, system_s = run_metered(argv)
    result = json.loads(stdout)
    run = {"sent": result["totals"]["sent"], "replies": result["totals"]["valid"], "user_s": user_s,
           "system_s": system_s, "max_lag_ms": result["send"]["max_lag_s"] * 1e3,
           "verdict": result["verdict"]["status"]}
    if io == "xdp":
        io_block = result["io"]
        run.update(frames_per_kick=io_block["frames_per_kick"], xsk_statistics=io_block["xdp_statistics"],
                   xdp_mode=io_block["xdp_mode"])
    return run


GENERATORS = ("kxdpgun", "xdp_probe", "xlatperf-socket", "xlatperf-xdp")


def generate(name: str, link: XdpLink, queries: Path, rate: int, args: argparse.Namespace) -> dict[str, Any]:
    if name == "kxdpgun":
        return kxdpgun(link, queries, rate, args.duration)
    if name == "xdp_probe":
        return xdp_probe(link, rate, args.duration, args.flows)
    return xlatperf(link, rate, args.duration, name.removeprefix("xlatperf-"))


def per_million(run: dict[str, Any]) -> float:
    return (run["user_s"] + run["system_s"]) / run["sent"] * 1e6 if run["sent"] else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100000,200000", help="fixed rates, queries/s, comma-separated")
    parser.add_argument("--duration", type=int, default=3, help="seconds per run")
    parser.add_argument("--flows", type=int, default=10000, help="xdp_probe's flows (source ports)")
    parser.add_argument("--generators", default=",".join(GENERATORS),
                        help="which to run, comma-separated, of " + ", ".join(GENERATORS))
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    try:
        rates = [int(r) for r in args.rates.split(",")]
    except ValueError:
        print(f"xdp_bench: bad --rates {args.rates!r}: integers, comma-separated", file=sys.stderr)
        return 2
    args.generators = args.generators.split(",")
    if not args.generators or any(g not in GENERATORS for g in args.generators):
        print(f"xdp_bench: bad --generators: choose from {', '.join(GENERATORS)}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("xdp_bench: run as root (namespaces, XDP programs)", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"conditions": {
        "path": "veth from the root namespace into a knotd namespace, native XDP on the tester's end",
        "server": "knotd (socket mode), 1 UDP worker, threads on CPU 1", "generators_cpu": TESTER_CPU,
        "duration_s": args.duration, "xdp_probe_flows": args.flows,
        "cpu": "getrusage of the child, user+system",
    }, "runs": []}
    with tempfile.TemporaryDirectory() as tmp, xdp_link("xbxb" + secrets.token_hex(2)) as link:
        queries = Path(tmp) / "queries.txt"
        queries.write_text("".join(f"{query_name(i)} AAAA\n" for i in range(NAMES)))
        config = KnotConfig(listen=((SERVER_V4, 53),), udp_workers=1, cpus=(SERVER_CPU,),
                            domain=DEFAULT_DOMAIN)
        holder = f"xdp-bench-{os.getpid()}"
        figures["conditions"]["sysctls"] = rootsysctl.acquire(
            holder, {**rootsysctl.socket_buffers(4 << 20), **rootsysctl.receive_backlog(10_000)},
            netns=[link.netns], pid=os.getpid())
        try:
            run_all(link, queries, rates, args, figures, config, Path(tmp))
        finally:
            rootsysctl.release(holder)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def run_all(link: XdpLink, queries: Path, rates: list[int], args: argparse.Namespace, figures: dict[str, Any],
            config: KnotConfig, tmp: Path) -> None:
    """Every generator at every rate against one knotd."""
    with KnotServer(tmp / "knot", config, netns=link.netns):
        for rate in rates:
            runs = {}
            for name in args.generators:
                time.sleep(1)  # let the server's queue drain between generators
                run = generate(name, link, queries, rate, args)
                run.update(generator=name, rate_qps=rate, cpu_s_per_million=per_million(run))
                runs[name] = run
                figures["runs"].append(run)
                print(f"{name:9s} at {rate:7d} q/s for {args.duration} s: sent {run['sent']:8d}, "
                      f"replies {run['replies']:8d}, CPU {run['user_s'] + run['system_s']:.2f} s "
                      f"({run['user_s']:.2f} user), "
                      f"{run['cpu_s_per_million']:.2f} CPU-s per million queries")
            if "kxdpgun" not in runs:
                continue
            for name, run in runs.items():
                if name == "kxdpgun":
                    continue
                ratio = run["cpu_s_per_million"] / runs["kxdpgun"]["cpu_s_per_million"]
                figures.setdefault("ratios", {}).setdefault(name, {})[str(rate)] = ratio
                print(f"  {name} / kxdpgun CPU per query at {rate} q/s: {ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
