"""Running the xlatperf tester: its command line, its JSON, its version."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import tester_binary
from ..procs import TESTER_JSON_PREFIX

# Beyond the trial itself the tester needs time to start, wait for late answers and write its JSON.
STARTUP_ALLOWANCE_S = 30.0

# xlatperf keeps at most this many queries in flight per socket, half the 16-bit DNS transaction IDs
# (kMaxOutstandingPerSocket, dnsperf/src/config.hpp).
MAX_OUTSTANDING_PER_SOCKET = 32768


def outstanding_per_socket(rate_qps: float, sockets: int, timeout_s: float) -> float:
    """Queries in flight per socket at rate_qps over `sockets` sockets, rounded up, as xlatperf computes it
    (dnsperf/src/options.cpp: ceil(rate / sockets x timeout)); xlatperf refuses more than
    MAX_OUTSTANDING_PER_SOCKET."""
    return math.ceil(rate_qps / sockets * timeout_s)


def sockets_needed(rate_qps: float, timeout_s: float) -> int:
    """The fewest sockets (threads x ports_per_thread) over which xlatperf accepts rate_qps."""
    sockets = max(1, math.ceil(rate_qps * timeout_s / MAX_OUTSTANDING_PER_SOCKET))
    while outstanding_per_socket(rate_qps, sockets, timeout_s) > MAX_OUTSTANDING_PER_SOCKET:
        sockets += 1
    return sockets


class TesterError(RuntimeError):
    """xlatperf could not run a trial; the message carries its own one-line error."""

    __test__ = False


@dataclass(frozen=True)
class TesterOptions:
    """xlatperf options other than server, rate and duration (docs/ARCHITECTURE.md).

    port: DNS server port.
    threads: sender/receiver thread pairs (paper: 16).
    ports_per_thread: source ports per sending thread (paper: 100; default 4 as xlatperf's own).
    timeout_s: an answer later than this is lost, s (paper: 0.25).
    sender_cpus, receiver_cpus: CPU lists for the tester's threads, e.g. "0" (None: tester's default).
    rcvbuf_bytes, sndbuf_bytes: socket buffer sizes, bytes (None: tester's default).
    domain, qtype, subnet: query names (None: tester's defaults, dns64perf.test / AAAA / 10.0.0.0/16).
    extra_args: further arguments passed as they are.
    """

    port: int = 53
    threads: int = 1
    ports_per_thread: int = 4
    timeout_s: float = 0.25
    sender_cpus: str | None = None
    receiver_cpus: str | None = None
    rcvbuf_bytes: int | None = None
    sndbuf_bytes: int | None = None
    domain: str | None = None
    qtype: str | None = None
    subnet: str | None = None
    extra_args: tuple[str, ...] = ()
    __test__ = False  # a name pytest would otherwise try to collect

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"tester port must be 1-65535, got {self.port}")
        if self.threads < 1 or self.ports_per_thread < 1:
            raise ValueError("tester threads and ports_per_thread must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError(f"tester timeout must be positive, got {self.timeout_s} s")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def xlatperf_argv(binary: str | Path, server: str, rate_qps: float, duration_s: float,
                  options: TesterOptions, json_path: str | Path) -> list[str]:
    argv = [str(binary), "--server", server, "--port", str(options.port), "--rate", _num(rate_qps),
            "--duration", _num(duration_s), "--threads", str(options.threads),
            "--ports-per-thread", str(options.ports_per_thread), "--timeout", _num(options.timeout_s)]
    optional = (("--sender-cpus", options.sender_cpus), ("--receiver-cpus", options.receiver_cpus),
                ("--rcvbuf", options.rcvbuf_bytes), ("--sndbuf", options.sndbuf_bytes),
                ("--domain", options.domain), ("--qtype", options.qtype), ("--subnet", options.subnet))
    for flag, value in optional:
        if value is not None:
            argv += [flag, str(value)]
    return [*argv, *options.extra_args, "--json", str(json_path), "--quiet"]


def run_trial(wrap: list[str], binary: str | Path, server: str, rate_qps: float, duration_s: float,
              options: TesterOptions) -> dict[str, Any]:
    """Run one xlatperf trial (argv prefixed by `wrap`, e.g. `ip netns exec NS`) and return its JSON."""
    # The controller's pid in the name: `setup down` removes those of a killed run (procs.sweep_stale_json).
    fd, json_name = tempfile.mkstemp(prefix=f"{TESTER_JSON_PREFIX}{os.getpid()}-", suffix=".json")
    os.close(fd)
    json_path = Path(json_name)
    argv = [*wrap, *xlatperf_argv(binary, server, rate_qps, duration_s, options, json_path)]
    try:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = process.communicate(timeout=duration_s + options.timeout_s + STARTUP_ALLOWANCE_S)
        except BaseException:  # timeout, Ctrl-C: never leave a tester running
            process.kill()
            process.wait()
            raise
        if process.returncode < 0:
            raise TesterError(f"xlatperf was killed by {signal.Signals(-process.returncode).name} during "
                              "the trial: the trial is void, not stored as a result")
        if process.returncode != 0:
            last = (stderr or "").strip().splitlines()
            raise TesterError(f"xlatperf exited with code {process.returncode}: "
                              f"{last[-1] if last else '(no message)'}")
        try:
            return json.loads(json_path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise TesterError(f"xlatperf wrote no readable JSON to {json_path}: {err}") from None
    except subprocess.TimeoutExpired:
        raise TesterError(f"xlatperf did not finish a {duration_s} s trial within "
                          f"{duration_s + STARTUP_ALLOWANCE_S:.0f} s") from None
    except FileNotFoundError as err:
        raise TesterError(f"cannot run the tester: {err}; build it with `make build`") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            json_path.unlink()


def find_tester() -> Path:
    """The xlatperf binary (see xlatbench.paths); TesterError with the fix when it is not built."""
    try:
        return tester_binary()
    except FileNotFoundError as err:
        raise TesterError(str(err)) from None
