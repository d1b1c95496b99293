"""`xlatbench demo`: the whole suite in one command on one machine, in under ten minutes on 2 CPUs.

First it measures the searches' upper bound: a loopback trial (tester against Knot, no DUT) is raised,
doubling, until one fails; that failing rate replaces the campaign file's max_rate_qps, so no search is
capped by a ceiling the machine could pass. Then it runs the demo campaign (the tester's self-test and the
baseline, 464XLAT and MAP-T chains emulated in namespaces, the RFC 8219 search (and MLRsearch when the file
lists it), idle capture with latency), writes
the report (report.html, report.md, tables.csv, figures) and prints the tables, the verdicts and where the
report is. The self-test must run Knot where the chains run theirs (`knot_placement`): the report divides
every chain's throughput by the self-test's, so unlike placements would make those ratios meaningless; a
campaign whose loopback setup pins Knot elsewhere is refused. The store is resumable: a demo that was
interrupted continues where it stopped when run again;
`--fresh` starts over (and measures the upper bound again).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .analysis.report import write_report
from .paths import REPO_ROOT, tester_binary
from .scripts.campaign import CampaignRun
from .scripts.campaignfile import Campaign, load_campaign
from .scripts.cli import run_campaign
from .scripts.environments.registry import make_environment
from .scripts.search.runner import PASS, TESTER_LIMITED, verdict
from .scripts.trial import TrialResult

DEFAULT_CAMPAIGN = REPO_ROOT / "campaigns" / "demo.toml"
DEFAULT_OUT = REPO_ROOT / "demo-results"
# The probe's first rate, queries/s, its growth per step and its trials' length, s.
PROBE_START_QPS = 25_000.0
PROBE_FACTOR = 2.0
PROBE_DURATION_S = 1.0
PROBE_REST_S = 0.5
PROBE_MAX_STEPS = 10
# A tester-limited probe trial is run again this many times before it counts as the failure.
TESTER_RETRIES = 2
MAX_RATE_LINE = re.compile(r"^max_rate_qps\s*=.*$", re.MULTILINE)


@dataclass
class Probe:
    """Rates raised until a trial failed. passed_qps: highest passing rate (None if none), failed_qps: the
    first failing rate (None if none failed within PROBE_MAX_STEPS), trials: every trial, in order."""

    passed_qps: float | None = None
    failed_qps: float | None = None
    trials: list[TrialResult] = field(default_factory=list)
    loss_ratio: float = 1e-4

    def describe(self) -> str:
        if self.failed_qps is None:
            return f"no trial failed up to {self.passed_qps or 0:,.0f} queries/s"
        last = self.trials[-1] if self.trials else None
        why = ("not recorded" if last is None else "tester could not offer it"
               if verdict(last, self.loss_ratio) == TESTER_LIMITED else f"loss {100 * last.loss_ratio:.3f} %")
        passed = f"{self.passed_qps:,.0f}" if self.passed_qps else "none"
        return f"{self.failed_qps:,.0f} queries/s failed ({why}); highest passing rate {passed} queries/s"


def raise_until_failure(measure: Callable[[float, float], TrialResult], loss_ratio: float,
                        start_qps: float = PROBE_START_QPS, factor: float = PROBE_FACTOR,
                        duration_s: float = PROBE_DURATION_S, rest_s: float = PROBE_REST_S,
                        max_steps: int = PROBE_MAX_STEPS, say: Callable[[str], None] = print) -> Probe:
    """Trials at start_qps, start_qps x factor, ... until one fails (DUT loss or tester limit)."""
    probe, rate = Probe(loss_ratio=loss_ratio), start_qps
    for _ in range(max_steps):
        for _attempt in range(1 + TESTER_RETRIES):  # a sender preempted once says little on a shared machine
            result = measure(duration_s, rate)
            probe.trials.append(result)
            judged = verdict(result, loss_ratio)  # the suite's one trial verdict (DUT loss first)
            ok = judged == PASS
            say(f"  upper-bound probe: {rate:,.0f} queries/s for {duration_s:g} s: "
                f"{'passed' if ok else 'failed'} (loss {100 * result.loss_ratio:.3f} %"
                f"{', tester-limited' if judged == TESTER_LIMITED else ''})")
            if judged != TESTER_LIMITED:
                break
            time.sleep(rest_s)
        if not ok:
            probe.failed_qps = rate
            return probe
        probe.passed_qps = rate
        rate *= factor
        time.sleep(rest_s)
    return probe


def _knot_cpus(value: object) -> tuple[int, ...] | None:
    """A setup table's knot_cpus (a list or "0,2-3" text, as the campaign file allows) as CPU numbers."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return tuple(sorted(int(c) for c in value))
    cpus: set[int] = set()
    for part in str(value).replace(" ", "").split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return tuple(sorted(cpus))


