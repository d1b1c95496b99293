"""Loopback benchmark of the xlatperf tester against Knot, side by side with DNS-OARC dnsperf.

Prints figures; asserts nothing. On a 2-core machine: knotd (1 UDP worker) on one CPU, every tester
on the other. Every trial runs through the suite's own measurers (scripts.measurers: LoopbackMeasurer for
xlatperf, DnsperfMeasurer for dnsperf -Q) and is judged by the suite's one verdict (scripts.search.verdict).
It measures, in one run:

1. the server's self-paced capacity: dnsperf without -Q (-c 10 -q 100), queries/s answered;
2. the highest rate with at most 0.01 % loss over --duration s trials: the suite's RFC 8219 binary search
   (scripts.search.rfc8219_search, bounds 10 000 queries/s to 1.5 x the capacity, error 1 % or
   1 000 queries/s) for xlatperf with 1 and 2 thread pairs and for dnsperf -Q, in lockstep (one trial of
   each in turn, a rest after every trial);
   an xlatperf trial is tester-limited by xlatperf's own verdict, a dnsperf trial when it did not send
   rate x duration queries (it silently slows down at its in-flight cap);
3. each tester's CPU-seconds per million queries at one common rate (getrusage of the child), of which
   user space (the rest is the kernel's UDP path, on loopback also the delivery into the server's socket);
4. xlatperf's peak RSS (its own JSON) for a short and a 10x longer trial at the same rate.

Run as root (it raises net.core.rmem_max/rmem_default to --rmem if lower, under the suite's sysctl lease):
    .venv/bin/python dnsperf/bench/loopback_bench.py --out bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlatbench.paths import tester_binary
from xlatbench.scripts.bench import TrialLog
from xlatbench.scripts.clock import RealClock
from xlatbench.scripts.dnsperf import DnsperfOptions, dnsperf_argv, run_dnsperf, write_queries
from xlatbench.scripts.measurers import DnsperfMeasurer, LoopbackMeasurer
from xlatbench.scripts.search import SearchOutcome, SearchSettings, TrialRunner, rfc8219_search, verdict
from xlatbench.scripts.trial import Measurer, TrialResult
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.emulation import rootsysctl
from xlatbench.zones import KnotConfig, KnotServer

LOSS_LIMIT = 1e-4  # 0.01 %, RFC 8219 as the paper applies it
SYSCTLS = ("net.core.rmem_max", "net.core.rmem_default")
SERVER = "127.0.0.1"


@dataclass(frozen=True)
class MeteredTrial:
    """One trial with the CPU its tester process used: user_s in user space, system_s in the kernel, s;
    server_s: the CPU knotd used meanwhile, s."""

    tester: str
    result: TrialResult
    user_s: float
    system_s: float
    server_s: float

    @property
    def cpu_per_million_s(self) -> float:
        sent = self.result.sent
        return (self.user_s + self.system_s) / sent * 1e6 if sent else float("nan")

    @property
    def user_per_million_s(self) -> float:
        return self.user_s / self.result.sent * 1e6 if self.result.sent else float("nan")

    @property
    def server_per_million_s(self) -> float:
        return self.server_s / self.result.sent * 1e6 if self.result.sent else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"tester": self.tester, "trial": self.result.to_dict(with_raw=False),
                "verdict": verdict(self.result, LOSS_LIMIT), "user_s": self.user_s,
                "system_s": self.system_s, "cpu_per_million_s": self.cpu_per_million_s,
                "user_cpu_per_million_s": self.user_per_million_s, "server_s": self.server_s,
                "server_busy_share": self.server_s / self.result.duration_s}


@dataclass
class Metered:
    """A Measurer that keeps every trial with its tester's CPU time (getrusage of the reaped children:
    the benchmark runs one tester process at a time)."""

    tester: str
    inner: Measurer
    server_pid: int
    trials: list[MeteredTrial] = field(default_factory=list)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        before, server_before = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu_s(self.server_pid)
        result = self.inner.measure(duration_s, rate_qps)
        after, server_after = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu_s(self.server_pid)
        self.trials.append(MeteredTrial(self.tester, result, after.ru_utime - before.ru_utime,
                                        after.ru_stime - before.ru_stime, server_after - server_before))
        return result


@dataclass
class Bench:
    """The testers of the benchmark, pinned to one CPU, against Knot on SERVER:port."""

    port: int
    tester_cpu: int
    queries: Path
    server_pid: int

    def xlatperf(self, threads: int) -> Metered:
        cpus = str(self.tester_cpu)
        options = TesterOptions(port=self.port, threads=threads, ports_per_thread=4, sender_cpus=cpus,
                                receiver_cpus=cpus)
        return Metered(f"xlatperf {threads}x4", LoopbackMeasurer(SERVER, options), self.server_pid)

    def dnsperf_options(self, clients: int = 1, outstanding: int = 10_000) -> DnsperfOptions:
        return DnsperfOptions(self.queries, port=self.port, clients=clients, outstanding=outstanding,
                              timeout_s=1.0, cpus=str(self.tester_cpu))

    def dnsperf(self) -> Metered:
        return Metered("dnsperf -Q", DnsperfMeasurer(SERVER, self.dnsperf_options()), self.server_pid)


def log(text: str) -> None:
    print(text, flush=True)


def process_cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, s (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_capacity(bench: Bench, args: argparse.Namespace, figures: dict[str, float]) -> list[MeteredTrial]:
    """dnsperf at its own pace; self-paced runs are no trials at a rate, so only the figure is kept. With the
    server's busy share beside it: a server busy well below one core was not what set the figure."""
    options = bench.dnsperf_options(clients=10, outstanding=100)
    duration_s = args.duration
    argv = dnsperf_argv(SERVER, options, duration_s, None)
    runs, busy = [], []
    for _ in range(args.repeat):
        before = process_cpu_s(bench.server_pid)
        runs.append(run_dnsperf(argv, duration_s))
        busy.append((process_cpu_s(bench.server_pid) - before) / duration_s)
    figures["server_capacity_qps"] = statistics.median(r.qps for r in runs)
    figures["server_busy_share_self_paced"] = statistics.median(busy)
    log(f"server self-paced capacity (dnsperf -c 10 -q 100, {duration_s:g} s runs): "
        f"{', '.join(f'{r.qps:.0f}' for r in runs)} queries/s; "
        f"median {figures['server_capacity_qps']:.0f} queries/s; knotd busy "
        f"{', '.join(f'{b:.2f}' for b in busy)} of a core"
        + ("" if statistics.median(busy) >= 0.95 else
           " (below one core: dnsperf, not the server, set these figures; the capacity is at least this)"))
    return []


