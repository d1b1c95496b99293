"""Loopback benchmark of the xlatperf tester against Knot, side by side with DNS-OARC dnsperf.

Prints figures; asserts nothing. On a 2-core machine: knotd (1 UDP worker) on one CPU, every tester
on the other. It measures, in one run:

1. the server's self-paced capacity: dnsperf without -Q (-c 10 -q 100), queries/s answered;
2. the highest rate with at most 0.01 % loss over --duration s trials (binary search), for xlatperf
   with 1 and 2 thread pairs and for dnsperf -Q; a dnsperf trial counts only if it really sent
   rate x duration queries (it silently slows down at its in-flight cap), an xlatperf trial only
   if its verdict is "ok";
3. each tester's CPU-seconds per million queries at one common rate (getrusage of the child);
4. xlatperf's peak RSS for a short and a 10x longer trial at the same rate.

Run as root (it raises net.core.rmem_max/rmem_default to --rmem if lower, and restores them):
    .venv/bin/python dnsperf/bench/loopback_bench.py --out bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from xlatbench.paths import tester_binary
from xlatbench.setups import rootsysctl
from xlatbench.zones import KnotConfig, KnotServer

LOSS_LIMIT = 1e-4  # 0.01 %, RFC 8219 as the paper applies it
SYSCTLS = ("net.core.rmem_max", "net.core.rmem_default")


@dataclass
class Trial:
    """One tester run. rate_qps asked (None: self-paced); counts in queries; cpu_s = user + system s,
    user_s the user-space part (the rest is the kernel's UDP path, on loopback also the delivery of each
    query into the server's socket, which the kernel charges to the sender)."""

    tester: str
    rate_qps: float | None
    duration_s: float
    sent: int
    answered: int
    loss_ratio: float
    counts: bool        # the tester really offered what was asked (verdict ok / sent all)
    cpu_s: float
    user_s: float
    max_rss_kib: int
    qps: float          # answered queries per second of the trial
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.counts and self.loss_ratio <= LOSS_LIMIT

    @property
    def cpu_per_million_s(self) -> float:
        return self.cpu_s / self.sent * 1e6 if self.sent else float("nan")

    @property
    def user_per_million_s(self) -> float:
        return self.user_s / self.sent * 1e6 if self.sent else float("nan")


def run_measured(argv: list[str], timeout_s: float) -> tuple[str, float, float, int]:
    """Runs argv; returns stdout+stderr, the child's CPU-seconds (user+system), its user-space CPU-seconds
    and its peak RSS in KiB."""
    with tempfile.TemporaryFile(mode="w+") as output:
        proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        killer = threading.Timer(timeout_s, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()  # interrupted: leave no tester behind
            proc.wait()
            raise
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.returncode}: {text[-500:]}")
    return text, usage.ru_utime + usage.ru_stime, usage.ru_utime, usage.ru_maxrss


@dataclass
class Bench:
    port: int
    duration_s: float
    tester_cpu: int
    dnsperf_data: Path
    workdir: Path

    def xlatperf(self, rate: float, threads: int = 1, ports: int = 4, duration_s: float | None = None,
                 extra: tuple[str, ...] = ()) -> Trial:
        duration = duration_s or self.duration_s
        out = self.workdir / "xlatperf.json"
        argv = [str(tester_binary()), "--server", "127.0.0.1", "--port", str(self.port), "--rate", str(rate),
                "--duration", str(duration), "--threads", str(threads), "--ports-per-thread", str(ports),
                "--sender-cpus", str(self.tester_cpu), "--receiver-cpus", str(self.tester_cpu),
                "--json", str(out), "--quiet", *extra]
        text, cpu_s, user_s, rss = run_measured(argv, duration * 3 + 30)
        result = json.loads(out.read_text())
        totals = result["totals"]
        ok = result["verdict"]["status"] == "ok"
        return Trial(f"xlatperf {threads}x{ports}", rate, duration, totals["sent"], totals["valid"],
                     result["loss_ratio"], ok, cpu_s, user_s, rss, totals["valid"] / duration,
                     "; ".join(result["verdict"]["reasons"]))

    def dnsperf(self, rate: float | None, clients: int = 1, outstanding: int = 10000,
                duration_s: float | None = None) -> Trial:
        duration = duration_s or self.duration_s
        argv = ["taskset", "-c", str(self.tester_cpu), "dnsperf", "-s", "127.0.0.1", "-p", str(self.port),
                "-d", str(self.dnsperf_data), "-l", str(duration), "-c", str(clients), "-q", str(outstanding),
                "-t", "1"]
        if rate is not None:
            argv += ["-Q", str(int(rate))]
        text, cpu_s, user_s, rss = run_measured(argv, duration * 3 + 30)
        sent = int(re.search(r"Queries sent:\s+(\d+)", text).group(1))
        completed = int(re.search(r"Queries completed:\s+(\d+)", text).group(1))
        qps = float(re.search(r"Queries per second:\s+([\d.]+)", text).group(1))
        # dnsperf counts every reply as completed; loss here is what never came back within 1 s.
        loss = 1 - completed / sent if sent else 1.0
        counts = rate is None or sent >= rate * duration * (1 - LOSS_LIMIT)
        name = "dnsperf -Q" if rate is not None else f"dnsperf -c {clients} -q {outstanding}"
        return Trial(name, rate, duration, sent, completed, loss, counts, cpu_s, user_s, rss, qps,
                     "" if counts else f"sent only {sent} of {int(rate * duration)}")


@dataclass
class Search:
    """Binary search for the highest passing rate in [low, high], to within 1 % (low is assumed to pass)."""

    name: str
    trial: Callable[[float], Trial]
    low: float
    high: float
    best: float = 0.0

    def done(self) -> bool:
        return self.high - self.low <= max(self.low * 0.01, 1000)

    def step(self) -> Trial:
        rate = round((self.low + self.high) / 2, -2)
        result = self.trial(rate)
        verdict = "pass" if result.passed else "FAIL"
        log(f"  {self.name:>14} {rate:>9.0f} q/s: sent {result.sent}, "
            f"loss {result.loss_ratio * 100:.4f} % -> {verdict} {result.note}")
        if result.passed:
            self.low = self.best = rate
        else:
            self.high = rate
        return result


@contextmanager
def rmem_at_least(size: int, log: Callable[[str], None]) -> Iterator[dict[str, object]]:
    """Raises the root rmem sysctls to `size` if lower, under the suite's sysctl lease (so a chain that is
    up meanwhile keeps its values, and a killed bench's change is undone by the next holder); yields the
    original and current value of each."""
    holder = f"loopback-bench-{os.getpid()}"
    report = rootsysctl.acquire(holder, dict.fromkeys(SYSCTLS, size), netns=[], pid=os.getpid())
    log(f"socket buffers: {json.dumps(report)}")
    try:
        yield report
    finally:
        restored = rootsysctl.release(holder)
        if restored:
            log(f"restored {json.dumps(restored)}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=random.randint(42000, 48000),
                        help="Knot UDP port on 127.0.0.1 (default: random high port)")
    parser.add_argument("--duration", type=float, default=10.0,
                        help="trial length, s (default: %(default)s)")
    parser.add_argument("--rest", type=float, default=2.0,
                        help="pause between trials, s (default: %(default)s)")
    parser.add_argument("--common-rate", type=float, default=100_000,
                        help="rate for the CPU comparison, queries/s (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="repetitions of the capacity and CPU measurements (default: %(default)s)")
    parser.add_argument("--rss-rate", type=float, default=50_000,
                        help="rate of the RSS comparison, queries/s (default: %(default)s)")
    parser.add_argument("--rss-durations", type=float, nargs=2, default=(10.0, 100.0),
                        help="short and long trial of the RSS comparison, s (default: 10 100)")
    parser.add_argument("--tester-cpu", type=int, default=0,
                        help="CPU of every tester (default: %(default)s)")
    parser.add_argument("--server-cpu", type=int, default=1, help="CPU of knotd (default: %(default)s)")
    parser.add_argument("--rmem", type=int, default=4 << 20, help="root rmem sysctls at least this, bytes")
    parser.add_argument("--skip", nargs="*", default=[], choices=["capacity", "search", "cpu", "rss"],
                        help="parts to skip")
    parser.add_argument("--out", type=Path, help="also write every trial and figure as JSON here")
    return parser.parse_args(argv)


def log(text: str) -> None:
    print(text, flush=True)


def measure_capacity(bench: Bench, repeat: int, figures: dict[str, float]) -> list[Trial]:
    runs = [bench.dnsperf(None, clients=10, outstanding=100) for _ in range(repeat)]
    figures["server_capacity_qps"] = statistics.median(t.qps for t in runs)
    log(f"server self-paced capacity (dnsperf -c 10 -q 100): {', '.join(f'{t.qps:.0f}' for t in runs)} "
        f"queries/s; median {figures['server_capacity_qps']:.0f} queries/s")
    return runs


def run_searches(bench: Bench, rest_s: float, figures: dict[str, float]) -> list[Trial]:
    """The three searches step in turn, one trial each, so that a drifting machine load hits all alike."""
    high = figures.get("server_capacity_qps", 300_000) * 1.5
    searches = [
        Search("xlatperf_1x4", lambda r: bench.xlatperf(r, 1, 4), 10_000, high),
        Search("xlatperf_2x4", lambda r: bench.xlatperf(r, 2, 4), 10_000, high),
        Search("dnsperf_Q", lambda r: bench.dnsperf(r), 10_000, high),
    ]
    trials: list[Trial] = []
    while not all(s.done() for s in searches):
        for search in searches:
            if not search.done():
                trials.append(search.step())
                time.sleep(rest_s)
    for search in searches:
        figures[f"{search.name}_passed_qps"] = search.best or search.low
        log(f"highest passing rate {search.name}: {search.best or search.low:.0f} queries/s")
    return trials


def compare_cpu(bench: Bench, rate: float, repeat: int, rest_s: float,
                figures: dict[str, float]) -> list[Trial]:
    per_tester: dict[str, list[Trial]] = {"xlatperf 1x4": [], "dnsperf -Q": []}
    for _ in range(repeat):  # interleaved, so drifting load hits both alike
        per_tester["xlatperf 1x4"].append(bench.xlatperf(rate, 1, 4))
        time.sleep(rest_s)
        per_tester["dnsperf -Q"].append(bench.dnsperf(rate))
        time.sleep(rest_s)
    trials: list[Trial] = []
    for name, runs in per_tester.items():
        trials += runs
        values = [t.cpu_per_million_s for t in runs]
        figures[f"cpu_per_million_s {name}"] = statistics.median(values)
        user = [t.user_per_million_s for t in runs]
        figures[f"user_cpu_per_million_s {name}"] = statistics.median(user)
        log(f"CPU at {rate:.0f} queries/s, {name}: {', '.join(f'{v:.3f}' for v in values)} CPU-s per million "
            f"queries, of which user space {', '.join(f'{v:.3f}' for v in user)} "
            f"(sent {', '.join(str(t.sent) for t in runs)}; loss "
            f"{', '.join(f'{t.loss_ratio * 100:.4f} %' for t in runs)}; counts {[t.counts for t in runs]})")
    return trials


def compare_rss(bench: Bench, rate: float, durations: tuple[float, float],
                figures: dict[str, float]) -> list[Trial]:
    trials = []
    for duration in durations:
        t = bench.xlatperf(rate, 1, 4, duration_s=duration)
        trials.append(t)
        figures[f"xlatperf_max_rss_kib_{duration:.0f}s"] = t.max_rss_kib
        log(f"xlatperf peak RSS at {rate:.0f} queries/s for {duration:.0f} s: {t.max_rss_kib} KiB "
            f"(sent {t.sent}, loss {t.loss_ratio * 100:.4f} %)")
    return trials


def print_ratios(figures: dict[str, float]) -> None:
    log("figures: " + json.dumps(figures, indent=2))
    capacity = figures.get("server_capacity_qps")
    if capacity:
        for key in ("xlatperf_1x4_passed_qps", "xlatperf_2x4_passed_qps", "dnsperf_Q_passed_qps"):
            if key in figures:
                log(f"  {key} / server capacity = {figures[key] / capacity:.3f}")
    if "cpu_per_million_s dnsperf -Q" in figures:
        ratio = figures["cpu_per_million_s xlatperf 1x4"] / figures["cpu_per_million_s dnsperf -Q"]
        log(f"  CPU per query, xlatperf / dnsperf -Q = {ratio:.3f}")
        user = figures["user_cpu_per_million_s xlatperf 1x4"] / figures["user_cpu_per_million_s dnsperf -Q"]
        log(f"  user-space CPU per query, xlatperf / dnsperf -Q = {user:.3f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanups
    report: dict[str, object] = {}
    figures: dict[str, float] = {}
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="xlp-bench-") as tmp, rmem_at_least(args.rmem, log) as rmem:
        workdir = Path(tmp)
        data = workdir / "queries.txt"
        data.write_text("".join(f"010-000-{i >> 8:03d}-{i & 255:03d}.dns64perf.test AAAA\n"
                                for i in range(65536)))
        knot = KnotServer(workdir / "knot", KnotConfig(listen=(("127.0.0.1", args.port),), udp_workers=1,
                                                      cpus=(args.server_cpu,)))
        with knot:
            bench = Bench(args.port, args.duration, args.tester_cpu, data, workdir)
            version = subprocess.run([str(tester_binary()), "--version"], capture_output=True, text=True)
            report["conditions"] = {
                "cpus_online": os.cpu_count(), "tester_cpu": args.tester_cpu, "server_cpu": args.server_cpu,
                "rmem": rmem, "knot": knot.describe(), "xlatperf": version.stdout.strip(),
                "xlatperf_options": "defaults (batch 64, send and receive ticks 1 ms) unless in the trial",
                "dnsperf": "DNS-OARC dnsperf 2.10.0 (Debian), -c 1 -q 10000 -t 1 for -Q runs",
                "trial_s": args.duration, "loss_limit": LOSS_LIMIT, "kernel": os.uname().release,
            }
            log(f"conditions: {json.dumps(report['conditions'])}")
            if "capacity" not in args.skip:
                trials += measure_capacity(bench, args.repeat, figures)
            if "search" not in args.skip:
                trials += run_searches(bench, args.rest, figures)
            if "cpu" not in args.skip:
                trials += compare_cpu(bench, args.common_rate, args.repeat, args.rest, figures)
            if "rss" not in args.skip:
                trials += compare_rss(bench, args.rss_rate, tuple(args.rss_durations), figures)
            report["knot_after"] = knot.describe()
    report["figures"] = figures
    report["trials"] = [asdict(t) | {"passed": t.passed, "cpu_per_million_s": t.cpu_per_million_s,
                                      "user_cpu_per_million_s": t.user_per_million_s}
                        for t in trials]
    print_ratios(figures)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
