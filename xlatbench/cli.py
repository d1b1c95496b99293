"""`xlatbench SUBCOMMAND ...`: one front door; each part of the suite registers its own subcommands.

A part is a module with `register(subparsers)`, adding parsers whose defaults carry `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from . import __version__

PARTS = (
    "xlatbench.zones.cli",
    "xlatbench.setups.cli",
    "xlatbench.setups.emulation.cli",
    "xlatbench.setups.testbed.cli",
    "xlatbench.scripts.cli",
    "xlatbench.analysis.cli",
    "xlatbench.demo",
)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line naming the argument and where help is (subcommands inherit the class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="xlatbench",
        description="Benchmark IPv4-as-a-Service translators (464XLAT, MAP-T) with DNS traffic "
        "through a dual-DUT chain (RFC 8219 throughput, Lencse & Nagy's method).",
    )
    parser.add_argument("--version", action="version", version=f"xlatbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in PARTS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:  # a part that exists but fails to import is a bug: say so
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("xlatbench: interrupted", file=sys.stderr)
        return 130
    except (OSError, RuntimeError, ValueError) as err:
        print(f"xlatbench {args.command}: {err}", file=sys.stderr)
        return 1
