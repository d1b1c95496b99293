"""Faults around the echo server: a killed run's knotd is found and ended, and nothing answers twice."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from xlatbench.procs import alive
from xlatbench.zones import KnotConfig, KnotError, KnotServer
from xlatbench.zones.knot import loopback_rundir, socket_holders

pytestmark = [pytest.mark.root]

CHILD = """
import signal, sys, time
from xlatbench.scripts.environments.loopback import LoopbackEnvironment
from xlatbench.scripts.xlatperf import TesterOptions
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
env = LoopbackEnvironment(TesterOptions(port={port}), rmem_bytes=0)
env.up()
try:
    print(env.describe()["server"]["pid"], flush=True)
    time.sleep(120)
finally:
    env.down()
"""


def _start_loopback_child(port: int) -> tuple[subprocess.Popen[str], int]:
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(port=port)], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip().isdigit(), f"child did not start its knotd (exit {child.poll()})"
    return child, int(line)


def _killed_loopback(port: int) -> int:
    """A loopback environment in a child process, killed with SIGKILL: returns its orphaned knotd's pid."""
    child, knotd = _start_loopback_child(port)
    child.kill()
    child.wait()
    assert alive(knotd), "knotd should outlive its killed parent (it runs in its own session)"
    assert (loopback_rundir("127.0.0.1", port) / "knot.pid").exists()
    return knotd


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_the_next_loopback_run_ends_a_killed_runs_knotd_and_leaves_no_directory(port: int) -> None:
    from xlatbench.scripts.environments.loopback import LoopbackEnvironment
    from xlatbench.scripts.xlatperf import TesterOptions

    orphan = _killed_loopback(port)
    env = LoopbackEnvironment(TesterOptions(port=port), rmem_bytes=0)
    env.up()
    try:
        assert _gone(orphan), f"orphan knotd {orphan} still runs after the next run started"
        assert env.describe()["server"]["pid"] != orphan
        assert [h.pid for h in socket_holders("127.0.0.1", port)] == [env.describe()["server"]["pid"]] * 2
    finally:
        env.down()
    assert not loopback_rundir("127.0.0.1", port).exists()


def test_setup_down_finds_a_killed_loopback_runs_knotd(port: int) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    dead_json = Path(tempfile.gettempdir()) / f"xlatperf-{child.stdout.strip()}-test.json"  # a killed run's
    live_json = Path(tempfile.gettempdir()) / f"xlatperf-{os.getpid()}-test.json"  # a running one's
    dead_json.write_text("{}")
    live_json.write_text("{}")
    orphan = _killed_loopback(port)
    xlatbench = str(Path(sys.executable).with_name("xlatbench"))
    out = subprocess.run([xlatbench, "setup", "down", "--prefix", "xbtnone"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert f"ended knotd pid {orphan}" in out.stderr
    assert _gone(orphan)
    assert not loopback_rundir("127.0.0.1", port).exists()
    assert not dead_json.exists() and live_json.exists()
    live_json.unlink()


def test_a_knotd_in_use_by_a_running_process_is_left_alone_and_named(port: int) -> None:
    child, knotd = _start_loopback_child(port)
    try:
        with pytest.raises(KnotError, match=rf"knotd \(pid {knotd}\).*in use by running process {child.pid}"):
            KnotServer(loopback_rundir("127.0.0.1", port), KnotConfig(listen=(("127.0.0.1", port),))).start()
        assert alive(knotd)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
    assert _gone(knotd) and not loopback_rundir("127.0.0.1", port).exists()


def test_start_refuses_a_port_someone_has_bound_and_names_the_process(tmp_path: Path, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as squatter:
        squatter.bind(("127.0.0.1", port))
        server = KnotServer(tmp_path, KnotConfig(listen=(("127.0.0.1", port),)))
        with pytest.raises(KnotError, match=rf"already bound by \S+ \(pid {os.getpid()}\) on udp"):
            server.start()
    assert server.pid is None and not (tmp_path / "knot.pid").exists()


def test_a_second_knotd_on_the_same_port_is_refused(tmp_path: Path, port: int) -> None:
    with KnotServer(tmp_path / "a", KnotConfig(listen=(("127.0.0.1", port),))) as first:
        second = KnotServer(tmp_path / "b", KnotConfig(listen=(("127.0.0.1", port),)))
        with pytest.raises(KnotError, match=rf"already bound by knotd \(pid {first.pid}\)"):
            second.start()


def test_start_refuses_when_something_answers_through_a_redirect(tmp_path: Path, port: int) -> None:
    # Nothing is bound on `port`, but an nft rule sends its queries to a knotd on another port.
    other = port + 1 if port < 65000 else port - 1
    table = f"xk{os.getpid() % 100000}_redir"  # a session prefix: the end-of-session check knows it
    rules = (f"table ip {table} {{\nchain out {{\ntype nat hook output priority -100;\n"
             f"ip daddr 127.0.0.1 udp dport {port} redirect to :{other}\n}}\n}}\n")
    with KnotServer(tmp_path / "a", KnotConfig(listen=(("127.0.0.1", other),))):
        subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
        try:
            with pytest.raises(KnotError, match="already answers DNS there though no socket is bound"):
                KnotServer(tmp_path / "b", KnotConfig(listen=(("127.0.0.1", port),))).start()
        finally:
            subprocess.run(["nft", "delete", "table", "ip", table], check=True)


def test_after_start_a_socket_sharing_the_port_is_found(tmp_path: Path, port: int) -> None:
    with KnotServer(tmp_path, KnotConfig(listen=(("127.0.0.1", port),))) as server:
        server.check_sole_holder()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as intruder:
            intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            intruder.bind(("127.0.0.1", port))
            with pytest.raises(KnotError, match=rf"is shared: besides our knotd .* \(pid {os.getpid()}\)"):
                server.check_sole_holder()
