"""Run Debian's knotd as the echo server: render its config, start it, wait until it answers, stop it.

A workdir holds everything of one server (knot.conf, the zone, the pid file, knotd's stderr), so a
later start or stop finds a knotd left behind by a run that died (even by `kill -9`) through the
pid file and ends it before going on: knotd refuses to start while an old one holds its pid file.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from ..procs import terminate
from .zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET, query_name, write_zone

TEMPLATE = Path(__file__).with_name("knot.conf.in")


class KnotError(RuntimeError):
    """knotd could not be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class KnotConfig:
    """What the echo server serves and how.

    listen: (address, UDP/TCP port) pairs knotd binds.
    udp_workers: number of UDP worker threads (knotd pins worker i to CPU i mod ncpu itself).
    cpus: CPUs every knotd thread is re-pinned to after start; None leaves knotd's own placement.
    domain, subnet: the zone (one AAAA record per address of the subnet).
    """

    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 53),)
    udp_workers: int = 1
    cpus: tuple[int, ...] | None = None
    domain: str = DEFAULT_DOMAIN
    subnet: str = DEFAULT_SUBNET


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
        stop_stale(self.workdir)
        self._write_config()
        write_zone(self.zonefile, self.config.domain, self.config.subnet)
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
        }
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


def stop_stale(workdir: Path, timeout_s: float = 10.0) -> None:
    """End a knotd whose pid file is in `workdir` (a run that died left it); remove the pid file."""
    pidfile = workdir / "knot.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return
    if _is_knotd_of(pid, workdir):
        _terminate(pid, timeout_s)
    with contextlib.suppress(FileNotFoundError):
        pidfile.unlink()


def _terminate(pid: int, timeout_s: float) -> None:
    if terminate([pid], timeout_s, kill_wait_s=5.0):
        raise KnotError(f"knotd (pid {pid}) did not exit after SIGKILL")
