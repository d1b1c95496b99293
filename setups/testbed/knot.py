"""Knot on the server host of a testbed: its config, zone and daemon as host steps, when it answers, where
its threads and (in XDP mode) its program are, and why its XDP mode cannot serve a chain whose translators
drop the zero UDP checksums of its replies."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from string import Template
from typing import Any

from ... import xdp
from ...zones import KnotConfig
from ...zones.knot import KNOT_XDP_PROGRAM, TEMPLATE, xdp_section
from ...zones.zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET, query_name, write_zone
from ..chain import server_interface
from ..plan import computing_backends, zero_checksum_dropper, zero_checksum_reason
from ..steps import Cmd, Daemon, WriteFile
from ..topology import Topology
from .inventory import Inventory
from .machine import HostStep, TestbedError, machine_of, machine_topology
from .ssh import Shell
from .undo import XdpRelease

KNOT_UDP_WORKERS = 1


def server_test_interface(topo: Topology) -> str:
    """The server host's test interface (the inventory's name): where Knot's XDP mode listens."""
    try:
        return server_interface(topo)
    except ValueError as error:
        raise TestbedError(str(error)) from None


def knot_steps(inventory: Inventory, topo: Topology, server_io: str = "socket") -> list[HostStep]:
    """Knot on the server host: config, zone, knotd in the foreground (the transport backgrounds it). In XDP
    mode (`server_io`) knot.conf gets its `xdp: listen: IF@53` on the server's test interface, and a journal
    line ahead of knotd detaches its program (knotd leaves it attached when it exits)."""
    workdir = f"{inventory.rundir('server')}/knot"
    zonefile = f"{workdir}/{DEFAULT_DOMAIN}.zone"
    xdp_if = server_test_interface(topo) if server_io == "xdp" else None
    listen = ((topo.server_address, 53),)
    conf = Template(TEMPLATE.read_text()).substitute(
        rundir=workdir, udp_workers=KNOT_UDP_WORKERS, listen=f"{topo.server_address}@53",
        domain=DEFAULT_DOMAIN, zonefile=zonefile,
        xdp=xdp_section(KnotConfig(listen=listen, xdp_interface=xdp_if)))
    with tempfile.TemporaryDirectory() as tmp:
        write_zone(Path(tmp) / "zone", DEFAULT_DOMAIN, DEFAULT_SUBNET)
        zone = (Path(tmp) / "zone").read_text()
    release: list[HostStep] = [XdpRelease(xdp_if, KNOT_XDP_PROGRAM, "knotd in XDP mode")] if xdp_if else []
    return [Cmd(("mkdir", "-p", workdir)), WriteFile(f"{workdir}/knot.conf", conf), WriteFile(zonefile, zone),
            *release, Daemon(("knotd", "-c", f"{workdir}/knot.conf"), f"{workdir}/knotd.daemon.pid",
                             f"{workdir}/knotd.log")]


def knot_placement_script(inventory: Inventory) -> str:
    """Per knotd thread on the server host: tid, name, the CPUs it may use, the CPU it last ran on (Knot
    pins its UDP workers itself, whatever it was started with: NOTES)."""
    pidfile = shlex.quote(f"{inventory.rundir('server')}/knot/knotd.daemon.pid")
    return (f"p=$(cat {pidfile}); for t in /proc/$p/task/*; do "
            f"echo \"$(basename $t) $(tr ' ' _ <$t/comm) "
            f"$(awk '/^Cpus_allowed_list/ {{print $2}}' $t/status) "
            f"$(cut -d')' -f2 $t/stat | awk '{{print $37}}')\"; done")


def knot_placement(inventory: Inventory, shell: Shell, server_io: str = "socket") -> dict[str, Any]:
    """Knot as it runs on the server host: its threads (knot_placement_script), its I/O mode and, in XDP
    mode, where its program is attached (as zones.knot's describe() gives it in emulation)."""
    out = shell.capture("server", knot_placement_script(inventory), check=False).stdout
    rows = [line.split() for line in out.splitlines() if len(line.split()) == 4]
    found: dict[str, Any] = {
        "threads": [{"tid": int(tid), "name": name, "cpus_allowed": cpus, "last_cpu": int(last)}
                    for tid, name, cpus, last in rows if tid.isdigit() and last.isdigit()],
        "udp_workers": KNOT_UDP_WORKERS, "io": server_io}
    if server_io == "xdp":
        iface = server_test_interface(machine_topology(inventory))
        programs = attached_xdp(shell, "server", iface)
        found["xdp"] = {"listen": f"{iface}@53",
                        "attached": next((p for p in programs if p["program"] == KNOT_XDP_PROGRAM), None)}
    return found


def attached_xdp(shell: Shell, role: str, iface: str) -> list[dict[str, Any]]:
    """The XDP programs on a host's interface, read over SSH (xlatbench.xdp's reading of `ip -j -d link`)."""
    out = shell.capture(role, f"ip -j -d link show dev {shlex.quote(iface)}", check=False).stdout
    try:
        return [p.record() for p in xdp.parse_links(out)]
    except (ValueError, KeyError, TypeError, AttributeError):  # not `ip -j -d link`'s JSON: nothing known
        return []


def knot_ready_script(topo: Topology, timeout_s: int = 30) -> str:
    name = query_name(0)
    return (f"i=0; until kdig @{topo.server_address} +time=1 +retry=0 {name} AAAA 2>/dev/null | "
            f"grep -q 'status: NOERROR'; do i=$((i+1)); [ $i -ge {timeout_s * 5} ] && "
            f"{{ echo 'knotd does not answer' >&2; exit 1; }}; sleep 0.2; done")


def knot_xdp_refusal(inventory: Inventory) -> str | None:
    """Why Knot's XDP mode cannot answer through this testbed's translators (plan.zero_checksum_dropper's
    rule), with the testbed's fix; None when it can."""
    topo = machine_topology(inventory)
    found = zero_checksum_dropper(topo, inventory.backends())
    if found is None:
        return None
    host, backend, name = found
    fixes = " or ".join(f'hosts.{machine_of(topo, host)}.backend = "{b}"'
                        for b in computing_backends(name, available_here=False))
    return (f"[server] io = \"xdp\" cannot serve {inventory.path}: {zero_checksum_reason(backend)} ({host} "
            f"is the {name}): use [server] io = \"socket\", or {fixes or 'a backend'} (it computes the "
            "checksum)")
