"""Transports execute steps on a host through one method, `run(host, step)`. Here: DryRun prints them as a
shell script, Netns runs them in the network namespace that emulates the host. The SSH transport of real
hosts (setups/testbed/ssh.py) implements the same method: it runs the argv remotely, copies WriteFile's
text, backgrounds a Daemon and reads its PID."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Protocol, TextIO

from .steps import Cmd, Comment, Daemon, Step, WriteFile


class StepError(RuntimeError):
    """A step failed; the message names the host, the command and its error output."""


class Transport(Protocol):
    def run(self, host: str | None, step: Step) -> None: ...


class DryRun:
    """Prints steps as shell. With a `netns_of` mapping, commands for a host are wrapped in
    `ip netns exec NS`, which is exactly what the Netns transport runs."""

    def __init__(self, out: TextIO | None = None, netns_of: dict[str, str] | None = None) -> None:
        self._out = out
        self.netns_of = netns_of
        self._host: str | None = ""

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def run(self, host: str | None, step: Step) -> None:
        if self.netns_of is None and host != self._host:
            print(f"\n### host {host}", file=self.out)
            self._host = host
        ns = self.netns_of.get(host) if self.netns_of and host else None
        if ns and isinstance(step, Cmd):
            step = Cmd(("ip", "netns", "exec", ns, *step.argv), step.check)
        elif ns and isinstance(step, Daemon):
            step = Daemon(("ip", "netns", "exec", ns, *step.argv), step.pidfile, step.logfile)
        print(step.shell(), file=self.out)


class Netns:
    """Runs steps on this machine: a host's steps inside namespace `netns_of[host]`, host None in the
    root namespace. Daemons start in their own session (a dying caller does not take them along)."""

    def __init__(self, netns_of: dict[str, str], timeout_s: float = 60.0) -> None:
        self.netns_of = netns_of
        self.timeout_s = timeout_s

    def argv(self, host: str | None, argv: tuple[str, ...]) -> list[str]:
        if host is None:
            return list(argv)
        return ["ip", "netns", "exec", self.netns_of[host], *argv]

    def run(self, host: str | None, step: Step) -> None:
        if isinstance(step, Comment):
            return
        if isinstance(step, WriteFile):
            Path(step.path).parent.mkdir(parents=True, exist_ok=True)
            Path(step.path).write_text(step.text)
            return
        if isinstance(step, Daemon):
            self._start_daemon(host, step)
            return
        argv = self.argv(host, step.argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except FileNotFoundError as err:
            raise StepError(f"{host or 'root'}: cannot run {step.argv[0]}: {err}") from None
        except subprocess.TimeoutExpired:
            raise StepError(
                f"{host or 'root'}: `{step.shell()}` did not finish in {self.timeout_s:.0f} s"
            ) from None
        if step.check and done.returncode != 0:
            message = (done.stderr or done.stdout).strip().replace("\n", " | ")
            raise StepError(f"{host or 'root'}: `{step.shell()}` failed (exit {done.returncode}): {message}")

    def _start_daemon(self, host: str | None, step: Daemon) -> None:
        Path(step.pidfile).parent.mkdir(parents=True, exist_ok=True)
        with open(step.logfile, "wb") as log:
            try:
                process = subprocess.Popen(
                    self.argv(host, step.argv),
                    stdout=log,
                    stderr=log,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except FileNotFoundError as err:
                raise StepError(f"{host or 'root'}: cannot start {step.argv[0]}: {err}") from None
        # `ip netns exec` execs the program, so this PID is the daemon's own.
        Path(step.pidfile).write_text(f"{process.pid}\n")
        try:
            code = process.wait(timeout=0.3)
        except subprocess.TimeoutExpired:
            return
        tail = Path(step.logfile).read_text(errors="replace").strip().splitlines()[-3:]
        raise StepError(
            f"{host or 'root'}: {os.path.basename(step.argv[0])} exited at once (code {code}): "
            f"{' | '.join(tail) or 'no output'}"
        )
