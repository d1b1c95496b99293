"""A testbed emulated on this machine: one network namespace per host, veth pairs as links.

`Emulation.up()` creates everything (names in `names`), records the state in
/run/xlatbench/<prefix>/state.json and, if anything fails, removes what it made (`cleanup`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from ...procs import alive
from ...zones import KnotConfig, KnotServer, check_io
from ..backends import Process, RenderContext, linux, registry
from ..backends.registry import EMULATION_DEFAULT
from ..chain import client_interface, server_interface
from ..paper import WELL_KNOWN_PREFIX, is_well_known, topology
from ..plan import BackendChoice, computing_backends, render, zero_checksum_dropper, zero_checksum_reason
from ..steps import Cmd, Comment, Step
from ..topology import Nat44, Topology
from ..transports import Netns, Transport
from . import rootsysctl
from .cleanup import down, existing_namespaces
from .cpusets import set_dut_cpus, steer_test_system
from .errors import EmulationError
from .names import check_prefix, netns_name, read_pid, rundir, statefile

MIB = 1 << 20


@dataclass(frozen=True)
class EmulationConfig:
    """What to bring up.

    backends: the backend instance serving each translator role (setups.plan.BackendChoice, parsed where the
    text came in; in-kernel modules cannot load here; a variant such as a stock build may need a
    network-specific prefix). nat64_prefix: None = the paper's, or the prefix a chosen variant needs.
    rmem_bytes: root net.core.rmem_max, rmem_default and wmem_max during the run (bytes). backlog_packets:
    root net.core.netdev_max_backlog during the run (packets; child namespaces have none of their own): a veth
    hands each packet to the receiving CPU's backlog, and at the kernel's 1 000 a burst of the tester's sends
    overflows it there and shows as the client interface's tx drops, which the tester must count as its own.
    tx_offload_off: compute checksums in software on the client's and server's interfaces so a translator's
    checksum bug cannot hide (NOTES). knot_cpus / dut_cpus: CPU lists (None = unpinned); the server's
    interfaces steer their receive softirq (RPS) to knot_cpus. client_cpus: the tester's CPUs, where the
    client's interfaces steer theirs (None: the kernel's default, the CPU that sent the packet, i.e. a DUT's).
    ces: MAP-T CEs the tester plays (`br` only). knot_io: how Knot takes its queries, "socket" (the kernel's
    UDP sockets) or "xdp" (Knot's XDP mode on the server namespace's interface to the chain; its sockets stay
    for the readiness query over loopback). plat_netmap (`plat` only): the PLAT's NAT44 gives each IPv6 client
    its own address of paper.PLAT_NETMAP instead of sharing the paper's one address, whose 64 512 ports bound
    the UDP flows to one server port (a sessions sweep beyond them). new_connection_cap (`nat44` only): the
    gateway's new connections per second, the rest dropped (nftables). conntrack_max / conntrack_buckets:
    the kernel's conntrack table size and hash buckets, set exactly in the root namespace (one table serves
    every namespace) under the chain's lease, restored by `down` (None: the machine's, or what an AF_XDP
    tester's flows need). ea_bits (`mape-br` only): the MAP-E rule's EA-bits length (paper.mape_rule;
    None: 13).
    """

    topology: str
    backends: BackendChoice = field(default_factory=BackendChoice)
    nat64_prefix: str | None = None
    prefix: str = "xb"
    rmem_bytes: int = 4 * MIB
    backlog_packets: int = 10_000
    tx_offload_off: bool = True
    knot_workers: int = 1
    knot_cpus: tuple[int, ...] | None = None
    dut_cpus: tuple[int, ...] | None = None
    client_cpus: tuple[int, ...] | None = None
    ces: int = 1
    knot_io: str = "socket"
    plat_netmap: bool = False
    new_connection_cap: int | None = None
    conntrack_max: int | None = None
    conntrack_buckets: int | None = None
    ea_bits: int | None = None

    def __post_init__(self) -> None:
        check_io(self.knot_io, "knot_io")
        if not isinstance(self.backends, BackendChoice):
            raise TypeError(f"backends is {self.backends!r}, not a BackendChoice: parse text where it enters "
                            "(BackendChoice.parse)")
        chain = self.chain_topology()  # ValueError: bad name, CEs or plat_netmap
        refusal = knot_xdp_refusal(chain, self.backends) if self.knot_io == "xdp" else None
        if refusal:
            raise ValueError(refusal)

    def chain_topology(self) -> Topology:
        """The topology these options bring up."""
        for name in ("conntrack_max", "conntrack_buckets"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive number of entries, got {value!r}")
        return topology(self.topology, self.effective_nat64_prefix, self.ces, self.plat_netmap,
                        ea_bits=self.ea_bits, new_connection_cap=self.new_connection_cap)

    @property
    def effective_nat64_prefix(self) -> str:
        if self.nat64_prefix:
            return self.nat64_prefix
        return self.backends.default_prefix() or WELL_KNOWN_PREFIX

    def state(self) -> dict[str, object]:
        """These options for a state file (JSON): the backends as the text `from_state` parses back."""
        values: dict[str, object] = {}
        for f in fields(self):
            if f.name == "backends":
                values |= {"backend": self.backends.spec(), "variants": self.backends.variants()}
            else:
                values[f.name] = getattr(self, f.name)
        return values

    @classmethod
    def from_state(cls, values: Mapping[str, object]) -> EmulationConfig:
        """The options a state file holds (`state`): the state file is where the backends' text enters."""
        options = dict(values)
        spec, variants = str(options.pop("backend", EMULATION_DEFAULT)), options.pop("variants", None)
        for key in ("knot_cpus", "dut_cpus", "client_cpus"):
            if options.get(key) is not None:
                options[key] = tuple(options[key])  # type: ignore[call-overload]
        backends = BackendChoice.parse(spec, variants if isinstance(variants, dict) else None)
        return cls(backends=backends, **options)  # type: ignore[arg-type]


