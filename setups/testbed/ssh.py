"""Steps and shell snippets on real hosts through the system's OpenSSH client.

One master connection per host (ControlMaster/ControlPersist) carries every command; each remote
command is logged with host, exit status and duration (logger `xlatbench.ssh`, and `SshTransport.log`).
`LocalShell` runs the same snippets on this machine (unit tests: fake sysfs and /proc trees). Every output
is read with a bound and escaped (hostout.run_bounded): what a command printed past the bound is counted in
`Completed.dropped` and logged, never held.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..steps import Cmd, Comment, Daemon, Step, WriteFile
from ..transports import StepError
from .hostout import run_bounded
from .undo import XdpRelease, remember_process

LOG = logging.getLogger("xlatbench.ssh")
SSH_FAILED = 255  # what ssh exits with when it fails itself (and when the remote command died of a signal)
BASE_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
                "-o", "ControlMaster=auto", "-o", "ControlPersist=120")


@dataclass(frozen=True)
class Completed:
    """One remote command: host, exit status, duration (s), output (bounded and escaped: hostout), and the
    bytes per stream read past the bound and dropped."""

    host: str
    command: str
    returncode: int
    duration_s: float
    stdout: str
    stderr: str
    dropped: dict[str, int] = field(default_factory=dict)


class Shell(Protocol):
    def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> Completed: ...


def step_script(step: Step | XdpRelease) -> tuple[str, str | None]:
    """A step as one shell snippet for a remote host, and the text to feed its stdin (WriteFile)."""
    if isinstance(step, Cmd | XdpRelease):
        return step.shell(), None
    if isinstance(step, WriteFile):
        path = shlex.quote(step.path)
        return f"mkdir -p \"$(dirname {path})\" && cat > {path}", step.text
    if isinstance(step, Daemon):
        pid, log = shlex.quote(step.pidfile), shlex.quote(step.logfile)
        # setsid + nohup: the daemon outlives this connection; the pid file holds its own PID.
        started = remember_process("$!", step.pidfile, step.argv[0])
        return (f"mkdir -p \"$(dirname {pid})\" && {{ setsid nohup {shlex.join(step.argv)} >{log} 2>&1 "
                f"</dev/null & {started}; }} && sleep 0.3 && {{ kill -0 \"$(cat {pid})\" 2>/dev/null || "
                f"{{ echo \"{step.argv[0]} exited at once: $(tail -n 3 {log})\" >&2; false; }}; }}"), None
    return "", None


# A transport's own directory of master sockets: /tmp/xlatbench-ssh-<pid of its command>-XXXX.
CONTROL_PREFIX = "xlatbench-ssh-"


def sweep_control_dirs(tmp: Path | None = None) -> list[Path]:
    """Remove the master-socket directories of commands that no longer run (killed with -9, so `close`
    never ran; their masters end by ControlPersist); -> the directories removed."""
    removed = []
    for path in (tmp or Path(tempfile.gettempdir())).glob(f"{CONTROL_PREFIX}*-*"):
        pid = path.name[len(CONTROL_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists() or not path.is_dir():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


class SshTransport:
    """Runs steps on the hosts of an inventory: `destinations` maps host role -> ssh destination."""

    def __init__(self, destinations: dict[str, str], options: tuple[str, ...] = (),
                 timeout_s: float = 120.0, control_dir: str | None = None) -> None:
        self.destinations = destinations
        self.options = tuple(options)
        self.timeout_s = timeout_s
        self._own_dir = control_dir is None
        if control_dir is None:
            sweep_control_dirs()
        self._control_dir = control_dir or tempfile.mkdtemp(prefix=f"{CONTROL_PREFIX}{os.getpid()}-")
        self.log: list[Completed] = []

    def argv(self, host: str, script: str | None = None) -> list[str]:
        """ssh argv reaching `host`; with `script`, running that shell snippet there."""
        try:
            dest = self.destinations[host]
        except KeyError:
            raise StepError(f"no SSH destination for host {host!r}") from None
        control = ("-o", f"ControlPath={self._control_dir}/%C")
        argv = ["ssh", *BASE_OPTIONS, *control, *self.options, dest]
        if script is not None:
            argv += ["--", script]
        return argv

    def run(self, host: str | None, step: Step) -> None:
        if isinstance(step, Comment) or host is None:
            return
        script, stdin = step_script(step)
        check = step.check if isinstance(step, Cmd) else True
        self.capture(host, script, check=check, stdin=stdin)

    def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> Completed:
        started = time.monotonic()
        try:
            done = run_bounded(self.argv(host, script), stdin, self.timeout_s)
        except subprocess.TimeoutExpired:
            raise StepError(f"{host}: `{_short(script)}` did not finish in {self.timeout_s:.0f} s") from None
        result = Completed(host, script, done.returncode, round(time.monotonic() - started, 4),
                           done.stdout, done.stderr, done.dropped)
        self.log.append(result)
        LOG.info("host=%s exit=%d %.3f s: %s", host, done.returncode, result.duration_s, _short(script))
        if done.dropped:  # the caller reports it (preflight: a problem; a trial's reading: the host lost)
            LOG.info("host=%s: output of `%s` cut: %s", host, _short(script, 80),
                        ", ".join(f"{n} bytes of {s} dropped" for s, n in done.dropped.items()))
        if check and done.returncode == SSH_FAILED:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise StepError(f"{host}: ssh {self.destinations[host]} failed (exit 255): {last}")
        if check and done.returncode != 0:
            message = (done.stderr or done.stdout).strip().replace("\n", " | ")
            raise StepError(f"{host}: `{_short(script)}` failed (exit {done.returncode}): {message}")
        return result

    def close(self) -> None:
        """End the master connections and remove their directory (the transport's own): nothing of a
        command outlives it. Safe to call twice."""
        for host in self.destinations:
            try:
                subprocess.run([*self.argv(host)[:-1], "-O", "exit", self.destinations[host]],
                               capture_output=True, timeout=10, check=False)
            except subprocess.TimeoutExpired:
                continue  # an unreachable host's master: ControlPersist ends it
        if self._own_dir:
            shutil.rmtree(self._control_dir, ignore_errors=True)

    def log_records(self) -> list[dict[str, object]]:
        return [{"host": c.host, "exit": c.returncode, "duration_s": c.duration_s,
                 "command": _short(c.command), **({"dropped_bytes": c.dropped} if c.dropped else {})}
                for c in self.log]


class LocalShell:
    """Runs snippets on this machine with sh (tests; the same snippets SshTransport sends)."""

    def __init__(self) -> None:
        self.log: list[Completed] = []

    def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> Completed:
        started = time.monotonic()
        done = run_bounded(["sh", "-c", script], stdin, 60)
        elapsed = time.monotonic() - started
        result = Completed(host, script, done.returncode, elapsed, done.stdout, done.stderr, done.dropped)
        self.log.append(result)
        if check and done.returncode != 0:
            message = done.stderr.strip()
            raise StepError(f"{host}: `{_short(script)}` failed (exit {done.returncode}): {message}")
        return result


def _short(script: str, limit: int = 200) -> str:
    line = " ".join(script.split())
    return line if len(line) <= limit else line[:limit] + " ..."


def write_remote(shell: Shell, host: str, path: str | Path, text: str) -> None:
    script, stdin = step_script(WriteFile(str(path), text))
    shell.capture(host, script, stdin=stdin)
