"""The AF_XDP layer end to end (dnsperf/src/xdp through the xdp_probe driver), before it serves xlatperf.

A veth pair runs from the root namespace into a namespace with a real knotd; xdp_probe attaches its
kernel program to the root end, sends queries over flows without sockets through an AF_XDP socket and
counts what comes back. Known answers: at a low rate knotd answers every query, so sent == valid with
every other bucket empty (knotd also checks our UDP checksums: the kernel drops a bad one before it);
TCP and an ordinary socket's DNS query keep working while the program is attached (it passes all but the
tester's replies); a program left by a `kill -9` is removed by the next run and none stays after a run.
The veth pair and namespace (dnsperf/bench/xdplink.py) take a random `xbx` prefix and are removed after each
test, also on failure.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdplink import (
    SERVER_V4,
    SERVER_V6,
    TESTER_V4,
    TESTER_V4_SECOND,
    TESTER_V6,
    XdpLink,
    attached_program,
)

from xlatbench.paths import build_dir
from xlatbench.zones import KnotConfig, KnotServer

pytestmark = pytest.mark.root

ROOT_V4, KNOT_V4, SECOND_V4 = TESTER_V4, SERVER_V4, TESTER_V4_SECOND
ROOT_V6, KNOT_V6 = TESTER_V6, SERVER_V6


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def probe_binary() -> Path:
    path = build_dir() / "dnsperf" / "xdp_probe"
    if not path.is_file():
        pytest.fail(f"{path} is not built: make build")
    return path


@pytest.fixture
def knot(link: XdpLink, tmp_path: Path) -> Iterator[KnotServer]:
    config = KnotConfig(listen=((KNOT_V4, 53), (KNOT_V6, 53)))
    with KnotServer(tmp_path / "knot", config, netns=link.netns) as server:
        yield server


def probe_argv(link: XdpLink, *args: str) -> list[str]:
    return [str(probe_binary()), "--interface", link.outer, *args]


def run_probe(link: XdpLink, *args: str, timeout_s: float = 60) -> dict:
    proc = subprocess.run(probe_argv(link, *args), capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def start_probe(link: XdpLink, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(probe_argv(link, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "attached" not in line:
        proc.kill()
        pytest.fail(line + proc.stderr.read())
    return proc


def check_all_valid(result: dict, queries: int) -> None:
    shown = json.dumps(result)
    assert result["sent"] == queries, shown
    buckets = result["buckets"]
    assert buckets["valid"] == queries, shown
    assert all(n == 0 for name, n in buckets.items() if name != "valid"), shown
    assert all(n == 0 for n in result["frame_errors"].values()), shown
    assert result["overruns"] == 0, shown


def test_every_query_over_a_thousand_flows_is_answered_and_valid(link, knot):
    result = run_probe(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},20000-20999", "--rate", "1000",
                       "--queries", "3000")
    check_all_valid(result, 3000)
    assert result["flows"] == 1000
    assert result["xdp_mode"] == "native"  # veth offers native XDP on this kernel
    assert result["filter"]["redirected"] == 3000
    assert result["next_hop"]["probed"] is True  # a fresh namespace: the neighbour entry came from the probe
    assert result["matching"]["bytes_per_slot"] == 16


def test_pseudorandom_flows_over_two_addresses_are_all_valid(link, knot):
    result = run_probe(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},30000-30499",
                       "--source", f"{SECOND_V4},40000-40499", "--order", "random", "--rate", "1000",
                       "--queries", "2000")
    check_all_valid(result, 2000)
    assert result["flows"] == 1000


def test_ipv6_queries_are_all_valid(link, knot):
    result = run_probe(link, "--server", KNOT_V6, "--source", f"{ROOT_V6},20000-21023", "--rate", "1000",
                       "--queries", "2000")
    check_all_valid(result, 2000)


def test_tcp_and_a_socket_dns_query_work_while_the_program_is_attached(link, knot):
    listener = subprocess.Popen(
        link.inside("python3", "-c",
         "import socket; s = socket.create_server(('" + KNOT_V4 + "', 2222)); print('up', flush=True);"
         " c, _ = s.accept(); c.sendall(b'hello'); c.close()"),
        stdout=subprocess.PIPE, text=True)
    probes: list[subprocess.Popen[str]] = []
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "up"
        probe = start_probe(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},20000-20999", "--rate", "500",
                            "--queries", "2500")
        probes.append(probe)
        assert attached_program(link.outer) is not None
        # A DNS query from an ordinary socket: its reply comes from the server's address and port too,
        # but to an ephemeral port outside the probe's ranges, so the kernel must get it.
        dig = subprocess.run(["kdig", f"@{KNOT_V4}", "+retry=0", "+timeout=2", "+short",
                              "010-000-000-001.dns64perf.test", "AAAA"],
                             capture_output=True, text=True, check=False)
        assert dig.returncode == 0 and dig.stdout.strip(), dig.stdout + dig.stderr
        with socket.create_connection((KNOT_V4, 2222), timeout=2) as conn:
            assert conn.recv(16) == b"hello"
        assert probe.poll() is None, "the probe ended before the other traffic was checked"
        out, err = probe.communicate(timeout=30)
        assert probe.returncode == 0, err
        result = json.loads(out)
        check_all_valid(result, 2500)
        assert result["filter"]["passed"] > 0  # ARP, TCP and the socket's reply went on to the kernel
    finally:
        for started in (listener, *probes):
            started.kill()
            started.wait()
    assert attached_program(link.outer) is None


def test_a_killed_probe_leaves_its_program_and_the_next_run_removes_it(link, knot):
    probe = start_probe(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},20000-20999", "--rate", "100",
                        "--queries", "100000")
    probe.kill()  # SIGKILL: no destructor runs
    probe.wait()
    left = attached_program(link.outer)
    assert left is not None and left["prog"]["name"] == "xlb_reply_filt"
    result = run_probe(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},20000-20999", "--rate", "1000",
                       "--queries", "1000")
    assert result["stale_program_removed"] is True
    check_all_valid(result, 1000)
    assert attached_program(link.outer) is None


def test_someone_elses_program_is_never_replaced(link):
    other = build_dir() / "dnsperf" / "xdp_pass.bpf.o"
    sh("ip", "link", "set", "dev", link.outer, "xdpgeneric", "obj", str(other), "sec", "xdp")
    proc = subprocess.run(probe_argv(link, "--server", KNOT_V4, "--source", f"{ROOT_V4},20000-20999"),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "of someone else" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert attached_program(link.outer) is not None


@pytest.mark.parametrize(("args", "message"), [
    (["--server", KNOT_V4, "--source", f"{ROOT_V4},1-10", "--rate", "-5"], "--rate"),
    (["--server", "not-an-address", "--source", f"{ROOT_V4},1-10"], "--server"),
    (["--server", KNOT_V4, "--source", ROOT_V4], "no port range"),
])
def test_bad_input_gets_one_line_and_exit_2(link, args, message):
    proc = subprocess.run(probe_argv(link, *args), capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr

