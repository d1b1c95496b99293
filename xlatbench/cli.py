"""Command-line entry point: `xlatbench SUBCOMMAND ...`."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("xlatbench: nothing here yet", file=sys.stderr)
    return 1