def search_settings(args: argparse.Namespace, high_qps: float) -> SearchSettings:
    """The old benchmark's search as SearchSettings: [10 000, high], width max(1 % of lower, 1 000). No rest
    of its own: the lockstep rests after every trial of any search."""
    return SearchSettings(max_rate_qps=high_qps, min_rate_qps=10_000, error_qps=1000, error_ratio=0.01,
                          loss_ratio=LOSS_LIMIT, duration_s=args.duration, rest_s=0.0, repetitions=1)


class Lockstep:
    """Searches in threads whose trials take turns, one trial each in a fixed order with a rest after every
    trial, so that a drifting machine load hits every tester alike (a search cannot be stepped from outside).
    Only the thread whose turn it is runs a trial: the testers never run at the same time."""

    def __init__(self, names: list[str], rest_s: float) -> None:
        self.order, self.turn, self.rest_s, self.aborted = list(names), 0, rest_s, False
        self.cond = threading.Condition()

    def take_turn(self, name: str, trial: Callable[[], TrialResult]) -> TrialResult:
        with self.cond:
            self.cond.wait_for(lambda: self.aborted or self.order[self.turn] == name)
            if self.aborted:
                raise RuntimeError("the benchmark was interrupted")
        try:
            return trial()
        finally:
            time.sleep(self.rest_s)
            with self.cond:
                self.turn = (self.order.index(name) + 1) % len(self.order)
                self.cond.notify_all()

    def leave(self, name: str) -> None:
        with self.cond:
            index = self.order.index(name)
            self.order.remove(name)
            self.turn -= index < self.turn
            self.turn = self.turn % len(self.order) if self.order else 0
            self.cond.notify_all()

    def abort(self) -> None:
        with self.cond:
            self.aborted = True
            self.cond.notify_all()


@dataclass
class Turn:
    """A Measurer that runs its trials when the lockstep says so."""

    lockstep: Lockstep
    name: str
    inner: Measurer

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        return self.lockstep.take_turn(self.name, lambda: self.inner.measure(duration_s, rate_qps))


