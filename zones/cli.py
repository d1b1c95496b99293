"""`xlatbench knot start|stop`: run the echo server by hand (the suite starts it itself when it measures)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..cpulist import cpu_list_arg
from .knot import KnotConfig, KnotServer, stop_stale
from .zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET

DEFAULT_WORKDIR = Path("/run/xlatbench/knot")


def _listen(text: str) -> tuple[str, int]:
    address, _, port = text.rpartition("@")
    if not address or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected ADDRESS@PORT, e.g. 127.0.0.1@53, got {text!r}")
    return address, int(port)


def register(subparsers: argparse._SubParsersAction) -> None:
    knot = subparsers.add_parser("knot", help="start or stop the Knot DNS echo server")
    actions = knot.add_subparsers(dest="knot_action", required=True)

    start = actions.add_parser("start", help="start knotd in the background and wait until it answers")
    start.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                       help="directory for knot.conf, the zone, pid file and log (default: %(default)s)")
    start.add_argument("--listen", type=_listen, action="append",
                       help="ADDRESS@PORT to listen on, repeatable (default: 127.0.0.1@53)")
    start.add_argument("--udp-workers", type=int, default=1, help="UDP worker threads (default: %(default)s)")
    start.add_argument("--cpus", type=cpu_list_arg,
                       help="pin all knotd threads to these CPUs, e.g. 1 (default: knotd's own placement)")
    start.add_argument("--netns", help="network namespace to run knotd in (default: the current one)")
    start.add_argument("--xdp", metavar="INTERFACE",
                       help="also answer UDP arriving on this interface in Knot's XDP mode (default: sockets "
                            "only)")
    start.add_argument("--domain", default=DEFAULT_DOMAIN, help="zone apex (default: %(default)s)")
    start.add_argument("--subnet", default=DEFAULT_SUBNET,
                       help="one AAAA record per address of this IPv4 subnet (default: %(default)s)")
    start.set_defaults(func=_start)

    stop = actions.add_parser("stop", help="stop the knotd of a workdir (also one left by a killed run)")
    stop.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="(default: %(default)s)")
    stop.set_defaults(func=_stop)


def _start(args: argparse.Namespace) -> int:
    config = KnotConfig(listen=tuple(args.listen or [("127.0.0.1", 53)]), udp_workers=args.udp_workers,
                        cpus=args.cpus, domain=args.domain, subnet=args.subnet, xdp_interface=args.xdp)
    server = KnotServer(args.workdir, config, netns=args.netns)
    server.start()
    print(json.dumps(server.describe(), indent=2))
    return 0


def _stop(args: argparse.Namespace) -> int:
    stop_stale(args.workdir)
    return 0
