"""What a testbed host says, made safe for the controller: every remote command's output read with a bound
(`run_bounded`: at most CAPTURE_LIMIT bytes per stream, the excess counted, never held), decoded without
failing on binary junk, its control characters and terminal escape sequences escaped (`printable`) before
anything is printed or stored, and every reading that is not what the suite expects turned into one line
naming the host, the command and what was expected (`HostOutputError`), never a traceback.

A host can lie about its own figures (nothing here can tell); it cannot run code on the controller, flood
its memory or its terminal, or crash it.
"""

from __future__ import annotations

import re
import subprocess
import threading
from dataclasses import dataclass
from typing import IO

from ..transports import StepError

# Per remote command and stream (stdout, stderr), bytes kept: the largest legitimate reading (a host's
# counters as JSON: `ip -s -j link`, `nft -j list ruleset`, /proc/net/snmp) is a few hundred KiB.
CAPTURE_LIMIT = 4 * 1024 * 1024
# Per preflight fact (one `key=value` line of the probe), characters kept in the record: a fact is one
# interface's JSON or a version string; the preflight goes with every result.
FACT_LIMIT = 16 * 1024
# C0 controls but tab and newline, DEL, C1 controls (ESC and CSI start terminal escape sequences).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class HostOutputError(StepError):
    """A host's output is not what the suite expects; the message is one line: host, command, expectation."""


def printable(text: str, keep_newlines: bool = True) -> str:
    """`text` with every control character but tab (and newline, with `keep_newlines`) written as `\\xNN`:
    an escape sequence from a host reaches no terminal and no record as itself."""
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return escaped if keep_newlines else escaped.replace("\n", "\\n")


def shown(text: str, limit: int = 120) -> str:
    """A host's text in a one-line message: escaped, on one line, cut to `limit` characters."""
    line = printable(text, keep_newlines=False)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def parse_error(host: str, command: str, expected: str, got: str) -> HostOutputError:
    """The one line for a reading that is not what the suite expects."""
    return HostOutputError(f"{host}: `{shown(command, 160)}` answered '{shown(got.strip(), 80)}', "
                           f"not {expected}")


@dataclass(frozen=True)
class Bounded:
    """One command's exit status and its output, each stream decoded, escaped and cut at the limit;
    `dropped`: bytes past the limit per stream (read and discarded)."""

    returncode: int
    stdout: str
    stderr: str
    dropped: dict[str, int]


def _drain(stream: IO[bytes], limit: int, into: list[bytes], dropped: list[int]) -> None:
    kept = 0
    while chunk := stream.read(65536):
        room = max(0, limit - kept)
        into.append(chunk[:room])
        kept += min(room, len(chunk))
        dropped[0] += max(0, len(chunk) - room)


def decode(data: bytes) -> str:
    """Bytes from a host as text: invalid UTF-8 replaced, control characters escaped (`printable`)."""
    return printable(data.decode("utf-8", errors="replace"))


def run_bounded(argv: list[str], stdin: str | None, timeout_s: float | None,
                limit: int = CAPTURE_LIMIT) -> Bounded:
    """Run `argv` (a local ssh client), feed it `stdin`, keep at most `limit` bytes of each output stream;
    subprocess.TimeoutExpired after `timeout_s` (the process is killed; None: no limit)."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    out: list[bytes] = []
    err: list[bytes] = []
    dropped_out, dropped_err = [0], [0]
    readers = [threading.Thread(target=_drain, args=(process.stdout, limit, out, dropped_out), daemon=True),
               threading.Thread(target=_drain, args=(process.stderr, limit, err, dropped_err), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        try:
            process.stdin.write((stdin or "").encode())
            process.stdin.close()
        except BrokenPipeError:
            pass  # the command ended without reading its input: its status says why
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    finally:
        for reader in readers:
            reader.join(timeout=10)
    dropped = {name: n for name, n in (("stdout", dropped_out[0]), ("stderr", dropped_err[0])) if n}
    return Bounded(process.returncode, decode(b"".join(out)), decode(b"".join(err)), dropped)


def cut_facts(facts: dict[str, str], limit: int = FACT_LIMIT) -> tuple[dict[str, str], dict[str, int]]:
    """Each fact cut to `limit` characters; -> (the facts, characters dropped per cut fact)."""
    cut = {key: len(value) - limit for key, value in facts.items() if len(value) > limit}
    return {key: value[:limit] for key, value in facts.items()}, cut
