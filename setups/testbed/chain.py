"""A real testbed (four hosts over SSH) driven by an inventory: the plan per host, up, down, and
`TestbedChain`, the Chain the measurement code drives (same protocol as EmulatedChain).

The topology's interface names are replaced by the inventory's; the MAP-T `napt` becomes a namespace on
dut1 (`napt_netns`). Every change is recorded in the host's state file before it is made (undo.py), so
`down` (also `xlatbench testbed down INVENTORY` after a kill -9 of the controller) removes exactly it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from string import Template
from typing import Any, TypeVar

from ... import xdp
from ...scripts.measurers import ComponentFailure
from ...zones import KnotConfig
from ...zones.knot import KNOT_XDP_PROGRAM, TEMPLATE, xdp_section
from ...zones.zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET, query_name, write_zone
from .. import counters as counters_mod
from ..backends import Backend, RenderContext, registry
from ..chain import (
    READ_UDP_TIMEOUTS,
    client_interface,
    longest_udp_timeout,
    server_interface,
    xdp_tester_binding,
)
from ..plan import BackendChoice, computing_backends, render_host, zero_checksum_dropper, zero_checksum_reason
from ..steps import Cmd, Daemon, Step, WriteFile
from ..topology import Endpoint, Host, Interface, Link, Topology
from ..transports import StepError
from .hostout import CAPTURE_LIMIT, HostOutputError, shown
from .hotplug import Hotplug
from .inventory import DUTS, Inventory
from .irqs import IrqAffinity, SavedIrqs
from .preflight import check as preflight_check
from .preflight import clock_offset, rx_hash_script
from .remote_idle import IdleSampler, samples_from
from .ssh import Shell, SshTransport, step_script
from .undo import (
    XdpRelease,
    down_script,
    guarded,
    moving_nics,
    note_created_dirs,
    pending,
    sysctl_snapshot,
)

ORDER = ("dut1", "dut2", "server", "client")
# One read of a host's counters: links, nft, SNMP (TestbedChain.counters).
COUNTERS_SCRIPT = ("ip -s -j link show; echo '#--'; nft -j list ruleset 2>/dev/null; echo '#--'; "
                   "cat /proc/net/snmp")
KNOT_UDP_WORKERS = 1
TESTER_XDP_PROGRAM = "xlb_reply_filt"  # xlatperf's reply filter (dnsperf/src/xdp/bpf) as the kernel names it
IO_MODES = ("socket", "xdp")
T = TypeVar("T")
HostStep = Step | XdpRelease  # what plan() gives a host: the topology's steps, Knot, the XDP journal lines


class TestbedError(RuntimeError):
    """The testbed cannot be brought up; the message names the host and what to do."""

    __test__ = False  # not a pytest test class


class HostLost(ComponentFailure):
    """A host did not answer over SSH, or gave no reading, while a trial needed it: the trial is void (like a
    dead daemon's: never a result nor DUT loss) and the campaign stops; a resume measures it again."""


def machine_of(topology: Topology, host: str) -> str:
    """The inventory role (machine) a topology host runs on: a sub-host runs on its parent."""
    parent = topology.host(host).parent
    return parent or host


def machine_topology(inventory: Inventory) -> Topology:
    """The inventory's topology with its interface names and the napt namespace's name."""
    topo = inventory.topology()
    renames: dict[tuple[str, str], str] = {}
    for link in topo.links:
        if link.internal:
            continue
        for end in (link.a, link.b):
            machine = inventory.hosts[machine_of(topo, end.host)]
            renames[(end.host, end.interface)] = machine.interfaces[link.name]
    hostname = {h.name: h.name for h in topo.hosts} | {"napt": inventory.napt_netns}
    hosts = tuple(_rename_host(h, renames, hostname) for h in topo.hosts)
    links = tuple(
        Link(link.name, *(Endpoint(hostname[e.host], renames.get((e.host, e.interface), e.interface))
                          for e in (link.a, link.b)), internal=link.internal)
        for link in topo.links
    )
    return dataclasses.replace(topo, hosts=hosts, links=links)


def _rename_host(host: Host, renames: dict[tuple[str, str], str], hostname: dict[str, str]) -> Host:
    def rename(name: str) -> str:
        return renames.get((host.name, name), name)

    items = []
    for item in host.items:
        if isinstance(item, Interface):
            item = dataclasses.replace(item, name=rename(item.name))
        elif hasattr(item, "ipv4_interface"):
            item = dataclasses.replace(item, ipv4_interface=rename(item.ipv4_interface),
                                       ipv6_interface=rename(item.ipv6_interface))
        items.append(item)
    parent = hostname[host.parent] if host.parent else None
    return Host(hostname[host.name], tuple(items), parent)


def machine_interfaces(inventory: Inventory) -> dict[str, list[str]]:
    return {role: list(host.interfaces.values()) for role, host in inventory.hosts.items()}


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


def host_context(inventory: Inventory, role: str) -> RenderContext:
    """Where a host's rendering runs: a real host, its files under the inventory's run directory."""
    return RenderContext(world="real", rundir=inventory.rundir(role), prefix="xlatbench")


def check_io(tester_io: str, server_io: str) -> None:
    """TestbedError (one line) unless both are one of IO_MODES."""
    for name, io in (("tester io", tester_io), ("server io", server_io)):
        if io not in IO_MODES:
            raise TestbedError(f"{name} must be one of {', '.join(IO_MODES)}, got {io!r}")


def knot_xdp_refusal(inventory: Inventory) -> str | None:
    """Why Knot's XDP mode cannot answer through this testbed's translators (plan.zero_checksum_dropper's
    rule), with the testbed's fix; None when it can."""
    topo = machine_topology(inventory)
    found = zero_checksum_dropper(topo, BackendChoice.parse(inventory.backend_spec(), inventory.variants))
    if found is None:
        return None
    host, backend, name = found
    fixes = " or ".join(f'hosts.{machine_of(topo, host)}.backend = "{b}"'
                        for b in computing_backends(name, available_here=False))
    return (f"[server] io = \"xdp\" cannot serve {inventory.path}: {zero_checksum_reason(backend)} ({host} "
            f"is the {name}): use [server] io = \"socket\", or {fixes or 'a backend'} (it computes the "
            "checksum)")


def plan(inventory: Inventory, tester_io: str = "socket",
         server_io: str = "socket") -> dict[str, list[HostStep]]:
    """Per role, every setup step in order: the topology's rendering for the host, Knot on the server (in
    XDP mode with `server_io` "xdp"), and on the client, with `tester_io` "xdp", the journal line that
    detaches the tester's reply filter from its test interface (a killed tester leaves it there)."""
    check_io(tester_io, server_io)
    topo = machine_topology(inventory)
    choice = BackendChoice.parse(inventory.backend_spec(), inventory.variants)
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
            own = registry.make(entry.backend, inventory.variants.get(entry.backend))
            host_steps = [_with_binary(own, s, entry.binary) for s in host_steps]
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


def _with_binary(backend: Backend, step: Step, binary: str) -> Step:
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


def each(roles: list[str] | tuple[str, ...], work: Callable[[str], T]) -> dict[str, T]:
    """work(role) for every role at once (one SSH connection each); results in the order of `roles`."""
    with ThreadPoolExecutor(max_workers=len(roles) or 1) as pool:
        futures = {role: pool.submit(work, role) for role in roles}
        return {role: future.result() for role, future in futures.items()}


def hotplugs(inventory: Inventory) -> dict[str, Hotplug]:
    hosts = inventory.hosts
    return {d: Hotplug(d, hosts[d].offline_cpus, hosts[d].sysfs_root, inventory.statefile(d)) for d in DUTS}


def irq_hosts(inventory: Inventory) -> dict[str, IrqAffinity]:
    """Per DUT, the IRQs of its test interfaces (saved before the core sweep, spread after each change)."""
    hosts = inventory.hosts
    return {d: IrqAffinity(d, tuple(hosts[d].interfaces.values()), inventory.statefile(d),
                           hosts[d].sysfs_root, hosts[d].proc_root) for d in DUTS}


def samplers(inventory: Inventory) -> dict[str, IdleSampler]:
    return {d: IdleSampler(d, inventory.rundir(d), inventory.statefile(d), inventory.hosts[d].proc_stat)
            for d in DUTS}


def transport_for(inventory: Inventory) -> SshTransport:
    return SshTransport({r: h.ssh for r, h in inventory.hosts.items()}, inventory.ssh_options)


def down_all(inventory: Inventory, shell: Shell) -> dict[str, Any]:
    """Undo on every host what its state file lists; then bring every allowed CPU back online. Per host:
    the lines it undid, those that failed, testers it stopped; `unreachable` (and nothing else) for a host
    SSH could not reach, whose state file stays for a later `down`."""
    plugs = hotplugs(inventory)

    def undo(role: str) -> dict[str, Any]:
        try:
            out = shell.capture(role, down_script(inventory.statefile(role)), check=False)
        except StepError as err:
            return {"unreachable": str(err)}
        if out.returncode == 255:
            return {"unreachable": (out.stderr.strip().splitlines() or ["ssh failed"])[-1]}
        lines = out.stdout.splitlines()
        report: dict[str, Any] = {"undone": [line[8:] for line in lines if line.startswith("undone: ")],
                                  "failed": [line[8:] for line in lines if line.startswith("failed: ")]}
        stopped = [line.split()[-1] for line in lines if line.startswith("stopped tester ")]
        if stopped:
            report["stopped_testers"] = stopped
        if role in plugs:
            try:
                report["cpus_online"] = plugs[role].online_all(shell)
            except StepError as err:
                report["failed"].append(f"bringing CPUs back online: {err}")
        return report

    return each(tuple(reversed(ORDER)), undo)


def leftovers(inventory: Inventory, shell: Shell) -> dict[str, str]:
    """Role -> what its state file still lists, or why the host could not be asked (empty dict: nothing
    left to undo anywhere)."""
    left = {}
    for role in ORDER:
        try:
            done = shell.capture(role, pending(inventory.statefile(role)), check=False)
        except StepError as err:
            left[role] = f"unreachable: {err}"
            continue
        if done.returncode == 255:
            left[role] = "unreachable: " + (done.stderr.strip().splitlines() or ["ssh failed"])[-1]
        elif done.stdout.strip():
            left[role] = done.stdout.strip()
    return left


class TestbedChain:
    """Four real hosts reached over SSH; `TestbedChain.up(inventory)` is a context manager that takes
    them down again (also after a failure during up)."""

    __test__ = False  # not a pytest test class

    def __init__(self, inventory: Inventory, shell: SshTransport, preflight: dict[str, Any],
                 tester_io: str = "socket", server_io: str = "socket") -> None:
        check_io(tester_io, server_io)
        self.inventory = inventory
        self.tester_io = tester_io
        self.server_io = server_io
        self.shell = shell
        self.preflight = preflight
        self.machine = machine_topology(inventory)
        self.topology = inventory.topology_name
        self.server_address = self.machine.server_address
        self.client_address = self.machine.client_address
        self.max_flows = self.machine.max_flows()
        self.placement: dict[str, Any] = {}
        self.knot: dict[str, Any] = {}
        self._clk_tck: dict[str, int] = {}
        self.irqs: dict[str, SavedIrqs] = {}

    @classmethod
    def up(cls, inventory: Inventory, shell: SshTransport | None = None, tester_io: str = "socket",
           server_io: str = "socket") -> TestbedChain:
        """Check, then configure every host and start Knot. tester_io "xdp": the client's interface is
        checked for AF_XDP (preflight) and its next hop resolved, and its reply filter is journalled;
        server_io "xdp": Knot answers in XDP mode on the server's test interface (journalled)."""
        check_io(tester_io, server_io)
        shell = shell or transport_for(inventory)
        try:
            left = leftovers(inventory, shell)
            lost = [f"{role} ({text})" for role, text in left.items() if text.startswith("unreachable: ")]
            if lost:
                raise TestbedError(f"cannot reach {'; '.join(lost)}")
            if left:
                raise TestbedError(f"hosts {', '.join(left)} still carry a previous run: "
                                   f"run `xlatbench testbed down {inventory.path}` first")
            steps = plan(inventory, tester_io, server_io)
            found = preflight_check(inventory, shell, machine_interfaces(inventory), steps)
            if not found["ok"]:
                raise TestbedError("preflight refused: " + "; ".join(found["problems"]))
        except BaseException:
            shell.close()
            raise
        chain = cls(inventory, shell, found, tester_io, server_io)
        try:
            each(ORDER, lambda role: shell.capture(role, note_created_dirs(inventory.rundir(role))))
            # Before anything moves: the NICs' IRQ affinities (journalled, restored last by down).
            chain.irqs = each(DUTS, lambda dut: irq_hosts(inventory)[dut].save(shell))
            if inventory.rx_flow_hash == "apply":
                each(ORDER, chain.apply_rx_flow_hash)
            each(ORDER, lambda role: chain.apply(role, steps[role]))
            shell.capture("server", knot_ready_script(chain.machine))
            if server_io == "xdp":
                chain.wait_for_knot_xdp()
            chain.knot = knot_placement(inventory, shell, server_io)
            if tester_io == "xdp":
                found["hosts"]["client"]["xdp"]["next_hop"] = chain.resolve_next_hop()
        except BaseException:
            chain.down()
            shell.close()
            raise
        return chain

    def apply_rx_flow_hash(self, role: str) -> None:
        """The paper's `ethtool -N IF rx-flow-hash udp4|udp6 sdfn` on each test interface whose NIC leaves
        the ports out of the hash (journalled: down restores the fields it had); before the plan's steps,
        while every NIC is still in the host's own namespace."""
        script = rx_hash_script(self.preflight["hosts"][role]["rx_flow_hash"], self.inventory.statefile(role))
        if script:
            self.shell.capture(role, "set -e\n" + script)

    def wait_for_knot_xdp(self, timeout_s: float = 10.0) -> None:
        """Knot's XDP program on the server's test interface once it answers; TestbedError (with knotd's log)
        if it attached none (a driver or kernel without XDP for it)."""
        iface = server_test_interface(self.machine)
        deadline = time.monotonic() + timeout_s
        while not any(p["program"] == KNOT_XDP_PROGRAM for p in attached_xdp(self.shell, "server", iface)):
            if time.monotonic() > deadline:
                logfile = shlex.quote(f"{self.inventory.rundir('server')}/knot/knotd.log")
                log = self.shell.capture("server", f"tail -n 3 {logfile}", check=False).stdout.strip()
                raise TestbedError(f"server: knotd attached no XDP program to {iface} ([server] io = "
                                   "\"xdp\"); "
                                   f"its log: {' | '.join(log.splitlines()) or '(empty)'}: check that the "
                                   "kernel and driver have XDP, or use [server] io = \"socket\"")
            time.sleep(0.2)

    def resolve_next_hop(self) -> dict[str, Any]:
        """The route from the client host to the server leaves by its test interface, and its next hop's
        MAC address is in the neighbour table (resolved with a ping, else an empty UDP datagram to its
        discard port, the way xlatperf's own probe does): what --io xdp needs to build its frames.
        TestbedError naming the fix when not."""
        iface, server = client_interface(self.machine), self.server_address
        out = self.shell.capture("client", f"ip -j route get {shlex.quote(server)}", check=False).stdout
        try:
            route = json.loads(out or "[]")[0]
            if not isinstance(route, dict):
                raise ValueError("not a route object")
        except (ValueError, IndexError, KeyError):
            raise TestbedError(f"client: no route to the server {server} ([tester] io = \"xdp\"): check "
                               "the client's addresses and routes after up") from None
        if route.get("dev") != iface:
            raise TestbedError(f"client: the route to {server} leaves by {route.get('dev')}, not by the "
                               f"tester's interface {iface}: fix hosts.client.interfaces in "
                               f"{self.inventory.path} or the host's routes")
        hop = str(route.get("gateway") or server)
        h, i = shlex.quote(hop), shlex.quote(iface)
        script = (f"for n in 1 2 3 4 5 6 7 8 9 10; do o=$(ip -j neigh show {h} dev {i}); case \"$o\" in "
                  f"*lladdr*) break;; esac; ping -c 1 -W 1 -I {i} {h} >/dev/null 2>&1 || "
                  f"bash -c 'echo >/dev/udp/'{h}'/9' 2>/dev/null; sleep 0.3; done; echo \"$o\"")
        try:
            entry = json.loads(self.shell.capture("client", script, check=False).stdout or "[]")
        except ValueError:
            entry = []
        entry = [e for e in entry if isinstance(e, dict)] if isinstance(entry, list) else []
        mac = next((str(e["lladdr"]) for e in entry if e.get("lladdr")), None)
        if mac is None:
            raise TestbedError(f"client: the next hop {hop} on {iface} does not resolve (no ARP answer), "
                               "which [tester] io = \"xdp\" needs to address its frames: check the cable of "
                               f"link client-dut1 and that {hop} answers on it")
        return {"interface": iface, "gateway": hop, "mac": mac}

    def tester_binding(self, io: str, flows: int, first_port: int | None) -> tuple[str, ...]:
        """The tester options that place its flows on the client host for `io`: none for sockets; for
        "xdp" the client's test interface (the inventory's name) and every flow's address and port
        (setups.chain.xdp_tester_binding). The chain must have been brought up for that io (its journal
        detaches the reply filter a killed tester leaves)."""
        if io == "socket":
            return ()
        if io != "xdp":
            raise ValueError(f"tester io must be 'socket' or 'xdp', got {io!r}")
        if self.tester_io != "xdp":
            raise ValueError("this testbed was brought up for a socket tester: its journal would not "
                             "remove the reply filter of a killed --io xdp tester; bring it up with "
                             "tester_io = 'xdp'")
        return xdp_tester_binding(self.machine, flows, first_port)

    def apply(self, role: str, steps: list[HostStep]) -> None:
        """All steps of a host in one remote shell (fed on stdin: the zone is larger than a command line
        may be); each step is guarded by its undo record and names itself when it fails."""
        statefile = self.inventory.statefile(role)
        snapshot = sysctl_snapshot(statefile, moving_nics(steps))
        self.shell.capture(role, "sh -s", stdin=snapshot + batch_script(steps, statefile))

    def __enter__(self) -> TestbedChain:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            self.shell.close()

    def down(self) -> dict[str, Any]:
        return down_all(self.inventory, self.shell)

    def describe(self) -> dict[str, Any]:
        choice = BackendChoice.parse(self.inventory.backend_spec(), self.inventory.variants)
        translators = {}
        for host, role in self.machine.translators().items():
            backend = choice.backend(role)
            info = backend.describe(role)
            found = backend.testbed_version(self.preflight["hosts"][host])
            if found is not None:
                info["version"] = found
            entry = self.inventory.hosts[machine_of(self.machine, host)]
            if entry.binary and entry.backend == backend.name:  # what the host ran instead of the build's
                info["own_build"] = entry.binary
            translators[host] = {"role": type(role).__name__, **info}
        return {"topology": self.topology, "description": self.machine.description, "world": "real testbed",
                "inventory": self.inventory.path, "translators": translators,
                "nat64_prefix": self.machine.nat64_prefix, "max_flows": self.max_flows,
                "preflight": self.preflight, "placement": self.placement, "knot": self.knot,
                "server_io": self.knot.get("io", self.server_io),
                "rx_flow_hash": {"mode": self.inventory.rx_flow_hash,
                                 "before_up": {r: h.get("rx_flow_hash")
                                               for r, h in self.preflight["hosts"].items()},
                                 "note": "apply: sdfn set where a NIC left the ports out (undone by down); "
                                         "None: the device does not say (veth: one queue)"},
                "notes": list(self.machine.notes),
                "dut_cpu_times_cover": "user-space translator processes only (see each translator's "
                                       "execution_model); in-kernel translators: read the per-host idle "
                                       "samples"}

    def client_argv(self, argv: list[str]) -> list[str]:
        ssh = self.shell.argv("client")
        return [sys.executable, "-m", "xlatbench.setups.testbed.remote_run", json.dumps(ssh),
                self.inventory.hosts["client"].tester, self.inventory.rundir("client"), "--", *argv]

    def set_dut_cpus(self, cpus: list[int], per_dut: dict[str, list[int]] | None = None) -> dict:
        plugs, irqs = hotplugs(self.inventory), irq_hosts(self.inventory)

        def apply(dut: str) -> dict[str, Any]:
            applied = plugs[dut].apply(self.shell, list((per_dut or {}).get(dut, cpus)))
            spread = irqs[dut].spread(self.shell, self.irqs.get(dut, SavedIrqs()), list(applied["online"]))
            interfaces = self.irq_placement(dut)
            for iface, found in spread["affinity"].items():
                interfaces.setdefault(iface, {})["irq_affinity"] = found
            return {**applied, "interfaces": interfaces, "irqs": spread}

        self.placement = {"method": "cpu hotplug", **each(DUTS, apply)}
        return self.placement

    def nat44_udp_timeout(self) -> tuple[float, str] | None:
        """How long conntrack keeps a replied UDP mapping in the MAP-T CE's NAT44 namespace on its host, s,
        and where it was read (None: no CE NAT44 in this topology, or no reading)."""
        topology = self.inventory.topology()
        if not any(host.name == "napt" for host in topology.hosts):
            return None
        role, netns = machine_of(topology, "napt"), self.inventory.napt_netns
        done = self.shell.capture(role, f"ip netns exec {shlex.quote(netns)} sh -c "
                                        f"{shlex.quote(READ_UDP_TIMEOUTS)}", check=False)
        seconds = longest_udp_timeout(done.stdout)
        return None if seconds is None else (seconds, f"the UDP conntrack timeout in namespace {netns} "
                                                      f"on {role}")

    def irq_placement(self, role: str) -> dict[str, Any]:
        """Per test interface of a host: RPS masks of its receive queues (its IRQs' affinity: irqs.py)."""
        found: dict[str, Any] = {}
        inside = {i.name: child.name for child in self.machine.children(role) for i in child.interfaces}
        for iface in self.inventory.hosts[role].interfaces.values():
            q = shlex.quote(iface)
            script = (f"for f in /sys/class/net/{q}/queues/rx-*/rps_cpus; do [ -f \"$f\" ] && "
                      f"echo \"rps $(basename $(dirname $f)) $(cat $f)\"; done; true")
            if iface in inside:  # the MAP-T CE's client-side NIC lives in the napt namespace
                script = f"ip netns exec {shlex.quote(inside[iface])} sh -c {shlex.quote(script)}"
            out = self.shell.capture(role, script, check=False).stdout.split("\n")
            rows = [line.split() for line in out if len(line.split()) == 3]
            found[iface] = {"rps_cpus": {q_: mask for kind, q_, mask in rows if kind == "rps"},
                            "irq_affinity": {}}
        return found

    def dut_cpu_times(self) -> dict[str, float]:
        """CPU-seconds (user + system) used so far by each DUT's user-space translator processes."""
        times: dict[str, float] = {}
        for host, pidfiles in self._translator_pidfiles().items():
            for pidfile in pidfiles:
                out = self.read(host, f"getconf CLK_TCK; cat /proc/$(cat {shlex.quote(pidfile)})/stat",
                                "the translator's CPU times").splitlines()
                if len(out) != 2:
                    raise self.lost(host, "no CPU times of its translator (its /proc/PID/stat)")
                try:
                    fields = out[1].rsplit(")", 1)[1].split()
                    ticks = (int(fields[11]) + int(fields[12])) / int(out[0])
                except (ValueError, IndexError, ZeroDivisionError):
                    why = f"unreadable CPU times of its translator ({shown(out[1])})"
                    raise self.lost(host, why) from None
                times[host] = times.get(host, 0.0) + ticks
        return times

    def _translator_pidfiles(self) -> dict[str, list[str]]:
        """Per DUT host, the pid files of the processes its backend starts (none for in-kernel ones)."""
        choice = BackendChoice.parse(self.inventory.backend_spec(), self.inventory.variants)
        found: dict[str, list[str]] = {}
        for host, role in self.machine.translators().items():
            ctx = host_context(self.inventory, machine_of(self.machine, host))
            pidfiles = [p.pidfile for p in choice.backend(role).processes(host, ctx)]
            if pidfiles:
                found[host] = pidfiles
        return found

    def lost(self, role: str, what: str) -> HostLost:
        return HostLost(f"{role} ({self.inventory.hosts[role].ssh}): {what} during the trial: the trial is "
                        f"void, not stored; once {role} answers again, run `xlatbench testbed down "
                        f"{self.inventory.path}` first (the teardown could not reach it)")

    def read(self, role: str, script: str, what: str, check: bool = False) -> str:
        """stdout of `script` on `role` while a trial needs it; HostLost when SSH fails or times out (with
        `check`, also when the script fails)."""
        try:
            done = self.shell.capture(role, script, check=False)
        except StepError as err:
            raise self.lost(role, f"no answer over SSH ({err})") from None
        if done.returncode == 255:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise self.lost(role, f"SSH failed reading {what} ({last})")
        if check and done.returncode != 0:
            raise self.lost(role, f"{what} failed: {(done.stderr or done.stdout).strip()[-200:]}")
        if done.dropped.get("stdout"):
            raise self.lost(role, f"{what}: {done.dropped['stdout']} bytes past the {CAPTURE_LIMIT} kept, so "
                                  "the reading is incomplete")
        return done.stdout

    @cached_property
    def _daemons(self) -> dict[str, dict[str, str]]:
        """Per role, name ("<program> (dut1)", "knotd (server)") -> pidfile of every daemon the setup started.
        Rendered once per chain: plan() renders every host's steps and writes a zone, and the daemons are
        looked up before and after each trial."""
        found: dict[str, dict[str, str]] = {}
        for role, steps in plan(self.inventory, self.tester_io, self.server_io).items():
            for step in steps:
                if isinstance(step, Daemon):
                    found.setdefault(role, {})[f"{Path(step.argv[0]).name} ({role})"] = step.pidfile
        return found

    def component_pids(self) -> dict[str, int]:
        """Name -> pid on its host of every daemon a trial needs (knotd, user-space translators), read from
        their pidfiles with one SSH command per host; HostLost when a host or a pid file does not answer."""
        pids: dict[str, int] = {}
        for role, daemons in self._daemons.items():
            script = "; ".join(f"echo \"$(cat {shlex.quote(f)} 2>/dev/null)\"" for f in daemons.values())
            lines = self.read(role, script, "its daemons' pid files").splitlines()
            for name, line in zip(daemons, lines + [""] * len(daemons), strict=False):
                if not line.strip().isdigit():
                    raise self.lost(role, f"no pid file of {name}")
                pids[name] = int(line)
        return pids

    def gone(self, pids: dict[str, int]) -> list[str]:
        """"name (pid N)" of each of `pids` (from component_pids) that no longer runs on its host."""
        dead = []
        for role, daemons in self._daemons.items():
            mine = {name: pid for name, pid in pids.items() if name in daemons}
            if not mine:
                continue
            # alive as procs.alive has it: the process exists and is not a zombie
            script = "; ".join(f"s=$(cut -d')' -f2- /proc/{pid}/stat 2>/dev/null | cut -d' ' -f2); "
                               f"[ -n \"$s\" ] && [ \"$s\" != Z ] || echo {pid}" for pid in mine.values())
            out = self.read(role, script + "; echo checked", "whether its daemons still run").split()
            if out[-1:] != ["checked"]:
                raise self.lost(role, "no answer on whether its daemons still run")
            ended = set(out[:-1])
            dead += [f"{name} (pid {pid})" for name, pid in mine.items() if str(pid) in ended]
        return dead

    @cached_property
    def _translator_counters(self) -> dict[str, list[tuple[str, Backend, str]]]:
        """Per machine, (host, backend, shell line) of each translator there that keeps counters of its own
        (read with the host's other counters: `counters_script`)."""
        choice = BackendChoice.parse(self.inventory.backend_spec(), self.inventory.variants)
        found: dict[str, list[tuple[str, Backend, str]]] = {}
        for host, role in self.machine.translators().items():
            machine = machine_of(self.machine, host)
            backend = choice.backend(role)
            script = backend.counters_script(host, host_context(self.inventory, machine))
            if script:
                found.setdefault(machine, []).append((host, backend, script))
        return found

    def counters_script(self, role: str) -> str:
        """One read of a host's counters: links, nft, SNMP, then each of its translators' own."""
        own = "".join(f"; echo '#--'; {script}" for _, _, script in self._translator_counters.get(role, []))
        return COUNTERS_SCRIPT + own

    def counters(self) -> dict[str, dict[str, int]]:
        """Every host's counters: interfaces, nft rules, UDP (SNMP), and the translators' own as
        "<host>:translator" (the emulation's key)."""
        def read(role: str) -> dict[str, dict[str, int]]:
            out = self.read(role, self.counters_script(role), "its counters")
            parts = out.split("#--\n")
            translators = self._translator_counters.get(role, [])
            if len(parts) != 3 + len(translators) or not parts[0].strip() or not parts[2].strip():
                raise self.lost(role, "no counters (ip -s link, /proc/net/snmp, the translator's own)")
            try:
                found = {**counters_mod.parse_links(parts[0], role), **counters_mod.parse_nft(parts[1], role),
                         **counters_mod.parse_snmp(parts[2], role)}
                counted = [(host, backend.parse_counters(text))
                           for (host, backend, _), text in zip(translators, parts[3:], strict=True)]
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
                why = f"unreadable counters ({type(err).__name__}: {shown(str(err))})"
                raise self.lost(role, why) from None
            for host, counts in counted:
                if not counts:
                    raise self.lost(role, f"no counters of its translator ({host})")
                found[f"{host}:translator"] = counts
            return found

        result: dict[str, dict[str, int]] = {}
        for part in each(ORDER, read).values():
            result.update(part)
        return result

    def start_idle(self) -> None:
        """Re-measure the DUTs' and the client's clock offsets (a setup runs for hours; the samples and the
        trial are placed on the controller's clock with them), then start each DUT's sampler."""
        for role in (*DUTS, "client"):
            try:
                clock = clock_offset(self.shell, role)
            except (StepError, ValueError, OSError) as err:
                raise self.lost(role, f"no clock reading ({err})") from None
            self.preflight["hosts"][role]["clock"] = {**clock, "measured": "at the last idle capture"}
        for dut, sampler in samplers(self.inventory).items():
            self.read(dut, sampler.start_script(), "starting its CPU idle sampler", check=True)

    def collect_idle(self) -> dict[str, list[dict[str, Any]]]:
        """Per DUT host, the per-core samples since start_idle (clock of the controller in t_controller);
        HostLost when a host does not answer or gave no sample."""
        found = {}
        for dut, sampler in samplers(self.inventory).items():
            text = self.read(dut, sampler.stop_script(), "its CPU idle samples")
            try:
                found[dut] = samples_from(text, self.preflight["hosts"][dut]["clock"]["offset_s"], dut)
            except HostOutputError as err:
                raise self.lost(dut, f"unreadable CPU idle samples ({err})") from None
            if not found[dut]:
                raise self.lost(dut, "no CPU idle samples")
        return found


def probe_trial_overhead(inventory: Inventory, shell: SshTransport, repeats: int = 3) -> dict[str, Any]:
    """Time on these hosts, without changing them, the SSH work around every testbed trial (ChainMeasurer:
    counters of all hosts at once before and after, CPU times of each user-space translator process before
    and after, the daemons' pid files and their liveness once per host that runs one, the tester's start and
    the fetch of its JSON on the client, the local wrapper that starts it) and around every idle capture
    (clock offsets of the DUTs and the client, starting and stopping each DUT's sampler). Each part is the
    median of `repeats` rounds over warm SSH masters, s; `per_trial_s` and `per_idle_run_s` their sums."""
    chain = TestbedChain(inventory, shell, {"hosts": {}})
    each(ORDER, lambda role: shell.capture(role, "true"))  # masters up, as during a campaign

    def timed(work: Callable[[], object]) -> float:
        times = []
        for _ in range(repeats):
            started = time.monotonic()
            work()
            times.append(time.monotonic() - started)
        return statistics.median(times)

    def round_trip(role: str) -> float:
        return timed(lambda: shell.capture(role, "cat /proc/self/stat >/dev/null", check=False))

    trip = {role: round_trip(role) for role in ORDER}
    cpu_reads = {host: len(files) for host, files in chain._translator_pidfiles().items()}
    daemon_hosts = list(chain._daemons)
    parts = {
        "counters (all hosts at once, before and after)":
            2 * timed(lambda: each(ORDER, lambda role: shell.capture(role, chain.counters_script(role),
                                                                       check=False))),
        "translator CPU times (before and after)": 2 * sum(n * trip[h] for h, n in cpu_reads.items()),
        "daemon pid files and liveness": 2 * sum(trip[h] for h in daemon_hosts),
        "tester start and result fetch on the client": 2 * trip["client"] + timed(
            lambda: subprocess.run([sys.executable, "-c", "import xlatbench.setups.testbed.remote_run"],
                                   check=True, capture_output=True)),
    }
    idle = {"clock offsets": timed(lambda: [clock_offset(shell, role) for role in (*DUTS, "client")]),
            "samplers started and stopped": 2 * sum(trip[d] for d in DUTS)}
    return {"ssh_round_trip_s": {r: round(t, 4) for r, t in trip.items()},
            "per_trial": {k: round(v, 4) for k, v in parts.items()}, "per_trial_s": sum(parts.values()),
            "per_idle_run": {k: round(v, 4) for k, v in idle.items()}, "per_idle_run_s": sum(idle.values())}


def testbed_chain(topology: str | None = None, inventory: str = "", **_: Any) -> TestbedChain:
    """Chain factory for a campaign (`factory = "xlatbench.setups.testbed:testbed_chain"`, options
    `{inventory = PATH}`): brings the inventory's hosts up; the chain is a context manager."""
    from .inventory import load_inventory

    inv = load_inventory(inventory)
    if topology and topology != inv.topology_name:
        raise TestbedError(f"campaign asks for {topology} but {inventory} describes {inv.topology_name}")
    return TestbedChain.up(inv)
