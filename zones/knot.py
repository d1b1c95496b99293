"""Run Debian's knotd as the echo server: render its config, start it, wait until it answers, stop it.

A workdir holds everything of one server (knot.conf, the zone, the pid file, knotd's stderr, and an
owner file naming the process that started it), so a later start or stop finds a knotd left behind by
a run that died (even by `kill -9`) through the pid file and ends it before going on: knotd refuses to
start while an old one holds its pid file. A knotd whose owner still runs is in use and is never ended
by a start; one of another user is never ended at all.

Nothing answers twice: before knotd starts, nothing may be bound to, or answer DNS at, its address and
port (Knot binds with SO_REUSEPORT, so a second server would silently share the queries); after it
answers, exactly our knotd must hold the sockets there.

In XDP mode (KnotConfig.xdp_interface) knotd also answers UDP/53 arriving on that interface through its
own XDP program and AF_XDP sockets (Knot's `xdp: listen: IFACE@53`), before the kernel's UDP stack sees
it; its sockets at `listen` stay (they answer what does not arrive on that interface, e.g. the readiness
query over loopback, and TCP). A start checks that the program is attached and says in which mode
(native or generic); describe() names the I/O mode ("io": "socket" or "xdp") so every record does. knotd
leaves its program attached when it exits: the workdir records the interface (xdp.json) and every stop,
also of a knotd a killed run left, detaches Knot's program from it.

The loopback self-test keeps its workdir in a fixed per-user run directory (loopback_rundir), so that
`xlatbench setup down` finds what a killed run left (cleanup_loopback).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from .. import xdp
from ..procs import alive, start_time, terminate
from .zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET, query_name, write_zone

TEMPLATE = Path(__file__).with_name("knot.conf.in")
IO_MODES = ("socket", "xdp")  # how the echo server takes its queries: the kernel's UDP sockets, or AF_XDP


class KnotError(RuntimeError):
    """knotd could not be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class KnotConfig:
    """What the echo server serves and how.

    listen: (address, UDP/TCP port) pairs knotd binds.
    udp_workers: number of UDP worker threads (knotd pins worker i to CPU i mod ncpu itself).
    cpus: CPUs every knotd thread is re-pinned to after start; None leaves knotd's own placement.
    domain, subnet: the zone (one AAAA record per address of the subnet).
    xdp_interface: answer UDP arriving on this interface (in knotd's network namespace) in XDP mode, at
        the first listen port; None: sockets only.
    """

    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 53),)
    udp_workers: int = 1
    cpus: tuple[int, ...] | None = None
    domain: str = DEFAULT_DOMAIN
    subnet: str = DEFAULT_SUBNET
    xdp_interface: str | None = None

    @property
    def io(self) -> str:
        """"xdp" when knotd answers in XDP mode, else "socket" (one of IO_MODES)."""
        return "xdp" if self.xdp_interface else "socket"


def check_io(io: object, where: str = "io") -> str:
    """`io` if it is one of IO_MODES, else ValueError in one line."""
    if io not in IO_MODES:
        raise ValueError(f"{where} must be one of {list(IO_MODES)}, got {io!r}")
    return str(io)


