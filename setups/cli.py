"""`xlatbench setup render`: the commands per host for real testbeds, and the `setup` command group itself.

The core owns what both worlds share on the command line: the `setup` group (`setup_actions`), the backend
options (`add_backend_options`, parsed once into a BackendChoice by `backends_of`), the CE/netmap options,
and the rendering of the real hosts' commands, which needs no world at all. The emulation registers its own
actions (`up`, `check`, `down`, `describe`) into the same group from setups/emulation/cli.py, and plugs its
namespace script into `render --netns` (`NETNS_RENDER` in the parser's defaults): the core never imports a
world.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .backends import RenderContext, registry
from .paper import TOPOLOGIES, WELL_KNOWN_PREFIX, topology
from .plan import BackendChoice, header, render
from .transports import DryRun

# The default that `render --netns` dispatches to: a world's function (args, choice) -> exit code.
NETNS_RENDER = "netns_render"
_ACTIONS = "_setup_actions"


def setup_actions(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The `setup` command's actions, made on first use: the core's and each world's register into it."""
    setup = subparsers.choices.get("setup")
    if setup is None:
        setup = subparsers.add_parser(
            "setup",
            help="bring a testbed (baseline, 464xlat, mapt; single-DUT plat, clat, ce, br) up, check it, "
            "take it down, or print its commands",
            description="The three testbeds of Lencse & Nagy (2022) and a single-DUT testbed for each of "
            "their translators (RFC 8219 Figure 5), emulated in network namespaces or rendered as "
            "commands for real hosts.",
        )
        setattr(setup, _ACTIONS, setup.add_subparsers(dest="setup_action", required=True, metavar="ACTION"))
    return getattr(setup, _ACTIONS)


def add_backend_options(parser: argparse.ArgumentParser, default_backend: str) -> None:
    parser.add_argument(
        "--backend",
        default=default_backend,
        help=f"translator backend: {', '.join(registry.names())} for every role, or per role as "
        "clat=...,plat=...,ce=...,br=... (default: %(default)s); "
        "forwarding and NAT44 are always Linux's",
    )
    fallbacks = []
    for name, option in registry.variant_options().items():
        parser.add_argument(
            f"--{option.flag}",
            dest=f"variant_{name}",
            choices=option.choices,
            default=option.default,
            help=f"{option.help} (default: %(default)s)",
        )
        fallbacks += [f"{prefix} with --{option.flag} {variant}"
                      for variant, prefix in option.default_prefix.items()]
    parser.add_argument(
        "--nat64-prefix",
        metavar="PREFIX/96",
        help="translation prefix instead of the paper's 64:ff9b::/96 "
        f"(default: 64:ff9b::/96{''.join(', or ' + f for f in fallbacks)})",
    )


def _variants(args: argparse.Namespace) -> dict[str, str]:
    """Backend name -> the variant chosen on the command line."""
    return {name: getattr(args, f"variant_{name}") for name in registry.variant_options()}


def backends_of(args: argparse.Namespace) -> BackendChoice:
    """--backend and the variant options, parsed once (a bad one fails here, early): the CLI's edge."""
    return BackendChoice.parse(args.backend, _variants(args))


def add_ces_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ces",
        type=int,
        default=1,
        help="br, mape-br, lwaftr only: MAP-T / MAP-E CEs or lwB4s the tester plays, derived from the "
        "paper's BMR (lw4o6: its binding arithmetic) (default: %(default)s)",
    )
    parser.add_argument(
        "--ea-bits",
        type=int,
        default=None,
        help="mape-br only: the MAP-E rule's EA-bits length (default 13; 8 bits of IPv4 suffix, the rest "
        "PSID; the rule IPv6 prefix is shortened to keep end-user prefixes within /64)",
    )
    parser.add_argument(
        "--plat-netmap",
        action="store_true",
        help="plat only: the PLAT's NAT44 maps each IPv6 client onto its own address of 198.18.0.0/24 "
        "instead of sharing the paper's one address (whose 64 512 ports bound the flows to one server port)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    rend = setup_actions(subparsers).add_parser("render", help="print the commands per host (no root needed)")
    rend.add_argument("topology", choices=TOPOLOGIES)
    add_backend_options(rend, registry.TESTBED_DEFAULT)
    add_ces_option(rend)
    rend.set_defaults(func=_render)


def _render(args: argparse.Namespace) -> int:
    choice = backends_of(args)
    if getattr(args, "netns", False):
        netns_render: Callable[[argparse.Namespace, BackendChoice], int] = getattr(args, NETNS_RENDER)
        return netns_render(args, choice)
    prefix = args.nat64_prefix or choice.default_prefix() or WELL_KNOWN_PREFIX
    topo = topology(args.topology, prefix, args.ces, args.plat_netmap, args.ea_bits)
    refusal = choice.refusal(topo)
    if refusal:
        raise ValueError(refusal)
    for comment in header(topo, choice):
        print(comment.shell())
    dry = DryRun()
    for host, steps in render(topo, choice, RenderContext(world="real")).items():
        for step in steps:
            dry.run(host, step)
    return 0
