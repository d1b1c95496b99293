"""`xlatbench demo`: the whole suite in one command on one machine.

Runs the demo campaign (the tester's loopback self-test, then the baseline, 464XLAT and MAP-T chains
emulated in namespaces at 1 and 2 DUT cores, short trials, both searches, idle capture) and writes the
report (tables like the paper's, figures, bottleneck verdicts). The store is resumable: a demo that was
interrupted continues where it stopped when run again; `--fresh` starts over.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .analysis.report import write_report
from .paths import REPO_ROOT, tester_binary
from .scripts.campaign import CampaignRun
from .scripts.campaignfile import load_campaign
from .scripts.cli import run_campaign

DEFAULT_CAMPAIGN = REPO_ROOT / "campaigns" / "demo.toml"
DEFAULT_OUT = REPO_ROOT / "demo-results"


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser(
        "demo", help="run the demo campaign (all three topologies emulated, short trials) and its report")
    demo.add_argument("--campaign", type=Path, default=DEFAULT_CAMPAIGN,
                      help="campaign file to run (default: %(default)s)")
    demo.add_argument("--out", type=Path, default=DEFAULT_OUT,
                      help="directory for the results store and the report (default: %(default)s)")
    demo.add_argument("--fresh", action="store_true",
                      help="discard an earlier demo's results instead of resuming them")
    demo.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise RuntimeError("the demo needs root (network namespaces, cpusets, sysctls): run it with sudo")
    tester_binary()  # fail now, with the fix, rather than after the first setup came up
    store = args.out / "demo.jsonl"
    if args.fresh and store.exists():
        store.unlink()
    campaign = load_campaign(args.campaign, store)
    status = run_campaign(CampaignRun(campaign, progress=not args.no_progress))
    if status != 0:
        return status
    report, text = write_report(store, args.out / "report")
    print(text)
    print(f"report: {report} (figures, tables.csv and verdicts.json beside it); results store: {store}")
    return 0
