"""Bringing a testbed up: the plan (every host's steps in order: the topology's rendering with the
inventory's names and own builds, Knot, the XDP journal lines) and the batch script that applies one host's
steps, each guarded by its undo record (undo.py)."""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
import shlex

from ..backends import Deployment
from ..chain import client_interface
from ..plan import render_host
from ..steps import Cmd, Daemon, Step
from ..topology import Topology
from .inventory import Inventory
from .knot import knot_steps, knot_xdp_refusal
from .machine import ORDER, HostStep, TestbedError, host_context, machine_topology
from .ssh import step_script
from .undo import XdpRelease, guarded

TESTER_XDP_PROGRAM = "xlb_reply_filt"  # xlatperf's reply filter (dnsperf/src/xdp/bpf) as the kernel names it
IO_MODES = ("socket", "xdp")


def check_io(tester_io: str, server_io: str) -> None:
    """TestbedError (one line) unless both are one of IO_MODES."""
    for name, io in (("tester io", tester_io), ("server io", server_io)):
        if io not in IO_MODES:
            raise TestbedError(f"{name} must be one of {', '.join(IO_MODES)}, got {io!r}")


def plan(inventory: Inventory, tester_io: str = "socket",
         server_io: str = "socket") -> dict[str, list[HostStep]]:
    """Per role, every setup step in order: the topology's rendering for the host, Knot on the server (in
    XDP mode with `server_io` "xdp"), and on the client, with `tester_io` "xdp", the journal line that
    detaches the tester's reply filter from its test interface (a killed tester leaves it there)."""
    check_io(tester_io, server_io)
    topo = machine_topology(inventory)
    choice = inventory.backends()
    if server_io == "xdp":
        refusal = knot_xdp_refusal(inventory)
        if refusal:
            raise TestbedError(refusal)
    steps: dict[str, list[HostStep]] = {}
    for role in ORDER:
        ctx = host_context(inventory, role)
        host_steps = render_host(topo, topo.host(role), choice, ctx)
        entry = inventory.hosts[role]
        if entry.binary:
            host_steps = [_with_binary(entry.backend, s, entry.binary) for s in host_steps]
        mine: list[HostStep] = [narrow_default_route(s, topo) for s in host_steps]
        if role == "server":
            mine += knot_steps(inventory, topo, server_io)
        if role == "client" and tester_io == "xdp":
            mine.append(XdpRelease(client_interface(topo), TESTER_XDP_PROGRAM, "the tester (--io xdp)"))
        steps[role] = mine
    return steps


def server_network(topo: Topology) -> str:
    """The IPv4 network of the address the tester sends to (the server's test link, e.g. 203.0.113.0/24)."""
    target = ipaddress.ip_address(topo.server_address)
    for iface in topo.host("server").interfaces:
        for address in iface.addresses:
            network = ipaddress.ip_interface(address).network
            if target in network:
                return str(network)
    return f"{target}/{target.max_prefixlen}"


def narrow_default_route(step: Step, topo: Topology) -> Step:
    """A real host has an IPv4 default route of its own (management, updates) that the suite must neither
    collide with nor replace: where a translator's plan sends all IPv4 into its device (`ip route add
    default dev TUN`, the CLAT's and the MAP-T CE's rule in emulation), only the test network the tester
    sends to goes there on a testbed."""
    if isinstance(step, Cmd) and step.argv[:4] == ("ip", "route", "add", "default"):
        return dataclasses.replace(step, argv=("ip", "route", "add", server_network(topo), *step.argv[4:]))
    return step


def _with_binary(backend: Deployment, step: Step, binary: str) -> Step:
    """`step` running the host's own build of its backend's program where it runs the default one."""
    if isinstance(step, Cmd | Daemon):
        return dataclasses.replace(step, argv=backend.with_binary(step.argv, binary))
    return step


def batch_script(steps: list[HostStep], statefile: str) -> str:
    lines = []
    for number, step in enumerate(steps, 1):
        script, stdin = step_script(step)
        if not script:
            continue
        if stdin is not None:  # a file: here-document instead of stdin
            marker = f"XLATBENCH_EOF_{secrets.token_hex(6)}"
            script = f"{script} <<'{marker}'\n{stdin.rstrip(chr(10))}\n{marker}\n"
        guarded_script = guarded(script, step, statefile)
        if isinstance(step, Cmd) and not step.check:
            lines.append(f"{{ {guarded_script}; }} || true")
            continue
        what = shlex.quote(f"step {number} failed: {step.shell()[:200]}")
        lines.append(f"{{ {guarded_script}\n}} || {{ echo {what} >&2; exit 1; }}")
    return "\n".join(lines) + "\n"
