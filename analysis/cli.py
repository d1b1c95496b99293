"""`xlatbench report STORE`: tables, figures and bottleneck verdicts from a campaign's results store."""

from __future__ import annotations

import argparse
from pathlib import Path

from .report import write_report


def register(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report", help="tables like the paper's, throughput-vs-cores and idle plots, bottleneck verdicts")
    report.add_argument("store", type=Path, help="a campaign's results store (.jsonl)")
    report.add_argument("--out", type=Path,
                        help="directory for report.md, tables.csv, verdicts.json and the PNG figures "
                        "(default: STORE without .jsonl, plus -report)")
    report.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    out = args.out or args.store.with_name(args.store.stem + "-report")
    path, text = write_report(args.store, out)
    print(text)
    print(f"report written to {path} (figures and tables.csv beside it)")
    return 0
