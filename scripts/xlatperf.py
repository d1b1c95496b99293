"""Running the xlatperf tester: its command line, its JSON, its version, and the rules its options obey
(one place: campaign files, `xlatbench trial/search` and the measurers all build TesterOptions).

This is the one module that writes xlatperf's options (tests/test_architecture.py): a chain says where the
tester sends from (setups.chain.TesterPlace) and `xlatperf_argv` turns that, with the trial's settings, into
the command line; the limits of the tester's own flows (MAX_XDP_FLOWS, XDP_FIRST_PORT) live here too."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..paths import tester_binary
from ..procs import TESTER_JSON_PREFIX
from ..setups.chain import TesterPlace, TesterSource

# Beyond its own bound (xlatperf_bound_s) the tester needs time to start (sockets, rings, threads) and to
# write its JSON; a tester still running after both is broken, and the harness ends it.
STARTUP_ALLOWANCE_S = 30.0

# xlatperf's defaults for its send bound (dnsperf/src/config.hpp): its senders stop at window +
# max(--send-tolerance x window, --send-tolerance-abs) + --max-lag, whatever is left to send.
SEND_TOLERANCE = 1e-5
SEND_TOLERANCE_ABS_S = 2e-3
MAX_LAG_S = 0.02

# xlatperf keeps at most this many queries in flight per socket, half the 16-bit DNS transaction IDs
# (kMaxOutstandingPerSocket, dnsperf/src/config.hpp).
MAX_OUTSTANDING_PER_SOCKET = 32768

# How xlatperf's queries leave and its replies arrive (its --io): the kernel's UDP sockets, or AF_XDP on the
# client host's interface (docs/tester.md, "--io xdp").
TESTER_IO = ("socket", "xdp")

# xlatperf's flows with --io xdp: -K up to 2^24 (dnsperf/src/options.cpp); beyond one address's ports a
# chain deals them over several client addresses (setups.chain.xdp_flow_sources).
MAX_XDP_FLOWS = 1 << 24

# AF_XDP flows have no socket to pick a port: without [tester] first_port they start here (fixed ports, the
# same flows every trial). xlatperf's --io xdp binds one interface queue per thread pair; a chain binds
# one queue (the emulated client veth has one), so campaigns run one pair.
XDP_FIRST_PORT = 20000


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
    first_port: first source port, thread i socket j using first + i x ports_per_thread + j (None: ephemeral
        ports, new ones every trial). Fixed ports keep the same flows from trial to trial: behind a NAT44 (the
        MAP-T CE's napt) new flows would wait for the last trial's mappings to expire (conntrack, 30-120 s).
    timeout_s: an answer later than this is lost, s (paper: 0.25).
    sender_cpus, receiver_cpus: CPU lists for the tester's threads, e.g. "0" (None: tester's default).
    rcvbuf_bytes, sndbuf_bytes: socket buffer sizes, bytes (None: tester's default).
    domain, qtype, subnet: query names (None: tester's defaults, dns64perf.test / AAAA / 10.0.0.0/16).
    latency_from_s: the latency figures cover only the queries sent at least this long after the first, s
        (RFC 8219 §7.2's tagged queries; 0: every query; set by the latency procedure, not the campaign file).
    io: "socket" (UDP sockets, one per flow) or "xdp" (AF_XDP on the client host's interface, flows without
        sockets: one thread pair, fixed ports, up to MAX_XDP_FLOWS; the chain names the interface and each
        flow's address, several addresses when one address's ports from first_port do not hold them).
    extra_args: further arguments passed as they are.
    """

    port: int = 53
    threads: int = 1
    ports_per_thread: int = 4
    first_port: int | None = None
    timeout_s: float = 0.25
    sender_cpus: str | None = None
    receiver_cpus: str | None = None
    rcvbuf_bytes: int | None = None
    sndbuf_bytes: int | None = None
    domain: str | None = None
    qtype: str | None = None
    subnet: str | None = None
    io: str = "socket"
    extra_args: tuple[str, ...] = ()
    latency_from_s: float = 0.0
    __test__ = False  # a name pytest would otherwise try to collect

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"tester port must be 1-65535, got {self.port}")
        if self.threads < 1 or self.ports_per_thread < 1:
            raise ValueError("tester threads and ports_per_thread must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError(f"tester timeout must be positive, got {self.timeout_s} s")
        if self.first_port is not None and not 0 < self.first_port < 65536:
            raise ValueError(f"tester first_port must be 1-65535, got {self.first_port}")
        if self.io not in TESTER_IO:
            raise ValueError(f"tester io must be one of {list(TESTER_IO)}, got {self.io!r}")
        if self.io == "xdp" and self.threads != 1:
            raise ValueError("tester io = 'xdp' runs one sender/receiver pair on one interface queue "
                             "in campaigns (a chain binds one queue), got threads = "
                             f"{self.threads}: set threads = 1 and give the flows as ports_per_thread")
        first = source_first_port(self)
        if self.io == "xdp" and flows(self) > MAX_XDP_FLOWS:
            raise ValueError(f"tester io = 'xdp' gives at most {MAX_XDP_FLOWS} flows (xlatperf --io xdp "
                             f"-K), got {flows(self)}")
        if self.io == "socket" and first is not None and first + flows(self) - 1 > 65535:
            raise ValueError(f"tester source ports {first}-{first + flows(self) - 1} run past 65535 "
                             "(first_port + threads x ports_per_thread): lower first_port or the flows")


def flows(options: TesterOptions) -> int:
    """Distinct flows (source address x source port) xlatperf uses: one socket per port, threads x
    ports_per_thread, all from one source address."""
    return options.threads * options.ports_per_thread


def source_first_port(options: TesterOptions) -> int | None:
    """The first source port of the tester's flows when every trial uses the same ones: [tester] first_port,
    else for io = "xdp" XDP_FIRST_PORT (a flow without a socket needs a port); None: ephemeral ports, new ones
    every trial (sockets without first_port). A MAP-T `br` chain binds the tester to its CEs' ports itself."""
    if options.first_port is not None:
        return options.first_port
    return XDP_FIRST_PORT if options.io == "xdp" else None


def options_for_sessions(options: TesterOptions, sessions: int) -> TesterOptions:
    """The tester options that give exactly `sessions` flows: [tester] threads kept (fewer when sessions is
    smaller), ports_per_thread = sessions / threads. ValueError when sessions does not divide evenly."""
    if sessions < 1:
        raise ValueError(f"sessions must be positive, got {sessions}")
    threads = min(options.threads, sessions)
    if sessions % threads:
        raise ValueError(f"sessions {sessions} is not a multiple of [tester] threads {threads}: xlatperf "
                         "gives every thread the same number of source ports (sessions = threads x "
                         "ports_per_thread)")
    return replace(options, threads=threads, ports_per_thread=sessions // threads)


def pseudorandom_flows(options: TesterOptions, seed: int) -> TesterOptions:
    """The options with AF_XDP flows sent in RFC 4814 pseudorandom order keyed by `seed` (each flow once per
    round; the same seed gives the same order, so RFC 9693's phases run over the same flows alike)."""
    if options.io != "xdp":
        raise ValueError(f"a pseudorandom flow order needs io = 'xdp' (AF_XDP flows), got {options.io!r}")
    if not 0 < seed < 1 << 64:
        raise ValueError(f"the flow seed must be 1 .. 2^64 - 1, got {seed}")
    return replace(options, extra_args=(*options.extra_args, "--flow-order", "pseudorandom",
                                        "--flow-seed", str(seed)))


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _ports(ranges: tuple[tuple[int, int], ...]) -> list[str]:
    return [f"{first}-{last}" for first, last in ranges]


def _source(source: TesterSource) -> str:
    """`--source`'s value: ADDRESS or FIRST-LAST, then each port range."""
    where = source.first if source.first == source.last else f"{source.first}-{source.last}"
    return ",".join([where, *_ports(source.ports)])


def place_args(place: TesterPlace) -> list[str]:
    """xlatperf's options for where it sends from (a chain's `tester_place`): the AF_XDP interface, then the
    sources. One CE played: bound to its MAP address, sockets on consecutive ports from the start of its
    port set (thread i socket j: first + i*K + j). Several CEs, or AF_XDP flows over addresses: one
    `--source ADDRESS[-LAST],FIRST-LAST...` each (xlatperf deals socket g = i*K + j to source g mod N).
    Encapsulating CEs the AF_XDP tester plays itself (place.encap): --encap and its rule, CE count and BR."""
    args = ["--xdp-interface", place.interface] if place.interface else []
    if place.encap is not None:
        encap = place.encap
        args += ["--encap", encap.mode, "--encap-rule", encap.rule, "--encap-ces", str(encap.ces),
                 "--encap-br", encap.br]
        return [*args, "--encap-ports", str(encap.ports_per_ce)] if encap.ports_per_ce else args
    if place.ce and len(place.sources) == 1 and len(place.sources[0].ports) == 1:
        (ce,) = place.sources
        return [*args, "--bind", ce.first, "--first-port", str(ce.ports[0][0])]
    for source in place.sources:
        args += ["--source", _source(source)]
    return args


def xlatperf_argv(binary: str | Path, server: str, rate_qps: float, duration_s: float,
                  options: TesterOptions, json_path: str | Path,
                  place: TesterPlace | None = None) -> list[str]:
    """xlatperf's command line for one trial. place: where it sends from in the client host (a chain's
    `tester_place`: for io = "xdp" the interface and every flow's address and ports, for a tester playing
    MAP-T CEs their addresses and port sets); when it names sources they carry the source ports, so
    [tester] first_port is left out."""
    place = place or TesterPlace()
    argv = [str(binary), "--server", server, "--port", str(options.port), "--rate", _num(rate_qps),
            "--duration", _num(duration_s), "--threads", str(options.threads),
            "--ports-per-thread", str(options.ports_per_thread), "--timeout", _num(options.timeout_s)]
    optional = (("--first-port", None if place.sources or place.encap else options.first_port),
                ("--sender-cpus", options.sender_cpus), ("--receiver-cpus", options.receiver_cpus),
                ("--rcvbuf", options.rcvbuf_bytes), ("--sndbuf", options.sndbuf_bytes),
                ("--domain", options.domain), ("--qtype", options.qtype), ("--subnet", options.subnet))
    for flag, value in optional:
        if value is not None:
            argv += [flag, str(value)]
    if options.io != "socket":  # the default, and a tester build older than --io knows no such option
        argv += ["--io", options.io]
    if options.latency_from_s > 0:
        argv += ["--latency-from", _num(options.latency_from_s)]
    return [*argv, *place_args(place), *options.extra_args, "--json", str(json_path), "--quiet"]


def _extra_value(extra_args: tuple[str, ...], flag: str, default: float) -> float:
    """The last number given to `flag` in extra_args (`--flag V` or `--flag=V`), else default (a value that
    is no number is left to the tester, which refuses it with its own one-line error)."""
    value = default
    for i, arg in enumerate(extra_args):
        if arg == flag and i + 1 < len(extra_args):
            text = extra_args[i + 1]
        elif arg.startswith(flag + "="):
            text = arg.split("=", 1)[1]
        else:
            continue
        with contextlib.suppress(ValueError):
            value = float(text)
    return value


def xlatperf_bound_s(duration_s: float, options: TesterOptions) -> float:
    """The latest a trial of xlatperf ends on its own, from its schedule's start, s: its senders stop at the
    send bound (window + send tolerance + --max-lag, from extra_args or the tester's defaults), its receivers
    wait one timeout after the last query and its final read of what is pending takes at most one more."""
    tolerance = max(_extra_value(options.extra_args, "--send-tolerance", SEND_TOLERANCE) * duration_s,
                    _extra_value(options.extra_args, "--send-tolerance-abs", SEND_TOLERANCE_ABS_S))
    max_lag = _extra_value(options.extra_args, "--max-lag", MAX_LAG_S)
    lag_allowance = max_lag if max_lag > 0 else duration_s  # --max-lag 0: no lag check, one window more
    return duration_s + tolerance + lag_allowance + 2 * options.timeout_s


# The last stderr line of a testbed's wrapper (setups.testbed.remote_run) whose SSH connection failed.
LOST_CONNECTION = "remote_run: lost the SSH connection"


def run_trial(wrap: list[str], binary: str | Path, server: str, rate_qps: float, duration_s: float,
              options: TesterOptions, place: TesterPlace | None = None) -> dict[str, Any]:
    """Run one xlatperf trial (argv prefixed by `wrap`, e.g. `ip netns exec NS`; `place`: see xlatperf_argv)
    and return its JSON.

    A tester that cannot keep up stops its senders at its own bound and reports a tester-limited trial, which
    is a result like any other; only a tester that outlives that bound by STARTUP_ALLOWANCE_S is ended here,
    a TesterError (the tester is broken, the trial void)."""
    # The controller's pid in the name: `setup down` removes those of a killed run (procs.sweep_stale_json).
    fd, json_name = tempfile.mkstemp(prefix=f"{TESTER_JSON_PREFIX}{os.getpid()}-", suffix=".json")
    os.close(fd)
    json_path = Path(json_name)
    argv = [*wrap, *xlatperf_argv(binary, server, rate_qps, duration_s, options, json_path, place)]
    limit_s = xlatperf_bound_s(duration_s, options) + STARTUP_ALLOWANCE_S
    try:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = process.communicate(timeout=limit_s)
        except BaseException:  # timeout, Ctrl-C: never leave a tester running
            process.kill()
            process.wait()
            raise
        if process.returncode < 0:
            raise TesterError(f"xlatperf was killed by {signal.Signals(-process.returncode).name} during "
                              "the trial: the trial is void, not stored as a result")
        if process.returncode != 0:
            last = (stderr or "").strip().splitlines()
            if last and last[-1].startswith(LOST_CONNECTION):  # the wrapper's ssh failed, not the tester
                raise TesterError(last[-1].removeprefix("remote_run: "))
            raise TesterError(f"xlatperf exited with code {process.returncode}: "
                              f"{last[-1] if last else '(no message)'}")
        try:
            return json.loads(json_path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise TesterError(f"xlatperf wrote no readable JSON to {json_path}: {err}") from None
    except subprocess.TimeoutExpired:
        bound = xlatperf_bound_s(duration_s, options)
        raise TesterError(f"xlatperf did not finish a {duration_s:g} s trial within {limit_s:.0f} s (its own "
                          f"bound {bound:.3f} s + {STARTUP_ALLOWANCE_S:g} s to start and write its result): "
                          "the tester is broken, the trial void") from None
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
