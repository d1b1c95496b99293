"""Running DNS-OARC dnsperf (Debian's `dnsperf`): its command line, its query file, its statistics.

dnsperf has no verdict of its own: `-Q RATE` caps the rate but, above what its in-flight limit (`-q`) lets
through, it silently sends fewer queries (shared NOTES). So a rate-capped run counts only when it sent
the queries rate x duration asks for (`short_of_schedule`); its measurer says tester-limited otherwise.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..zones.zonefile import DEFAULT_DOMAIN, DEFAULT_SUBNET, query_name

# dnsperf starts its clock after reading the query file and ends on a time limit, so a run that kept up can
# miss the last few queries of its schedule: one in 10 000 (the paper's loss criterion) is allowed.
SENT_TOLERANCE = 1e-4
STARTUP_ALLOWANCE_S = 30.0
_FIELDS = {"sent": r"Queries sent:\s+(\d+)", "completed": r"Queries completed:\s+(\d+)",
           "qps": r"Queries per second:\s+([\d.]+)"}


class DnsperfError(RuntimeError):
    """dnsperf could not run or printed no statistics; the message says why in one line."""


@dataclass(frozen=True)
class DnsperfOptions:
    """dnsperf options other than server, rate and duration.

    port: DNS server port. data: query file (`write_queries`).
    clients: -c, simulated clients (sockets). outstanding: -q, queries in flight at most.
    timeout_s: -t, an answer later than this is lost, s. cpus: taskset CPU list for dnsperf (None: unpinned).
    """

    data: Path
    port: int = 53
    clients: int = 1
    outstanding: int = 10_000
    timeout_s: float = 1.0
    cpus: str | None = None


@dataclass(frozen=True)
class DnsperfRun:
    """What dnsperf printed. sent, completed: queries, count; qps: completed queries per second of its run."""

    sent: int
    completed: int
    qps: float


def write_queries(path: Path, count: int = 65_536, subnet: str = DEFAULT_SUBNET,
                  domain: str = DEFAULT_DOMAIN) -> Path:
    """A dnsperf query file of `count` AAAA names the suite's zone answers (zones.zonefile), one a line."""
    path.write_text("".join(f"{query_name(i, subnet, domain)} AAAA\n" for i in range(count)))
    return path


def dnsperf_argv(server: str, options: DnsperfOptions, duration_s: float,
                 rate_qps: float | None) -> list[str]:
    """The command line of one run; rate_qps None: self-paced (as fast as -c and -q allow)."""
    argv = ["dnsperf", "-s", server, "-p", str(options.port), "-d", str(options.data),
            "-l", f"{duration_s:g}", "-c", str(options.clients), "-q", str(options.outstanding),
            "-t", f"{options.timeout_s:g}"]
    if rate_qps is not None:
        argv += ["-Q", str(round(rate_qps))]
    return ["taskset", "-c", options.cpus, *argv] if options.cpus is not None else argv


def parse_statistics(text: str) -> DnsperfRun:
    """The totals of dnsperf's "Statistics:" block; DnsperfError when one is missing."""
    found = {name: re.search(pattern, text) for name, pattern in _FIELDS.items()}
    missing = [name for name, match in found.items() if match is None]
    if missing:
        last = text.strip().splitlines()[-1:] or ["(no output)"]
        raise DnsperfError(f"dnsperf printed no {', '.join(missing)} (last line: {last[0]!r})")
    return DnsperfRun(int(found["sent"][1]), int(found["completed"][1]), float(found["qps"][1]))


def run_dnsperf(argv: list[str], duration_s: float) -> DnsperfRun:
    """Run dnsperf to its end (killed if it overruns) and read its statistics."""
    if shutil.which("dnsperf") is None:
        raise DnsperfError("dnsperf not found: install Debian's dnsperf (tools/install-deps)")
    with tempfile.TemporaryFile(mode="w+") as output:
        try:
            done = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT,
                                  timeout=2 * duration_s + STARTUP_ALLOWANCE_S, check=False)
        except subprocess.TimeoutExpired:
            raise DnsperfError(f"dnsperf did not end a {duration_s:g} s run in time") from None
        output.seek(0)
        text = output.read()
    if done.returncode != 0:
        last = text.strip().splitlines()[-1:] or ["(no message)"]
        raise DnsperfError(f"dnsperf exited with code {done.returncode}: {last[0]}")
    return parse_statistics(text)


def short_of_schedule(run: DnsperfRun, rate_qps: float, duration_s: float) -> str | None:
    """Why a rate-capped run did not offer rate x duration queries, or None when it did."""
    scheduled = round(rate_qps * duration_s)
    if run.sent >= scheduled * (1 - SENT_TOLERANCE):
        return None
    return (f"dnsperf sent {run.sent} of {scheduled} scheduled queries: its in-flight cap slowed it below "
            f"{rate_qps:.0f} queries/s")
