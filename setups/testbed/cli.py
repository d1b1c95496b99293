"""`xlatbench testbed check|up|down|dry-run INVENTORY`: a real testbed of four hosts over SSH."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TextIO

from ..backends.statetable import TableError, TableSpec
from ..chain import client_interface, place_tester
from ..plan import header
from ..steps import Cmd, WriteFile
from ..topology import Topology
from .bringup import IO_MODES, plan
from .chain import TestbedChain
from .cleanup import down_all, leftovers
from .inventory import DUTS, Inventory, load_inventory
from .knot import knot_ready_script
from .machine import (
    ORDER,
    HostStep,
    TestbedError,
    hotplugs,
    machine_interfaces,
    machine_topology,
    samplers,
    transport_for,
)
from .preflight import check, summary_lines
from .remote_run import remote_scripts
from .stateful import dry_run_steps
from .undo import moving_nics, stop_testers, undo_line


def register(subparsers: argparse._SubParsersAction) -> None:
    testbed = subparsers.add_parser(
        "testbed", help="a real testbed over SSH: check the hosts, bring them up or down, print the commands",
        description="Four real hosts (client, dut1, dut2, server) named in a TOML inventory "
        "(docs/testbed.md), reached with the system's OpenSSH client.")
    actions = testbed.add_subparsers(dest="testbed_action", required=True, metavar="ACTION")
    for name, func, text in (
        ("check", _check, "preflight: kernel, CPUs, NICs and offloads, translators, Knot, tester, clocks"),
        ("up", _up, "check, then configure every host and start Knot (state files say what to undo)"),
        ("down", _down, "undo what the hosts' state files list (also after kill -9); all CPUs online"),
        ("dry-run", _dry_run, "print every host's commands: setup, core counts, capture, teardown"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("inventory", metavar="INVENTORY", help="the testbed's TOML inventory")
        if name == "check":
            parser.add_argument("--json", action="store_true",
                                help="the whole preflight as JSON on stdout (the summary then on stderr)")
        if name == "dry-run":
            parser.add_argument("--table-max", type=int, metavar="N",
                                help="also show the stateful NAT's table settings of one RFC 9693 point: "
                                "its table size, entries (conntrack: nf_conntrack_max, global)")
            parser.add_argument("--table-buckets", type=int, metavar="N",
                                help="... its hash size, buckets (conntrack: nf_conntrack_buckets, global)")
            parser.add_argument("--table-timeout", type=float, metavar="S",
                                help="... its UDP timeout, s (conntrack: nf_conntrack_udp_timeout*)")
        if name != "down":  # down needs no choice: the state files say what up did
            parser.add_argument("--tester-io", choices=IO_MODES, default="socket",
                                help="the tester's I/O on the client ([tester] io): xdp checks the client "
                                "for AF_XDP and journals its reply filter (default: socket)")
            parser.add_argument("--server-io", choices=IO_MODES, default="socket",
                                help="Knot's I/O on the server ([server] io): xdp answers in Knot's XDP "
                                "mode on the server's test interface, journalled (default: socket)")
        parser.set_defaults(func=func)


def _check(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    shell = transport_for(inventory)
    try:
        steps = plan(inventory, args.tester_io, args.server_io)
        result = check(inventory, shell, machine_interfaces(inventory), steps)
    finally:
        shell.close()
    if args.json:
        print(json.dumps(result, indent=2))
    for line in summary_lines(result):
        print(line, file=sys.stderr if args.json else sys.stdout)
    verdict = "ready" if result["ok"] else f"REFUSED ({len(result['problems'])} problem(s), listed above)"
    print(f"testbed check {inventory.path}: {verdict}", file=sys.stderr)
    return 0 if result["ok"] else 1


def _up(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    chain = TestbedChain.up(inventory, tester_io=args.tester_io, server_io=args.server_io)
    chain.shell.close()  # the hosts stay up; this command's SSH masters end with it
    print(json.dumps(chain.describe(), indent=2, default=str))
    print(f"testbed up: {inventory.topology_name} is up ({len(chain.shell.log)} remote commands); "
          f"take it down with `xlatbench testbed down {inventory.path}`", file=sys.stderr)
    return 0


def _down(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    shell = transport_for(inventory)
    try:
        return _report_down(inventory, down_all(inventory, shell), leftovers(inventory, shell))
    finally:
        shell.close()


def _report_down(inventory: Inventory, report: dict, left: dict[str, str]) -> int:
    print(json.dumps(report, indent=2))
    for role, done in report.items():
        if "unreachable" in done:
            print(f"testbed down: {role}: NOT REACHED ({done['unreachable']}): its state file stays; run "
                  "`xlatbench testbed down` again once it answers", file=sys.stderr)
        else:
            print(f"testbed down: {role}: undid {len(done['undone'])} change(s)"
                  + (f", {len(done['failed'])} failed" if done["failed"] else ""), file=sys.stderr)
    failed = [f"{role}: {line}" for role, r in report.items() for line in r.get("failed", [])]
    if left or failed:
        print(f"testbed down: not clean: {'; '.join(failed) or ', '.join(left)}", file=sys.stderr)
        return 1
    print(f"testbed down: nothing of {inventory.name} is left on {', '.join(ORDER)}", file=sys.stderr)
    return 0


def _dry_run(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    spec = TableSpec(args.table_max, args.table_buckets, args.table_timeout)
    if spec != TableSpec():
        try:
            spec.check()
        except TableError as err:
            raise TestbedError(f"--table-*: {err}") from None
        _, steps, _ = dry_run_steps(inventory, spec)  # refused (one line) before anything is printed
    dry_run(inventory, sys.stdout, args.tester_io, args.server_io)
    if spec != TableSpec():
        dry_table(inventory, spec, sys.stdout)
    return 0


def dry_table(inventory: Inventory, spec: TableSpec, out: TextIO) -> None:
    """The stateful NAT's table settings of one point: the steps, what they set, their undo lines."""
    _, steps, lines = dry_run_steps(inventory, spec)
    print("", *lines, sep="\n", file=out)
    print(*(step.shell() for step in steps), sep="\n", file=out)
    print("## undone by testbed down (newest first)", file=out)
    for line in teardown_lines(steps, "the point", snapshot=False):
        print(line, file=out)
    for step in steps:  # a namespace's setting goes with it; a translator's global with its instance
        if isinstance(step, Cmd) and "sysctl" not in step.argv[:3] and undo_line(step) is None:
            print(f"# {step.shell()}: goes with its namespace or translator instance (removed by down)",
                  file=out)