def run_searches(bench: Bench, args: argparse.Namespace, figures: dict[str, float]) -> list[MeteredTrial]:
    """The suite's RFC 8219 binary search for each tester, in lockstep; a line per trial."""
    settings = search_settings(args, figures.get("server_capacity_qps", 300_000) * 1.5)
    testers = {"xlatperf_1x4": bench.xlatperf(1), "xlatperf_2x4": bench.xlatperf(2),
               "dnsperf_Q": bench.dnsperf()}
    log(f"  RFC 8219 binary searches in lockstep, {settings.min_rate_qps:.0f}-{settings.max_rate_qps:.0f} "
        f"queries/s: {', '.join(m.tester for m in testers.values())}")
    outcomes = in_lockstep(testers, settings, args.rest)
    for key, outcome in outcomes.items():
        if outcome.throughput_qps is not None:
            figures[f"{key}_passed_qps"] = outcome.throughput_qps
        log(f"highest passing rate {key}: {outcome.describe()}")
        busy = ", ".join(f"{t.result.rate_qps:.0f} {verdict(t.result, LOSS_LIMIT)} "
                         f"{t.server_s / t.result.duration_s:.2f}" for t in testers[key].trials)
        log(f"  knotd busy share of a core in each trial of {key} (rate queries/s, verdict, share): {busy}")
    return [t for metered in testers.values() for t in metered.trials]


def in_lockstep(testers: dict[str, Metered], settings: SearchSettings,
                rest_s: float) -> dict[str, SearchOutcome]:
    clock, lockstep = RealClock(), Lockstep(list(testers), rest_s)
    outcomes: dict[str, SearchOutcome] = {}
    errors: list[BaseException] = []  # in the order they happened: the first is the cause

    def search(key: str, metered: Metered) -> None:
        try:
            runner = TrialRunner(Turn(lockstep, key, TrialLog(metered, sys.stdout, clock, clock.now(),
                                                              LOSS_LIMIT)), clock=clock)
            outcomes[key] = rfc8219_search(runner, settings, f"loopback/{key}")
        except BaseException as err:  # handed to the main thread; the other searches stop
            errors.append(err)
            lockstep.abort()
        finally:
            lockstep.leave(key)

    threads = [threading.Thread(target=search, args=item, daemon=True) for item in testers.items()]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        lockstep.abort()
        raise
    if errors:
        raise errors[0]
    return {key: outcomes[key] for key in testers}


def compare_cpu(bench: Bench, args: argparse.Namespace, figures: dict[str, float]) -> list[MeteredTrial]:
    """Both testers at one rate, interleaved so that a drifting machine load hits both alike."""
    testers = [bench.xlatperf(1), bench.dnsperf()]
    for _ in range(args.repeat):
        for metered in testers:
            metered.measure(args.duration, args.common_rate)
            time.sleep(args.rest)
    for metered in testers:
        log_cpu(metered, args.common_rate, figures)
    return [t for metered in testers for t in metered.trials]


def log_cpu(metered: Metered, rate_qps: float, figures: dict[str, float]) -> None:
    runs = metered.trials
    values = [t.cpu_per_million_s for t in runs]
    user = [t.user_per_million_s for t in runs]
    figures[f"cpu_per_million_s {metered.tester}"] = statistics.median(values)
    figures[f"user_cpu_per_million_s {metered.tester}"] = statistics.median(user)
    server = [t.server_per_million_s for t in runs]
    figures[f"server_cpu_per_million_s {metered.tester}"] = statistics.median(server)
    log(f"CPU at {rate_qps:.0f} queries/s, {metered.tester}: {', '.join(f'{v:.3f}' for v in values)} CPU-s "
        f"per million queries, of which user space {', '.join(f'{v:.3f}' for v in user)} "
        f"(sent {', '.join(str(t.result.sent) for t in runs)}; loss "
        f"{', '.join(f'{100 * t.result.loss_ratio:.4f} %' for t in runs)}; verdicts "
        f"{[verdict(t.result, LOSS_LIMIT) for t in runs]}); knotd meanwhile "
        f"{', '.join(f'{v:.3f}' for v in server)} CPU-s per million queries")


