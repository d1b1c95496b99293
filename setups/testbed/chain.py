"""`TestbedChain`, the Chain the measurement code drives on a real testbed (four hosts over SSH, driven by an
inventory; same protocol as EmulatedChain): brought up with the plan (bringup.py), Knot (knot.py), taken down
by cleanup.py, and read during trials (counters, CPU times, daemons, idle samples) over SSH.

The topology's interface names are replaced by the inventory's (machine.py); the MAP-T `napt` becomes a
namespace on dut1 (`napt_netns`). Every change is recorded in the host's state file before it is made
(undo.py), so `down` (also `xlatbench testbed down INVENTORY` after a kill -9 of the controller) removes
exactly it.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from ...failures import ComponentFailure
from ...zones.knot import KNOT_XDP_PROGRAM
from .. import counters as counters_mod
from ..backends import Counters
from ..backends.statetable import ConntrackTable, TableSpec
from ..chain import (
    LIST_RECEIVE_QUEUES,
    READ_UDP_TIMEOUTS,
    TesterPlace,
    client_interface,
    longest_udp_timeout,
    place_tester,
    receive_queue_count,
)
from ..steps import Daemon
from ..transports import StepError
from .bringup import batch_script, check_io, plan
from .cleanup import down_all, leftovers
from .hostout import CAPTURE_LIMIT, HostOutputError, shown
from .inventory import DUTS, Inventory
from .irqs import SavedIrqs
from .knot import attached_xdp, knot_placement, knot_ready_script, server_test_interface
from .machine import (
    ORDER,
    HostStep,
    TestbedError,
    each,
    host_context,
    hotplugs,
    irq_hosts,
    machine_interfaces,
    machine_of,
    machine_topology,
    samplers,
    transport_for,
)
from .preflight import check as preflight_check
from .preflight import clock_offset, rx_hash_script
from .remote_idle import samples_from
from .ssh import SSH_FAILED, SshTransport
from .stateful import StatefulDut, apply_table, count, flush, read_settings, seconds_of, stateful_dut, stats
from .undo import moving_nics, note_created_dirs, sysctl_snapshot

# One read of a host's counters: links, nft, SNMP (TestbedChain.counters).
COUNTERS_SCRIPT = ("ip -s -j link show; echo '#--'; nft -j list ruleset 2>/dev/null; echo '#--'; "
                   "cat /proc/net/snmp")


class HostLost(ComponentFailure):
    """A host did not answer over SSH, or gave no reading, while a trial needed it: the trial is void (like a
    dead daemon's: never a result nor DUT loss) and the campaign stops; a resume measures it again."""


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

    def client_receive_queues(self) -> tuple[str, int | None]:
        """The client host's test interface and its receive queues (sysfs; None when unreadable)."""
        interface = client_interface(self.machine)
        listing = LIST_RECEIVE_QUEUES.format(interface=shlex.quote(interface))
        done = self.shell.capture("client", listing, check=False)
        return interface, receive_queue_count(done.stdout) if done.returncode == 0 else None

    def tester_place(self, io: str, flows: int, first_port: int | None) -> TesterPlace:
        """Where the tester sends from on the client host for `io` (setups.chain.place_tester, with the
        inventory's interface name): nothing placed for sockets; for "xdp" the client's test interface and
        every flow's address and port. An xdp tester needs the chain brought up for that io (its journal
        detaches the reply filter a killed tester leaves)."""
        if io == "xdp" and self.tester_io != "xdp":
            raise ValueError("this testbed was brought up for a socket tester: its journal would not "
                             "remove the reply filter of a killed --io xdp tester; bring it up with "
                             "tester_io = 'xdp'")
        return place_tester(self.machine, io, flows, first_port)

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
        choice = self.inventory.backends()
        translators = {}
        for host, role in self.machine.translators().items():
            backend = choice.renderer(role)
            info = backend.describe(role)
            found = choice.deployment(role).testbed_version(self.preflight["hosts"][host])
            if found is not None:
                info["version"] = found
            entry = self.inventory.hosts[machine_of(self.machine, host)]
            if entry.binary and entry.backend.name == backend.name:  # the host ran it instead of the build's
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

    # -- the stateful DUT's connection table (RFC 9693; the stateful measurer drives it, as in emulation) ----
    @cached_property
    def stateful(self) -> StatefulDut:
        """Where the topology's stateful NAT keeps its connections (TestbedError, one line: nowhere)."""
        return stateful_dut(self.inventory)

    def stateful_host(self) -> str:
        """The inventory role (dut1, dut2) whose stateful NAT keeps the connections."""
        return self.stateful.role

    def stateful_description(self) -> dict[str, object]:
        own = not isinstance(self.stateful.table, ConntrackTable)  # a stateful NAT64's own sessions
        return {**self.stateful.describe(), "role": "nat64" if own else "nat44"}

    def xdp_flow_capacity(self, first_port: int) -> int:
        """The most AF_XDP flows the client host's addresses carry with ports first_port..65535."""
        return self.machine.client_sources * (65536 - first_port)

    def conntrack_table(self) -> dict[str, int]:
        """The table size and hash buckets in force (the kernel's conntrack: global), entries / buckets; {}
        for a table without them."""
        found = read_settings(self, self.stateful)
        return {key.rsplit(".", 1)[1]: int(value) for key, value in found.items()
                if key.endswith(("nf_conntrack_max", "nf_conntrack_buckets")) and value.isdigit()}

    def set_conntrack_table(self, max_entries: int | None, buckets: int | None) -> dict[str, object]:
        """Set the table size and hash buckets (each step journalled: `down` restores the values found);
        returns {key: {original, now}} as the host reports them."""
        if max_entries is None and buckets is None:
            return {}
        before = self.conntrack_table()
        apply_table(self.shell, self, self.inventory, self.stateful, TableSpec(max_entries, buckets))
        now = self.conntrack_table()
        return {key: {"original": before.get(key), "now": value} for key, value in now.items()}

    def set_udp_timeouts(self, host: str, seconds: int) -> dict[str, int]:
        """Set the stateful NAT's UDP timeouts (journalled, or gone with their namespace or instance);
        returns them as read back, s."""
        self._check_stateful(host)
        applied = apply_table(self.shell, self, self.inventory, self.stateful, TableSpec(timeout_s=seconds))
        found = {key.rsplit(".", 1)[-1]: seconds_of(value) for key, value in applied["in_force"].items()
                 if "timeout" in key}
        return {key: value for key, value in found.items() if value is not None}

    def conntrack_count(self, host: str) -> int:
        self._check_stateful(host)
        return count(self, self.stateful)

    def conntrack_stats(self, host: str) -> dict[str, int]:
        self._check_stateful(host)
        return stats(self, self.stateful)

    def conntrack_flush(self, host: str) -> float:
        """Delete the whole table; the seconds the deletion took, timed on the host itself."""
        self._check_stateful(host)
        return flush(self, self.stateful).seconds

    def _check_stateful(self, host: str) -> None:
        if host != self.stateful.role:
            raise ValueError(f"{host} keeps no table of this testbed's stateful NAT (it is on "
                             f"{self.stateful.role})")

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
        choice = self.inventory.backends()
        found: dict[str, list[str]] = {}
        for host, role in self.machine.translators().items():
            ctx = host_context(self.inventory, machine_of(self.machine, host))
            pidfiles = [p.pidfile for p in choice.runtime(role).processes(host, ctx)]
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
        if done.returncode == SSH_FAILED:
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
    def _translator_counters(self) -> dict[str, list[tuple[str, Counters, str]]]:
        """Per machine, (host, backend, shell line) of each translator there that keeps counters of its own
        (read with the host's other counters: `counters_script`)."""
        choice = self.inventory.backends()
        found: dict[str, list[tuple[str, Counters, str]]] = {}
        for host, role in self.machine.translators().items():
            machine = machine_of(self.machine, host)
            backend = choice.counters(role)
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