@dataclass
class KnotServer:
    """One knotd, optionally inside a network namespace; a context manager that always stops it."""

    workdir: Path
    config: KnotConfig = field(default_factory=KnotConfig)
    netns: str | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _ready_s: float | None = field(default=None, init=False, repr=False)

    @property
    def pidfile(self) -> Path:
        return self.workdir / "knot.pid"

    @property
    def conffile(self) -> Path:
        return self.workdir / "knot.conf"

    @property
    def zonefile(self) -> Path:
        return self.workdir / f"{self.config.domain}.zone"

    @property
    def logfile(self) -> Path:
        return self.workdir / "knotd.log"

    @property
    def ownerfile(self) -> Path:
        return self.workdir / "owner"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process and self._process.poll() is None else None

    def __enter__(self) -> KnotServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 60.0) -> None:
        """Write config and zone, start knotd, wait until it answers a query from the zone."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        stop_stale(self.workdir, force=False)
        for address, port in self.config.listen:
            check_free(address, port, self.netns)
        write_owner(self.ownerfile)
        self._write_config()
        write_zone(self.zonefile, self.config.domain, self.config.subnet)
        if self.config.xdp_interface:
            remember_xdp(self.workdir, self.netns, self.config.xdp_interface)
        argv = ["knotd", "-c", str(self.conffile)]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        started = time.monotonic()
        with open(self.logfile, "wb") as log:
            try:
                self._process = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
            except FileNotFoundError as err:
                raise KnotError(f"cannot run {argv[0]}: {err}; install knot (tools/install-deps)") from None
        try:
            self._wait_until_answering(timeout_s)
            self.check_sole_holder()
            if self.config.xdp_interface:
                self._wait_for_xdp(timeout_s)
        except BaseException:
            self.stop()
            raise
        self._ready_s = time.monotonic() - started
        if self.config.cpus is not None:
            pin_threads(self._process.pid, self.config.cpus)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop our knotd (TERM, then KILL) and any stale one of this workdir. Idempotent."""
        if self._process is not None:
            _terminate(self._process.pid, timeout_s)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=1)
            self._process = None
        stop_stale(self.workdir, timeout_s)
        with contextlib.suppress(FileNotFoundError):
            self.ownerfile.unlink()

    def xdp_program(self) -> xdp.Attached | None:
        """knotd's XDP program on its interface (None: sockets only, or none attached)."""
        if not self.config.xdp_interface:
            return None
        found = xdp.attached(self.netns, self.config.xdp_interface)
        return found[0] if found else None

    def _wait_for_xdp(self, timeout_s: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout_s
        while self.xdp_program() is None:
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise KnotError(f"knotd attached no XDP program to {self.config.xdp_interface} (XDP mode): "
                                f"{self._log_tail()}")
            time.sleep(0.1)

    def check_sole_holder(self) -> None:
        """Exactly our knotd holds the sockets at each listen address, or KnotError naming the others."""
        assert self._process is not None
        for address, port in self.config.listen:
            others = [h for h in socket_holders(address, port, self.netns) if h.pid != self._process.pid]
            if others:
                raise KnotError(f"{address}@{port} is shared: besides our knotd (pid {self._process.pid}) "
                                f"{_describe(others)}; stop that process or pick another port")

    def describe(self) -> dict[str, object]:
        """Version, worker count, address, and where each knotd thread is allowed to run and last ran."""
        info: dict[str, object] = {
            "implementation": "knot",
            "version": knot_version(),
            "udp_workers": self.config.udp_workers,
            "listen": [f"{addr}@{port}" for addr, port in self.config.listen],
            "netns": self.netns,
            "zone": {"domain": self.config.domain, "subnet": self.config.subnet},
            "ready_s": self._ready_s,
            "io": self.config.io,
        }
        if self.config.xdp_interface:
            program = self.xdp_program()
            info["xdp"] = {"listen": f"{self.config.xdp_interface}@{self.config.listen[0][1]}",
                           "attached": program.record() if program else None}
        if self.pid is not None:
            info["pid"] = self.pid
            info["rss_kib"] = _rss_kib(self.pid)
            info["threads"] = thread_placement(self.pid)
        return info

    def _write_config(self) -> None:
        listen = ", ".join(_listen_item(addr, port) for addr, port in self.config.listen)
        text = Template(TEMPLATE.read_text()).substitute(
            rundir=str(self.workdir),
            udp_workers=self.config.udp_workers,
            listen=listen,
            domain=self.config.domain,
            zonefile=str(self.zonefile),
            xdp=xdp_section(self.config),
        )
        self.conffile.write_text(text)

    def _wait_until_answering(self, timeout_s: float) -> None:
        assert self._process is not None
        address, port = self.config.listen[0]
        name = query_name(0, self.config.subnet, self.config.domain)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise KnotError(f"knotd exited with code {self._process.returncode}: {self._log_tail()}")
            if self._answers(address, port, name):
                return
            time.sleep(0.1)
        raise KnotError(f"knotd did not answer {name} at {address}@{port} within {timeout_s:.0f} s: "
                        f"{self._log_tail()}")

    def _answers(self, address: str, port: int, name: str) -> bool:
        argv = ["kdig", f"@{address}", "-p", str(port), name, "AAAA", "+short", "+retry=0", "+timeout=1"]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
        except FileNotFoundError:
            raise KnotError("kdig not found: install knot-dnsutils (tools/install-deps)") from None
        except subprocess.TimeoutExpired:
            return False
        return out.returncode == 0 and ":" in out.stdout

    def _log_tail(self) -> str:
        try:
            lines = self.logfile.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(empty log)"


def xdp_section(config: KnotConfig) -> str:
    """knot.conf's `xdp:` section for XDP mode: UDP only (TCP stays on the sockets), replies back out of
    the interface the query came in on without a route lookup (route-check off); empty in socket mode."""
    if not config.xdp_interface:
        return ""
    port = config.listen[0][1]
    return (f"\nxdp:\n    listen: [ {config.xdp_interface}@{port} ]\n    udp: on\n    tcp: off\n"
            "    route-check: off\n")


def _listen_item(address: str, port: int) -> str:
    return f"{address}@{port}"


def knot_version() -> str:
    """knotd's version string, e.g. '3.2.6'."""
    try:
        out = subprocess.run(["knotd", "--version"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return "not installed"
    # "knotd (Knot DNS), version 3.2.6"
    return out.strip().rsplit(" ", 1)[-1] if out else "unknown"


def pin_threads(pid: int, cpus: tuple[int, ...]) -> None:
    """Re-pin every thread of `pid` to `cpus`: knotd pins its UDP workers itself at start."""
    for tid in _threads(pid):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(tid, cpus)


def thread_placement(pid: int) -> list[dict[str, object]]:
    """For each thread: its id, the CPUs it may run on, and the CPU it last ran on."""
    placement = []
    for tid in _threads(pid):
        try:
            allowed = sorted(os.sched_getaffinity(tid))
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except (ProcessLookupError, FileNotFoundError):
            continue
        # Field 39 (processor) counted after the parenthesised command name.
        last_cpu = int(stat.rsplit(")", 1)[1].split()[36])
        placement.append({"tid": tid, "cpus_allowed": allowed, "last_cpu": last_cpu})
    return placement


def _threads(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return []


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def _is_knotd_of(pid: int, workdir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return any(arg.endswith(b"knotd") for arg in cmdline) and str(workdir / "knot.conf").encode() in cmdline


def _uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def write_owner(path: Path) -> None:
    """Name this process (pid and start time, so a reused pid is not taken for it) as the server's owner."""
    path.write_text(f"{os.getpid()} {start_time(os.getpid())}\n")


def live_owner(workdir: Path) -> int | None:
    """The pid of the process that started this workdir's knotd, if it still runs and is not us."""
    try:
        pid_text, started = (workdir / "owner").read_text().split()[:2]
        pid = int(pid_text)
    except (FileNotFoundError, ValueError):
        return None
    if pid == os.getpid() or not alive(pid) or str(start_time(pid)) != started:
        return None
    return pid


def stop_stale(workdir: Path, timeout_s: float = 10.0, force: bool = True) -> int | None:
    """End a knotd whose pid file is in `workdir` (a run that died left it); remove the pid file.

    Returns the pid ended, if any. Refuses (KnotError, naming the pid) when the knotd belongs to another
    user, and, unless `force`, when the process that started it still runs (the server is in use).
    """
    pidfile = workdir / "knot.pid"
    try:
        pid: int | None = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        pid = None
    ended = None
    if pid is not None and _is_knotd_of(pid, workdir) and alive(pid):
        if _uid(pid) != os.getuid():
            raise KnotError(f"knotd (pid {pid}) of {workdir} belongs to user {_uid(pid)}, not to us: "
                            "leaving it; ask its owner to stop it, or use another port/run directory")
        owner = live_owner(workdir)
        if owner is not None and not force:
            raise KnotError(f"knotd (pid {pid}) of {workdir} is in use by running process {owner}: stop "
                            "that process first, or pick another port")
        _terminate(pid, timeout_s)
        ended = pid
    with contextlib.suppress(FileNotFoundError):
        pidfile.unlink()
    release_xdp(workdir)
    return ended


XDP_RECORD = "xdp.json"  # in the workdir: where knotd was told to attach its XDP program
KNOT_XDP_PROGRAM = "xdp_redirect_dn"  # Knot's program (xdp_redirect_dns) as the kernel names it: 15 chars


def remember_xdp(workdir: Path, netns: str | None, interface: str) -> None:
    """Write down, before knotd starts, the interface it will attach its XDP program to."""
    (workdir / XDP_RECORD).write_text(json.dumps({"netns": netns, "interface": interface}) + "\n")


def release_xdp(workdir: Path) -> list[str]:
    """Detach Knot's XDP program from the interface the workdir's knotd was told to use, once no knotd
    runs there: knotd leaves it attached when it exits (a later knotd would reuse it), and one killed with
    SIGKILL certainly does. A program of another name on that interface is left alone. Returns what was
    detached ("PROGRAM (id N, MODE) on IF")."""
    record = workdir / XDP_RECORD
    try:
        where = json.loads(record.read_text())
    except (FileNotFoundError, ValueError):
        return []
    netns, interface = where.get("netns"), str(where.get("interface"))
    done = []
    for program in xdp.attached(netns, interface):
        if program.program == KNOT_XDP_PROGRAM:
            error = xdp.detach(program, netns)
            if error:
                raise KnotError(f"cannot detach knotd's XDP program from {interface}: {error}")
            done.append(program.text())
    record.unlink()
    return done


def _terminate(pid: int, timeout_s: float) -> None:
    if terminate([pid], timeout_s, kill_wait_s=5.0):
        raise KnotError(f"knotd (pid {pid}) did not exit after SIGKILL")


# -- nothing answers twice ------------------------------------------------------------------------
@dataclass(frozen=True)
class SocketHolder:
    """A socket bound where a server wants to listen: protocol, local address, and the process holding it."""

    proto: str
    local: str
    pid: int | None
    command: str | None

    def __str__(self) -> str:
        who = f"{self.command} (pid {self.pid})" if self.pid else "a process we cannot see (another user?)"
        return f"{who} on {self.proto} {self.local}"


_USERS_RE = re.compile(r'\("([^"]*)",pid=(\d+)')
_WILDCARDS = {"0.0.0.0", "*", "[::]", "::"}


def _in_netns(argv: list[str], netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def socket_holders(address: str, port: int, netns: str | None = None) -> list[SocketHolder]:
    """Bound UDP and listening TCP sockets on `port` at `address` or a wildcard address (`ss -ulntp`)."""
    argv = _in_netns(["ss", "-H", "-l", "-n", "-u", "-t", "-p", f"sport = :{port}"], netns)
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except FileNotFoundError:
        raise KnotError("ss not found: install iproute2 (tools/install-deps)") from None
    wanted = {address, f"[{address}]"} | _WILDCARDS
    holders = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 5:
            continue
        host = cols[4].rsplit(":", 1)[0].split("%")[0]
        if host not in wanted:
            continue
        users = _USERS_RE.findall(line) or [(None, None)]
        holders += [SocketHolder(cols[0], cols[4], int(pid) if pid else None, cmd) for cmd, pid in users]
    return holders


def _describe(holders: list[SocketHolder]) -> str:
    return "; ".join(sorted({str(h) for h in holders}))


_PROBE = b"\x58\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x01"  # ". SOA"


def dns_answers(address: str, port: int, timeout_s: float = 0.3) -> bool:
    """True if a DNS query to address@port gets any reply within timeout_s (this network namespace)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.sendto(_PROBE, (address, port))
            reply = sock.recv(512)
        except OSError:  # timeout, or ICMP port unreachable (ECONNREFUSED)
            return False
    return reply[:2] == _PROBE[:2]


def _answers_in(address: str, port: int, netns: str | None) -> bool:
    if not netns:
        return dns_answers(address, port)
    code = ("import sys; from xlatbench.zones.knot import dns_answers; "
            f"sys.exit(0 if dns_answers({address!r}, {port}) else 3)")
    out = subprocess.run(_in_netns([sys.executable, "-c", code], netns), capture_output=True, timeout=30,
                         check=False)
    return out.returncode == 0


def check_free(address: str, port: int, netns: str | None = None) -> None:
    """Refuse (KnotError naming what is there) when a socket is bound at address@port or something answers."""
    where = f"{address}@{port}" + (f" in namespace {netns}" if netns else "")
    holders = socket_holders(address, port, netns)
    if holders:
        raise KnotError(f"cannot start knotd at {where}: already bound by {_describe(holders)}; stop that "
                        "process or pick another port")
    if _answers_in(address, port, netns):
        raise KnotError(f"cannot start knotd at {where}: something already answers DNS there though no "
                        "socket is bound (a redirect, e.g. an nft rule?); remove it or pick another port")


# -- the loopback self-test's run directory -------------------------------------------------------
def loopback_root() -> Path:
    """Per-user root of the loopback servers' run directories (XLATBENCH_LOOPBACK_ROOT overrides it)."""
    override = os.environ.get("XLATBENCH_LOOPBACK_ROOT")
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/run/xlatbench/loopback")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    temp = Path(tempfile.gettempdir())
    base = Path(runtime) / "xlatbench" if runtime else temp / f"xlatbench-{os.getuid()}"
    return base / "loopback"


def loopback_rundir(address: str, port: int) -> Path:
    """The fixed run directory of the loopback knotd at address@port."""
    return loopback_root() / f"{address.replace(':', '_')}-{port}"


def cleanup_loopback() -> dict[str, list[str]]:
    """End every stale loopback knotd of ours and remove its run directory; leave those in use."""
    result: dict[str, list[str]] = {"ended": [], "removed": [], "in_use": []}
    root = loopback_root()
    for workdir in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            pid = stop_stale(workdir, force=False)
        except KnotError as err:
            result["in_use"].append(str(err))
            continue
        if pid is not None:
            result["ended"].append(f"knotd pid {pid} ({workdir})")
        shutil.rmtree(workdir, ignore_errors=True)
        result["removed"].append(str(workdir))
    with contextlib.suppress(OSError):
        root.rmdir()
    return result