def compare_rss(bench: Bench, args: argparse.Namespace, figures: dict[str, float]) -> list[MeteredTrial]:
    metered = bench.xlatperf(1)
    for duration in args.rss_durations:
        result = metered.measure(duration, args.rss_rate)
        rss = int((result.raw or {}).get("cpu", {}).get("max_rss_kib", 0))
        figures[f"xlatperf_max_rss_kib_{duration:.0f}s"] = rss
        log(f"xlatperf peak RSS at {args.rss_rate:.0f} queries/s for {duration:.0f} s: {rss} KiB "
            f"(sent {result.sent}, loss {100 * result.loss_ratio:.4f} %)")
        time.sleep(args.rest)
    return metered.trials


@contextmanager
def rmem_at_least(size: int) -> Iterator[dict[str, object]]:
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
    add = parser.add_argument
    add("--port", type=int, default=random.randint(42000, 48000),
        help="Knot UDP port on 127.0.0.1 (default: random high port)")
    add("--duration", type=float, default=10.0, help="trial length, s (default: %(default)s)")
    add("--rest", type=float, default=2.0, help="pause between trials, s (default: %(default)s)")
    add("--common-rate", type=float, default=100_000,
        help="rate for the CPU comparison, queries/s (default: %(default)s)")
    add("--repeat", type=int, default=3,
        help="repetitions of the capacity and CPU measurements (default: %(default)s)")
    add("--rss-rate", type=float, default=50_000,
        help="rate of the RSS comparison, queries/s (default: %(default)s)")
    add("--rss-durations", type=float, nargs=2, default=(10.0, 100.0),
        help="short and long trial of the RSS comparison, s (default: 10 100)")
    add("--tester-cpu", type=int, default=0, help="CPU of every tester (default: %(default)s)")
    add("--server-cpu", type=int, default=1, help="CPU of knotd (default: %(default)s)")
    add("--rmem", type=int, default=4 << 20, help="root rmem sysctls at least this, bytes")
    add("--skip", nargs="*", default=[], choices=["capacity", "search", "cpu", "rss"], help="parts to skip")
    add("--out", type=Path, help="also write every trial and figure as JSON here")
    return parser.parse_args(argv)


def conditions(args: argparse.Namespace, knot: KnotServer, rmem: dict[str, object]) -> dict[str, object]:
    version = subprocess.run([str(tester_binary()), "--version"], capture_output=True, text=True)
    return {"cpus_online": os.cpu_count(), "tester_cpu": args.tester_cpu, "server_cpu": args.server_cpu,
            "rmem": rmem, "knot": knot.describe(), "xlatperf": version.stdout.strip(),
            "xlatperf_options": "defaults (timeout 0.25 s, batch 64, send and receive ticks 1 ms, "
                                "--gso auto) unless in the trial",
            "dnsperf": "DNS-OARC dnsperf (Debian), -c 1 -q 10000 -t 1 for -Q runs",
            "trial_s": args.duration, "loss_limit": LOSS_LIMIT, "kernel": os.uname().release}


PARTS: dict[str, Callable[[Bench, argparse.Namespace, dict[str, float]], list[MeteredTrial]]] = {
    "capacity": measure_capacity, "search": run_searches, "cpu": compare_cpu, "rss": compare_rss,
}


def run_parts(args: argparse.Namespace, workdir: Path, report: dict[str, Any]) -> list[MeteredTrial]:
    knot = KnotServer(workdir / "knot", KnotConfig(listen=((SERVER, args.port),), udp_workers=1,
                                                  cpus=(args.server_cpu,)))
    trials: list[MeteredTrial] = []
    with knot:
        bench = Bench(args.port, args.tester_cpu, write_queries(workdir / "queries.txt"),
                      int(knot.describe()["pid"]))
        report["conditions"] = conditions(args, knot, report.pop("rmem"))
        log(f"conditions: {json.dumps(report['conditions'])}")
        for name, part in PARTS.items():
            if name not in args.skip:
                trials += part(bench, args, report["figures"])
        report["knot_after"] = knot.describe()
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
    report: dict[str, Any] = {"figures": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="xlp-bench-") as tmp, rmem_at_least(args.rmem) as rmem:
            report["rmem"] = rmem
            trials = run_parts(args, Path(tmp), report)
    except (OSError, RuntimeError, ValueError) as err:
        print(f"loopback_bench: {err}", file=sys.stderr)
        return 1
    report["trials"] = [t.to_dict() for t in trials]
    print_ratios(report["figures"])
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
