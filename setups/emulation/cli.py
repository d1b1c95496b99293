"""`xlatbench setup up|check|down|describe` and `setup render --netns`: the emulated testbeds from the command
line. The `setup` group, its backend options and the real hosts' `setup render` are the core's
(setups/cli.py); this module adds the emulation's actions to that group."""

from __future__ import annotations

import argparse
import json
import sys

from ...cpulist import cpu_list_arg
from ...zones import IO_MODES
from ..backends import registry
from ..cli import NETNS_RENDER, add_backend_options, add_ces_option, backends_of, setup_actions
from ..paper import TOPOLOGIES
from ..plan import BackendChoice, header
from ..transports import DryRun
from .cleanup import down, leftovers
from .emulator import Emulation, EmulationConfig, EmulationError, attach
from .names import check_prefix, netns_name, rundir


def _prefix(text: str) -> str:
    try:
        return check_prefix(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    actions = setup_actions(subparsers)
    _register_up(actions)
    _register_check_down(actions)
    _register_render_netns_describe(actions)


def _register_up(actions: argparse._SubParsersAction) -> None:
    up = actions.add_parser("up", help="create the namespaces, links, translators and Knot (as root)")
    up.add_argument("topology", choices=TOPOLOGIES)
    add_backend_options(up, registry.EMULATION_DEFAULT)
    up.add_argument(
        "--prefix", type=_prefix, default="xb", help="name prefix of every object (default: %(default)s)"
    )
    up.add_argument(
        "--rmem",
        type=int,
        default=4 << 20,
        metavar="BYTES",
        help="root net.core.rmem_max/rmem_default/wmem_max during the run, restored by down "
        "(default: %(default)s)",
    )
    up.add_argument("--dut-cpus", type=cpu_list_arg,
                    help="confine both DUTs to these CPUs (cpuset + RPS), e.g. 1")
    up.add_argument("--knot-cpus", type=cpu_list_arg, help="pin Knot's threads to these CPUs")
    up.add_argument("--knot-workers", type=int, default=1, help="Knot UDP workers (default: %(default)s)")
    up.add_argument("--knot-io", choices=IO_MODES, default="socket",
                    help="how Knot takes its queries: the kernel's UDP sockets, or its XDP mode on the "
                         "server namespace's interface (default: %(default)s)")
    add_ces_option(up)
    up.add_argument(
        "--keep-offload",
        action="store_true",
        help="leave tx checksum offload on at client and server (default: off, so checksum bugs show)",
    )
    up.set_defaults(func=_up)


def _register_check_down(actions: argparse._SubParsersAction) -> None:
    check = actions.add_parser(
        "check",
        help="resolve names through the chain and verify the addresses on the DUT1-DUT2 link "
        "(single-DUT: on the DUT's two sides)",
    )
    check.add_argument(
        "topology", nargs="?", choices=TOPOLOGIES, help="expected topology (default: what is up)"
    )
    check.add_argument("--prefix", type=_prefix, default="xb", help="(default: %(default)s)")
    check.add_argument("--queries", type=int, default=5, help="queries to send (default: %(default)s)")
    check.set_defaults(func=_check)

    dn = actions.add_parser("down", help="remove all of a prefix, and loopback knotds killed runs left "
                            "(also after kill -9); idempotent")
    dn.add_argument("topology", nargs="?", choices=TOPOLOGIES, help="ignored: down works by prefix")
    dn.add_argument("--prefix", type=_prefix, default="xb", help="(default: %(default)s)")
    dn.set_defaults(func=_down)


def _register_render_netns_describe(actions: argparse._SubParsersAction) -> None:
    rend = actions.choices["render"]  # the core's: it renders the real hosts' commands
    rend.add_argument(
        "--netns",
        action="store_true",
        help="print the emulation script `setup up` runs (namespaces, veths) instead of per-host "
        "commands for real hosts",
    )
    rend.add_argument("--prefix", type=_prefix, default="xb", help="with --netns (default: %(default)s)")
    rend.set_defaults(**{NETNS_RENDER: _render_netns})

    desc = actions.add_parser(
        "describe", help="print what is up: implementations, versions, placement (JSON)"
    )
    desc.add_argument("--prefix", type=_prefix, default="xb", help="(default: %(default)s)")
    desc.set_defaults(func=_describe)


def _config(args: argparse.Namespace) -> EmulationConfig:
    return EmulationConfig(
        topology=args.topology,
        backends=backends_of(args),
        nat64_prefix=args.nat64_prefix,
        prefix=args.prefix,
        rmem_bytes=args.rmem,
        tx_offload_off=not args.keep_offload,
        knot_workers=args.knot_workers,
        knot_cpus=args.knot_cpus,
        knot_io=args.knot_io,
        dut_cpus=args.dut_cpus,
        ces=args.ces,
        plat_netmap=args.plat_netmap,
        ea_bits=args.ea_bits,
    )


def _up(args: argparse.Namespace) -> int:
    emulation = Emulation(_config(args))
    print(f"setup up: {args.topology} with prefix {args.prefix} ...", file=sys.stderr)
    state = emulation.up()
    info = emulation.describe()
    print(json.dumps(info, indent=2, default=str))
    print(
        f"setup up: {args.topology} is up in {state['up_s']} s; tester runs in namespace "
        f"{netns_name(args.prefix, 'client')}; "
        f"take it down with `xlatbench setup down --prefix {args.prefix}`",
        file=sys.stderr,
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    from .check import check

    emulation = attach(args.prefix)
    if args.topology and args.topology != emulation.topology.name:
        raise EmulationError(f"prefix {args.prefix} runs {emulation.topology.name}, not {args.topology}")
    result = check(emulation, args.queries)
    print(json.dumps(result, indent=2))
    verdict = "passed" if result["ok"] else "FAILED: " + "; ".join(result["failures"])
    print(f"setup check {emulation.topology.name}: {verdict}", file=sys.stderr)
    return 0 if result["ok"] else 1


def _down(args: argparse.Namespace) -> int:
    removed = down(args.prefix)
    removed["loopback"] = _down_loopback()
    print(json.dumps(removed, indent=2))
    left = leftovers(args.prefix)
    if left:
        print(f"setup down: still present: {', '.join(left)}", file=sys.stderr)
        return 1
    print(f"setup down: nothing of prefix {args.prefix} is left ({removed['down_s']} s)", file=sys.stderr)
    return 0


def _down_loopback() -> dict[str, list[str]]:
    """The loopback self-test's knotd is no chain's: a killed run's one is found in its own run directory."""
    from ...procs import sweep_stale_json
    from ...zones.knot import cleanup_loopback

    swept = cleanup_loopback()
    swept["tester_json"] = sweep_stale_json()
    for what in swept["ended"]:
        print(f"setup down: ended {what}, left by a killed loopback self-test", file=sys.stderr)
    if swept["tester_json"]:
        print(f"setup down: removed {len(swept['tester_json'])} trial file(s) of killed runs",
              file=sys.stderr)
    for why in swept["in_use"]:
        print(f"setup down: left alone: {why}", file=sys.stderr)
    return swept


def _render_netns(args: argparse.Namespace, choice: BackendChoice) -> int:
    """`setup render --netns`: the emulation script `setup up` runs."""
    emulation = Emulation(_config_for_render(args, choice))
    for comment in header(emulation.topology, choice):
        print(comment.shell())
    print(
        f"# run directory {rundir(args.prefix)}; root sysctls raised under a lease: "
        f"{', '.join(emulation.root_sysctls())}; Knot then starts in {netns_name(args.prefix, 'server')}"
    )
    dry = DryRun(netns_of=emulation.netns_of)
    for host, step in emulation.plan():
        dry.run(host, step)
    return 0


def _config_for_render(args: argparse.Namespace, choice: BackendChoice) -> EmulationConfig:
    return EmulationConfig(
        topology=args.topology,
        backends=choice,
        nat64_prefix=args.nat64_prefix,
        prefix=args.prefix,
        ces=args.ces,
        plat_netmap=args.plat_netmap,
        ea_bits=args.ea_bits,
    )


def _describe(args: argparse.Namespace) -> int:
    print(json.dumps(attach(args.prefix).describe(), indent=2, default=str))
    return 0