def teardown_lines(steps: list[HostStep], when: str = "up", snapshot: bool = True) -> list[str]:
    """What `down` will run, newest first (values read at `up` time, or `when`, shown as <previous>;
    `snapshot`: and the sysctls `up` saved first)."""
    lines = []
    for step in reversed(steps):
        if isinstance(step, Cmd) and step.check and "sysctl" in step.argv[:3] and step.argv[0] != "ip":
            at = step.argv.index("sysctl")
            where = shlex.join(step.argv[:at])
            key = next(a for a in step.argv[at:] if "=" in a).split("=", 1)[0]
            lines.append(f"{where + ' ' if where else ''}sysctl -qw {key}=<value before {when}>")
        elif isinstance(step, Cmd) and step.check and step.argv[:3] == ("ip", "link", "set") \
                and step.argv[-1] == "up":
            lines.append(f"ip link set {step.argv[3]} down   # only if it was down before up")
        elif isinstance(step, Cmd) and step.check and step.argv[0] == "modprobe":
            lines.append(f"modprobe -r {step.argv[1]}   # only if it was not loaded before up")
        else:
            line = undo_line(step)
            if line:
                lines.append(line)
    if not snapshot:
        return lines
    nics = moving_nics(steps)
    lines.append("# every interface's forwarding sysctls" + (
        f" and every net.ipv4/ipv6.conf sysctl of {', '.join(nics)}" if nics else "")
        + " back to the values saved before up (sysctl.saved)")
    return lines