def knot_placement(campaign: Campaign) -> tuple[int, ...] | None:
    """The CPUs Knot is pinned to in the campaign's self-test, which must be the chains' (every chain setup's
    `options.knot_cpus` alike, None when unpinned): ValueError, one line, otherwise."""
    chains = {_knot_cpus((s.params.get("options") or {}).get("knot_cpus"))
              for s in campaign.setups if s.kind == "chain"}
    if len(chains) > 1:
        raise ValueError(f"the demo's chains pin Knot differently ({sorted(chains, key=str)}): the self-test "
                         "can match only one placement")
    wanted = next(iter(chains), None)
    for setup in campaign.setups:
        found = _knot_cpus(setup.params.get("knot_cpus"))
        if setup.kind == "loopback" and found != wanted:
            raise ValueError(
                f"the demo's self-test ({setup.name}) pins Knot to CPU(s) {_shown(found)} but its chains to "
                f"{_shown(wanted)}: set the loopback setup's knot_cpus to {_shown(wanted)}, so the "
                "'/ loopback self-test' ratios compare like with like")
    return wanted


def _shown(cpus: tuple[int, ...] | None) -> str:
    return "none (unpinned)" if cpus is None else str(list(cpus))


def measure_upper_bound(campaign_file: Path, say: Callable[[str], None] = print) -> Probe:
    """Bring the campaign's loopback setup up and raise its rate until a trial fails."""
    campaign = load_campaign(campaign_file)
    knot_placement(campaign)  # the self-test runs as the chains do, or not at all
    setup = next((s for s in campaign.setups if s.kind == "loopback"), None)
    if setup is None:
        raise ValueError(f"{campaign_file}: the demo needs a loopback setup to measure its upper bound")
    env = make_environment(setup, campaign.tester)
    say(f"measuring the searches' upper bound on loopback ({setup.name}: xlatperf against Knot, no DUT)")
    env.up()
    try:
        env.set_cores(1)
        measurer = env.measurer()
        return raise_until_failure(measurer.measure, campaign.searches[0][1].loss_ratio, say=say)
    finally:
        env.down()


def effective_campaign(campaign_file: Path, probe: Probe, out: Path) -> Path:
    """The campaign file with every max_rate_qps set to the probe's failing rate and a comment saying so."""
    if probe.failed_qps is None:
        raise RuntimeError(f"the upper-bound probe found no failing rate ({probe.describe()}): the tester "
                           "outran the machine's loopback; raise PROBE_MAX_STEPS")
    text = campaign_file.read_text()
    if not MAX_RATE_LINE.search(text):
        raise ValueError(f"{campaign_file}: no max_rate_qps line for the demo to set")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    note = f"# xlatbench demo, {when}: max_rate_qps measured on loopback: {probe.describe()}.\n"
    out.mkdir(parents=True, exist_ok=True)
    effective = out / "demo-run.toml"
    effective.write_text(note + MAX_RATE_LINE.sub(f"max_rate_qps = {probe.failed_qps:.0f}", text))
    return effective


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser(
        "demo", help="measure the upper bound, run the demo campaign (self-test, three emulated chains, "
                     "short searches, idle capture) and write report.html")
    demo.add_argument("--campaign", type=Path, default=DEFAULT_CAMPAIGN,
                      help="campaign file to run (default: %(default)s)")
    demo.add_argument("--out", type=Path, default=DEFAULT_OUT,
                      help="directory for the results store and the report (default: %(default)s)")
    demo.add_argument("--fresh", action="store_true",
                      help="discard an earlier demo's results (and its measured upper bound) and start over")
    demo.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise RuntimeError("the demo needs root (network namespaces, cpusets, sysctls): run it with sudo")
    tester_binary()  # fail now, with the fix, rather than after the first setup came up
    started = time.monotonic()
    store, effective = args.out / "demo.jsonl", args.out / "demo-run.toml"
    if args.fresh:
        for path in (store, effective):
            path.unlink(missing_ok=True)
    if not (store.exists() and effective.exists()):  # a resumed demo keeps the bound it measured
        store.unlink(missing_ok=True)
        effective = effective_campaign(args.campaign, measure_upper_bound(args.campaign), args.out)
    print(f"running {effective}", flush=True)
    campaign = load_campaign(effective, store)
    knot_placement(campaign)
    status = run_campaign(CampaignRun(campaign, progress=not args.no_progress))
    if status != 0:
        return status
    report, text = write_report(store, args.out / "report")
    sys.stdout.write(_summary(text))
    print(f"\nreport: {report.with_name('report.html')} (report.md, tables.csv, verdicts.json and the "
          f"figures beside it); results store: {store}; wall time {time.monotonic() - started:.0f} s")
    return 0


def _summary(markdown: str) -> str:
    """The report's Markdown without its figure links: the tables and the verdicts."""
    return markdown.split("\n## Figures", 1)[0].rstrip() + "\n"
