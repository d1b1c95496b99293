"""A testbed emulated on this machine: one network namespace per host, veth pairs as links.

Every object carries the prefix (default "xb"): namespaces `<prefix>-<host>`, the run directory
/run/xlatbench/<prefix> (state file, configs, pid files, logs, Knot's workdir), cpusets
/sys/fs/cgroup/cpuset/<prefix>-<dut>, nft tables `<prefix>_*`, the root-sysctl lease `<prefix>`.
`down` finds all of them by the prefix alone, so it also cleans up after a `kill -9`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from xlatbench.setups import rootsysctl
from xlatbench.setups.backends import RenderContext, linux
from xlatbench.setups.backends.tayga import TaygaBackend, is_well_known
from xlatbench.setups.plan import BackendChoice, render
from xlatbench.setups.steps import Cmd, Comment, Step
from xlatbench.setups.testbeds import WELL_KNOWN_PREFIX, topology
from xlatbench.setups.topology import Topology
from xlatbench.setups.transports import Netns, Transport
from xlatbench.zones import KnotConfig, KnotServer
from xlatbench.zones.knot import stop_stale

RUN_ROOT = Path("/run/xlatbench")
CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")
HOST_NAMES = ("client", "napt", "dut1", "dut2", "server")
DUT_HOSTS = {"dut1": ("dut1", "napt"), "dut2": ("dut2",)}
STOCK_TAYGA_PREFIX = "2001:db8:64::/96"
MIB = 1 << 20
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class EmulationError(RuntimeError):
    """The emulation could not be brought up or found; the message says what to do."""


def check_prefix(prefix: str) -> str:
    if not PREFIX_RE.match(prefix):
        raise ValueError(
            f"prefix {prefix!r} must be 1-8 lower-case letters/digits starting with a letter "
            "(it names namespaces, cgroups and nft tables)"
        )
    return prefix


@dataclass(frozen=True)
class EmulationConfig:
    """What to bring up.

    backend: "tayga" or per role "clat=tayga,..." (jool cannot run here). tayga: "patched" (paper's
    prefix 64:ff9b::/96) or "stock" (Debian's binary; prefix defaults to 2001:db8:64::/96).
    nat64_prefix: None = the paper's, or the stock-tayga fallback. rmem_bytes: root net.core.rmem_max,
    rmem_default and wmem_max during the run (bytes). tx_offload_off: compute checksums in software on
    the client's and server's interfaces so a translator's checksum bug cannot hide (NOTES).
    knot_cpus / dut_cpus: CPU lists (None = unpinned).
    """

    topology: str
    backend: str = "tayga"
    tayga: str = "patched"
    nat64_prefix: str | None = None
    prefix: str = "xb"
    rmem_bytes: int = 4 * MIB
    tx_offload_off: bool = True
    knot_workers: int = 1
    knot_cpus: tuple[int, ...] | None = None
    dut_cpus: tuple[int, ...] | None = None

    @property
    def effective_nat64_prefix(self) -> str:
        if self.nat64_prefix:
            return self.nat64_prefix
        return STOCK_TAYGA_PREFIX if self.tayga == "stock" else WELL_KNOWN_PREFIX


def rundir(prefix: str) -> Path:
    return RUN_ROOT / check_prefix(prefix)


def netns_name(prefix: str, host: str) -> str:
    return f"{prefix}-{host}"


def statefile(prefix: str) -> Path:
    return rundir(prefix) / "state.json"


class Emulation:
    """Brings one testbed up in namespaces and knows how to reach it."""

    def __init__(self, config: EmulationConfig) -> None:
        check_prefix(config.prefix)
        self.config = config
        self.topology: Topology = topology(config.topology, config.effective_nat64_prefix)
        self.choice = BackendChoice.parse(config.backend, config.tayga)
        self.ctx = RenderContext(world="netns", rundir=str(rundir(config.prefix)), prefix=config.prefix)
        self.netns_of = {h.name: netns_name(config.prefix, h.name) for h in self.topology.hosts}
        self.knot = KnotServer(
            rundir(config.prefix) / "knot",
            KnotConfig(
                listen=((self.topology.server_address, 53),),
                udp_workers=config.knot_workers,
                cpus=config.knot_cpus,
            ),
            netns=self.netns_of["server"],
        )

    @property
    def prefix(self) -> str:
        return self.config.prefix

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
        size = self.config.rmem_bytes
        return {"net.core.rmem_max": size, "net.core.rmem_default": size, "net.core.wmem_max": size}

    # -- up -----------------------------------------------------------------------------------------
    def preflight(self) -> None:
        if os.geteuid() != 0:
            raise EmulationError("setup up needs root (namespaces, sysctls, cgroups)")
        for role in self.topology.translators().values():
            reason = self.choice.backend(role).unavailable()
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
            "config": asdict(self.config),
            "phase": "coming up",
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pid": os.getpid(),
        }
        self._save(state)
        try:
            state["root_sysctls"] = rootsysctl.acquire(
                self.prefix, self.root_sysctls(), list(self.netns_of.values())
            )
            self._save(state)
            transport = transport or Netns(self.netns_of)
            for host, step in self.plan():
                transport.run(host, step)
            self._wait_for_daemons()
            self.knot.start()
            state["knot"] = self.knot.describe()
            if self.config.dut_cpus is not None:
                from xlatbench.setups.placement import set_dut_cpus

                state["placement"] = set_dut_cpus(self, list(self.config.dut_cpus))
        except BaseException:
            down(self.prefix)
            raise
        state["phase"] = "up"
        state["up_s"] = round(time.monotonic() - started, 3)
        self._save(state)
        return state

    def _wait_for_daemons(self, timeout_s: float = 5.0) -> None:
        """tayga opens its TUN device at start: wait until each TUN carries the daemon (it is 'up')."""
        deadline = time.monotonic() + timeout_s
        for host in self.translator_pids():
            while not self.translator_pids()[host] and time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(0.2)
        for host, pids in self.translator_pids().items():
            if not pids:
                raise EmulationError(
                    f"{host}: translator process did not stay up: see {rundir(self.prefix)}/{host}-tayga.log"
                )

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
        for host, role in self.topology.translators().items():
            backend = self.choice.backend(role)
            pids[host] = []
            if isinstance(backend, TaygaBackend):
                pid = _read_pid(Path(backend.files(host, self.ctx)["pid"]))
                if pid is not None and _alive(pid):
                    pids[host].append(pid)
        return pids

    def describe(self) -> dict[str, object]:
        roles = {}
        for host, role in self.topology.translators().items():
            roles[host] = {"role": type(role).__name__, **self.choice.backend(role).describe(role)}
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
            "notes": list(self.topology.notes),
        }
        if not info["paper_prefix"]:
            info["notes"] = [
                *self.topology.notes,
                f"translation prefix {self.topology.nat64_prefix} replaces the paper's 64:ff9b::/96",
            ]
        try:
            state = self.state()
        except EmulationError:
            return info
        for key in ("phase", "up_s", "root_sysctls", "placement", "knot"):
            if key in state:
                info[key] = state[key]
        return info


# -- finding and removing --------------------------------------------------------------------------------
def existing_namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    return [netns_name(prefix, h) for h in HOST_NAMES if netns_name(prefix, h) in names]


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _netns_pids(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _ours_by_pidfile(run: Path) -> list[int]:
    """PIDs from our pid files whose command line still names our run directory (no reused PIDs)."""
    pids = []
    for pidfile in run.glob("*.pid") if run.exists() else []:
        pid = _read_pid(pidfile)
        if pid is None:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if str(run).encode() in cmdline:
            pids.append(pid)
    return pids


def _end(pids: list[int], timeout_s: float = 3.0) -> None:
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 2.0)):
        live = [p for p in pids if _alive(p)]
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while any(_alive(p) for p in live) and time.monotonic() < deadline:
            time.sleep(0.05)


def cpusets(prefix: str) -> list[Path]:
    return [CPUSET_ROOT / f"{prefix}-{h}" for h in DUT_HOSTS if (CPUSET_ROOT / f"{prefix}-{h}").exists()]


def root_nft_tables(prefix: str) -> list[tuple[str, str]]:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False).stdout
    tables = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and parts[2].startswith(f"{prefix}_"):
            tables.append((parts[1], parts[2]))
    return tables


def down(prefix: str) -> dict[str, object]:
    """Remove every object of `prefix`, whatever state a previous run left. Idempotent."""
    check_prefix(prefix)
    started = time.monotonic()
    run = rundir(prefix)
    removed: dict[str, object] = {}
    if (run / "knot").exists():
        stop_stale(run / "knot")
    namespaces = existing_namespaces(prefix)
    pids = sorted({p for ns in namespaces for p in _netns_pids(ns)} | set(_ours_by_pidfile(run)))
    _end(pids)
    removed["processes"] = pids
    removed["cpusets"] = [str(p) for p in cpusets(prefix)]
    for path in cpusets(prefix):
        _remove_cpuset(path)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    removed["namespaces"] = namespaces
    tables = root_nft_tables(prefix)
    for family, name in tables:
        subprocess.run(["nft", "delete", "table", family, name], capture_output=True, check=False)
    removed["root_nft_tables"] = [f"{f} {n}" for f, n in tables]
    removed["root_sysctls_restored"] = rootsysctl.release(prefix)
    if run.exists():
        shutil.rmtree(run, ignore_errors=True)
    removed["down_s"] = round(time.monotonic() - started, 3)
    return removed


def _remove_cpuset(path: Path) -> None:
    """Move any task still inside back to the root cpuset, then remove the cgroup."""
    deadline = time.monotonic() + 3.0
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (CPUSET_ROOT / "cgroup.procs").write_text(pid)
            time.sleep(0.05)


def leftovers(prefix: str) -> list[str]:
    """Everything of `prefix` still on the machine (empty after a clean `down`)."""
    found = [f"namespace {ns}" for ns in existing_namespaces(prefix)]
    found += [f"cpuset {p}" for p in cpusets(prefix)]
    found += [f"nft table {f} {n}" for f, n in root_nft_tables(prefix)]
    run = rundir(prefix)
    if run.exists():
        found.append(f"run directory {run}")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(run).encode() + b"/" in (proc / "cmdline").read_bytes():
                    found.append(f"process {proc.name}")
            except OSError:
                continue
    if rootsysctl.held_by(prefix):
        found.append(f"root sysctl lease {prefix}")
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    found += [
        f"root interface {line.split(':')[1].strip()}"
        for line in out.splitlines()
        if line.split(":")[1].strip().split("@")[0].startswith(f"{prefix}-")
    ]
    return found


def attach(prefix: str = "xb") -> Emulation:
    """The emulation a previous `up` (possibly another process) made, from its state file."""
    try:
        state = json.loads(statefile(prefix).read_text())
    except FileNotFoundError:
        raise EmulationError(
            f"no chain with prefix {prefix!r} is up: run `xlatbench setup up TOPOLOGY --prefix {prefix}`"
        ) from None
    config = state["config"]
    for key in ("knot_cpus", "dut_cpus"):
        if config.get(key) is not None:
            config[key] = tuple(config[key])
    return Emulation(EmulationConfig(**config))


__all__ = ["Emulation", "EmulationConfig", "EmulationError", "attach", "down", "leftovers"]