def tester_whereabouts(topo: Topology, tester_io: str) -> str:
    """Where the tester sends from on the client host, in words (setups.chain.tester_place's rule)."""
    if topo.tester_ces:
        ces = place_tester(topo, tester_io, 1, None).sources
        return "as the MAP-T CE(s) " + "; ".join(
            f"{ce.first} ports {', '.join(f'{a}-{b}' for a, b in ce.ports)}" for ce in ces)
    if tester_io == "socket":
        return f"UDP sockets from {topo.client_address}"
    more = topo.client_sources - 1
    spill = f" (and up to {more} next addresses when its ports do not hold the flows)" if more else ""
    return f"AF_XDP on {client_interface(topo)} from {topo.client_address}{spill}, ports from first_port on"


def _dry_trial(inventory: Inventory, out: TextIO, tester_io: str = "socket") -> None:
    print("## each trial (the tester, its pid file while it runs; its JSON file is copied back to the "
          "controller)", file=out)
    topo = machine_topology(inventory)
    print(f"# OPTIONS: the trial's tester options (the measurement writes them: scripts/xlatperf.py) toward "
          f"{topo.server_address}, {tester_whereabouts(topo, tester_io)}; the one naming its JSON file "
          "names the client's trial-ID.json instead", file=out)
    run, fetch, _ = remote_scripts(inventory.hosts["client"].tester, inventory.rundir("client"),
                                   ["xlatperf", "OPTIONS...", "JSON"], "ID", json_at=2)
    print(f"{run}\n{fetch}", file=out)


def dry_run(inventory: Inventory, out: TextIO, tester_io: str = "socket", server_io: str = "socket") -> None:
    """Every host's commands, touching nothing."""
    topo = machine_topology(inventory)
    for comment in header(topo, inventory.backends()):
        print(comment.shell(), file=out)
    steps = plan(inventory, tester_io, server_io)
    for role in ORDER:
        host = inventory.hosts[role]
        print(f"\n### host {role} (ssh {host.ssh}; state file {inventory.statefile(role)})", file=out)
        print("## setup", file=out)
        for step in steps[role]:
            print(_shown(step), file=out)
        if role == "server":
            print("# wait until Knot answers\n" + knot_ready_script(topo), file=out)
        if role in DUTS:
            _dry_cores(inventory, role, out)
            sampler = samplers(inventory)[role]
            print("## capture: start before each idle-capture trial (its undo line recorded first), "
                  "collect after", file=out)
            print(sampler.start_script(record=False), file=out)
            print(sampler.stop_script(), file=out)
        if role == "client":
            _dry_trial(inventory, out, tester_io)
        print("## teardown (xlatbench testbed down: a killed controller's tester first, then the state "
              "file's lines, newest first)", file=out)
        if role == "client":
            print(f"{stop_testers(shlex.quote(inventory.rundir(role)))}   # a killed controller's tester",
                  file=out)
        for line in teardown_lines(steps[role]):
            print(line, file=out)
        if role in DUTS:
            print(f"# then every CPU of offline_cpus {list(host.offline_cpus)} back online", file=out)


def _shown(step: HostStep, limit: int = 8) -> str:
    """A step as shell; a long file (the zone, a lwAFTR's binding table) cut to its first lines."""
    if isinstance(step, WriteFile) and step.text.count("\n") > 100:
        lines = step.text.splitlines()
        head = "\n".join(lines[:limit])
        return (f"cat > {step.path} <<'EOF'\n{head}\n# ... {len(lines) - limit} more lines "
                "(generated)\nEOF")
    return step.shell()


def _dry_cores(inventory: Inventory, role: str, out: TextIO) -> None:
    hotplug = hotplugs(inventory)[role]
    present = sorted({0, *hotplug.allowed})
    print(f"## core counts (CPU hotplug under {hotplug.sysfs_root}; assuming CPUs {present} -- "
          "the real run reads `present`; each offline write first records its undo)", file=out)
    for count in range(1, len(present) + 1):
        keep = present[:count]
        print(f"# {count} core(s): CPUs {keep} online", file=out)
        for line in hotplug.commands(hotplug.plan(keep, present), record=False):
            print(line, file=out)


__all__ = ["dry_run", "register"]