def knot_xdp_refusal(chain: Topology, choice: BackendChoice) -> str | None:
    """Why Knot's XDP mode cannot answer through `chain` with these backends, or None (the rule:
    plan.zero_checksum_dropper), with the emulation's fixes."""
    found = zero_checksum_dropper(chain, choice)
    if found is None:
        return None
    host, backend, name = found
    choices = " or ".join(f"--backend {name}={b}" for b in computing_backends(name)) or "none available here"
    return (f"knot_io = 'xdp' cannot serve the {chain.name} chain with the {backend.name} {name} ({host}): "
            f"{zero_checksum_reason(backend)}: use knot_io = 'socket', the baseline, a "
            f"chain whose Knot listens on IPv6 (clat, ce), or a {name} backend that computes the checksum "
            f"({choices})")


class Emulation:
    """Brings one testbed up in namespaces and knows how to reach it."""

    def __init__(self, config: EmulationConfig) -> None:
        check_prefix(config.prefix)
        self.config = config
        self.topology: Topology = config.chain_topology()
        self.choice = config.backends
        self.ctx = RenderContext(world="netns", rundir=str(rundir(config.prefix)), prefix=config.prefix)
        self.netns_of = {h.name: netns_name(config.prefix, h.name) for h in self.topology.hosts}
        self.knot = KnotServer(
            rundir(config.prefix) / "knot",
            KnotConfig(
                listen=((self.topology.knot_address, 53),),
                udp_workers=config.knot_workers,
                cpus=config.knot_cpus,
                xdp_interface=self.server_interface() if config.knot_io == "xdp" else None,
            ),
            netns=self.netns_of["server"],
        )

    @property
    def prefix(self) -> str:
        return self.config.prefix

    def server_interface(self) -> str:
        """The server host's interface toward the chain (where Knot's XDP mode listens)."""
        try:
            return server_interface(self.topology)
        except ValueError as error:
            raise EmulationError(str(error)) from None

    # -- the plan ---------------------------------------------------------------------------------
    def plan(self) -> list[tuple[str | None, Step]]:
        """Every step of `up` in order: (host, step); host None runs in the root namespace."""
        steps: list[tuple[str | None, Step]] = []
        for host in self.topology.hosts:
            steps.append((None, Cmd(("ip", "netns", "add", self.netns_of[host.name]))))
        for host in self.topology.hosts:
            steps += [(host.name, s) for s in self._namespace_defaults()]
        for link in self.topology.links:
            steps.append((None, Comment(f"link {link.name}")))
            steps.append(
                (
                    None,
                    Cmd(
                        (
                            "ip",
                            "-n",
                            self.netns_of[link.a.host],
                            "link",
                            "add",
                            link.a.interface,
                            "type",
                            "veth",
                            "peer",
                            "name",
                            link.b.interface,
                            "netns",
                            self.netns_of[link.b.host],
                        )
                    ),
                )
            )
        steps += [(None, s) for s in self.choice.machine_steps(self.topology, self.ctx)]
        for host, host_steps in render(self.topology, self.choice, self.ctx).items():
            steps.append((host, Comment(f"host {host}")))
            steps += [(host, s) for s in host_steps]
        if self.config.tx_offload_off:
            for host in ("client", "server"):
                for iface in self.topology.host(host).interfaces:
                    steps.append((host, Cmd(("ethtool", "-K", iface.name, "tx", "off"))))
        return steps

    @staticmethod
    def _namespace_defaults() -> list[Step]:
        """Loopback up; no IPv6 duplicate address detection (addresses usable at once, as on a wire
        whose addresses are known unique); no reverse-path filter (translators answer from TUN devices).
        Set before the interfaces exist, so each new interface inherits them."""
        return [Cmd(("ip", "link", "set", "lo", "up"))] + [
            Cmd(("sysctl", "-qw", f"{key}={value}"))
            for key, value in (
                ("net.ipv6.conf.all.accept_dad", 0),
                ("net.ipv6.conf.default.accept_dad", 0),
                ("net.ipv4.conf.all.rp_filter", 0),
                ("net.ipv4.conf.default.rp_filter", 0),
            )
        ]

    def root_sysctls(self) -> dict[str, int]:
        return {**rootsysctl.socket_buffers(self.config.rmem_bytes),
                **rootsysctl.receive_backlog(self.config.backlog_packets)}

    # -- up -----------------------------------------------------------------------------------------
    def preflight(self) -> None:
        if os.geteuid() != 0:
            raise EmulationError("setup up needs root (namespaces, sysctls, cgroups)")
        refusal = self.choice.refusal(self.topology)
        if refusal:
            raise EmulationError(refusal)
        for role in self.topology.translators().values():
            reason = self.choice.runtime(role).unavailable()
            if reason:
                raise EmulationError(reason)
        for tool in ("ip", "nft", "iptables", "ethtool", "knotd", "kdig"):
            if shutil.which(tool) is None:
                raise EmulationError(f"{tool} not found: run tools/install-deps")
        existing = existing_namespaces(self.prefix)
        if existing:
            raise EmulationError(
                f"namespaces {', '.join(existing)} exist already: run "
                f"`xlatbench setup down --prefix {self.prefix}` first"
            )

    def up(self, transport: Transport | None = None) -> dict[str, object]:
        """Create everything; on failure tear down what was made and re-raise."""
        self.preflight()
        started = time.monotonic()
        run = rundir(self.prefix)
        run.mkdir(parents=True, exist_ok=True)
        state: dict[str, object] = {
            "config": self.config.state(),
            "phase": "coming up",
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pid": os.getpid(),
        }
        self._save(state)
        try:
            state["root_sysctls"] = rootsysctl.acquire(
                self.prefix, self.root_sysctls(), list(self.netns_of.values())
            )
            table = rootsysctl.conntrack_limits(self.config.conntrack_max, self.config.conntrack_buckets)
            if table:
                state["conntrack_table"] = rootsysctl.acquire(
                    self.prefix, table, list(self.netns_of.values()), exact=True)
            self._save(state)
            transport = transport or Netns(self.netns_of)
            for host, step in self.plan():
                transport.run(host, step)
            self._wait_for_daemons()
            self.knot.start()
            state["knot"] = self.knot.describe()
            test_system = {"client": list(self.config.client_cpus or ()),
                           "server": list(self.config.knot_cpus or ())}
            state["test_system_rps"] = steer_test_system(self, test_system)
            if self.config.dut_cpus is not None:
                state["placement"] = set_dut_cpus(self, list(self.config.dut_cpus))
        except BaseException:
            down(self.prefix)
            raise
        state["phase"] = "up"
        state["up_s"] = round(time.monotonic() - started, 3)
        self._save(state)
        return state

    def _wait_for_daemons(self, timeout_s: float = 5.0) -> None:
        """Wait until each watched translator process runs (a backend's readiness: e.g. a TUN translator
        opens its device at start). In-kernel translators have no process to wait for."""
        deadline = time.monotonic() + timeout_s
        for process in self.translator_processes().values():
            for p in process:
                while not self._running(p) and time.monotonic() < deadline:
                    time.sleep(0.05)
        time.sleep(0.2)
        for host, processes in self.translator_processes().items():
            for p in processes:
                if not self._running(p):
                    raise EmulationError(f"{host}: translator process {p.name} did not stay up: see {p.log}")

    def translator_processes(self, pinned: bool = False) -> dict[str, list[Process]]:
        """DUT host -> the processes its backend starts that are watched for liveness (or, with `pinned`,
        that belong in its cpuset); empty for in-kernel roles."""
        return {host: [p for p in self.choice.runtime(role).processes(host, self.ctx)
                       if (p.pin if pinned else p.watch)]
                for host, role in self.topology.translators().items()}

    def pinned_pids(self) -> dict[str, list[int]]:
        """DUT host -> PIDs of its running translator processes that belong in its cpuset."""
        return {host: [pid for pid in map(self._running, processes) if pid is not None]
                for host, processes in self.translator_processes(pinned=True).items()}

    @staticmethod
    def _running(process: Process) -> int | None:
        pid = read_pid(Path(process.pidfile))
        return pid if pid is not None and alive(pid) else None

    def _save(self, state: dict[str, object]) -> None:
        path = statefile(self.prefix)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, default=str))
        tmp.replace(path)

    def state(self) -> dict[str, object]:
        try:
            return json.loads(statefile(self.prefix).read_text())
        except FileNotFoundError:
            raise EmulationError(
                f"no chain with prefix {self.prefix!r} is up (no {statefile(self.prefix)}): "
                f"run `xlatbench setup up TOPOLOGY --prefix {self.prefix}`"
            ) from None

    def update_state(self, **changes: object) -> None:
        state = self.state()
        state.update(changes)
        self._save(state)

    # -- what runs where ------------------------------------------------------------------------------
    def translator_pids(self) -> dict[str, list[int]]:
        """DUT host -> PIDs of its user-space translator processes (empty for in-kernel roles)."""
        pids: dict[str, list[int]] = {}
        for host, processes in self.translator_processes().items():
            running = [self._running(p) for p in processes]
            pids[host] = [pid for pid in running if pid is not None]
        return pids

    def component_pids(self) -> dict[str, int]:
        """Process name ("<program> (<host>)") -> pid of every running translator process."""
        found = {}
        for processes in self.translator_processes().values():
            for p in processes:
                pid = self._running(p)
                if pid is not None:
                    found[p.name] = pid
        return found

    def translator_counters(self) -> dict[str, dict[str, int]]:
        """"host:translator" -> the translator's own counters, for the backends that keep any; and
        "host:tunnel_end" -> those of the emulation's own tunnel end of a host (the tester's side of an
        encapsulating single-DUT topology)."""
        found = {}
        for host, role in self.topology.translators().items():
            counts = self.choice.counters(role).counters(host, self.ctx)
            if counts:
                found[f"{host}:translator"] = counts
        for host in self.topology.hosts:
            if host.tester_tunnel is not None:
                counts = registry.tunnel_end().counters(host.name, self.ctx)
                if counts:
                    found[f"{host.name}:tunnel_end"] = counts
        return found

    def translator_run_times(self) -> dict[str, tuple[int, int]]:
        """DUT host -> (run time in ns, runs) the kernel accounted so far to its translator's own program,
        for the in-kernel backends it accounts (`Backend.run_time`; counted while kernel.bpf_stats_enabled
        is 1)."""
        found = {}
        for host, role in self.topology.translators().items():
            run = self.choice.counters(role).run_time(host, self.ctx)
            if run is not None:
                found[host] = run
        return found

    def describe(self) -> dict[str, object]:
        roles = {}
        for host, role in self.topology.translators().items():
            roles[host] = {"role": type(role).__name__, **self.choice.renderer(role).describe(role)}
        info: dict[str, object] = {
            "topology": self.topology.name,
            "description": self.topology.description,
            "prefix": self.prefix,
            "namespaces": self.netns_of,
            "translators": roles,
            "kernel": linux.describe(),
            "nat64_prefix": self.topology.nat64_prefix,
            "paper_prefix": self.topology.nat64_prefix is None or is_well_known(self.topology.nat64_prefix),
            "max_flows": self.topology.max_flows(),
            "tx_offload_off": ["client", "server"] if self.config.tx_offload_off else [],
            "server_io": self.config.knot_io,
            "client_interface": client_interface(self.topology),  # where a tester with io = "xdp" binds
            "notes": list(self.topology.notes),
        }
        stateful = {host.name: linux.nat44_description(item) for host in self.topology.hosts
                    for item in host.items if isinstance(item, Nat44)}
        if stateful and not roles:  # a gateway whose only role is the kernel's NAT44 (the nat44 topology)
            info["nat44"] = stateful
        if not info["paper_prefix"]:
            info["notes"] = [
                *self.topology.notes,
                f"translation prefix {self.topology.nat64_prefix} replaces the paper's 64:ff9b::/96",
            ]
        try:
            state = self.state()
        except EmulationError:
            return info
        for key in ("phase", "up_s", "root_sysctls", "placement", "knot", "test_system_rps"):
            if key in state:
                info[key] = state[key]
        return info


def attach(prefix: str = "xb") -> Emulation:
    """The emulation a previous `up` (possibly another process) made, from its state file."""
    try:
        state = json.loads(statefile(prefix).read_text())
    except FileNotFoundError:
        raise EmulationError(
            f"no chain with prefix {prefix!r} is up: run `xlatbench setup up TOPOLOGY --prefix {prefix}`"
        ) from None
    return Emulation(EmulationConfig.from_state(state["config"]))


__all__ = ["Emulation", "EmulationConfig", "EmulationError", "attach"]
