"""What a backend renders and a transport executes: a host's configuration as a list of steps."""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Cmd:
    """Run a command; `check` False tolerates failure (cleanup of things that may not exist)."""

    argv: tuple[str, ...]
    check: bool = True

    def shell(self) -> str:
        line = shlex.join(self.argv)
        return line if self.check else f"{line} || true"


@dataclass(frozen=True)
class WriteFile:
    """Write `text` to `path` on the host (a configuration file)."""

    path: str
    text: str

    def shell(self) -> str:
        return f"cat > {shlex.quote(self.path)} <<'EOF'\n{self.text.rstrip()}\nEOF"


@dataclass(frozen=True)
class Daemon:
    """Start a long-running program that stays in the foreground (the transport backgrounds it)
    and records its PID in `pidfile`; its output goes to `logfile`."""

    argv: tuple[str, ...]
    pidfile: str
    logfile: str

    def shell(self) -> str:
        return (
            f"{shlex.join(self.argv)} >{shlex.quote(self.logfile)} 2>&1 & "
            f"echo $! >{shlex.quote(self.pidfile)}"
        )


@dataclass(frozen=True)
class Comment:
    """A line of explanation: printed by DryRun, ignored when executing."""

    text: str

    def shell(self) -> str:
        return "\n".join(f"# {line}" for line in self.text.splitlines())


Step = Cmd | WriteFile | Daemon | Comment


def cmd(line: str, check: bool = True) -> Cmd:
    """A Cmd from a shell-like line (split with shlex: quotes group words, nothing is expanded)."""
    return Cmd(tuple(shlex.split(line)), check)
