"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

# The tester's AF_XDP rig (a veth pair into a Knot namespace) lives beside the benchmarks that also use it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dnsperf" / "bench"))

# This session's loopback knotds keep their run directories here (not in the machine-wide per-user
# root), so cleanup tests and the end-of-session check see only this session's servers. Every process the
# session starts (knotd, tayga, xlatperf, sshd, child Pythons) inherits XLATBENCH_TEST_SESSION: the check
# at the end finds them by it, and never counts what other sessions on this machine run.
SESSION_TAG = f"xlatbench-test-{os.getpid()}"
SESSION_DIR = Path(tempfile.gettempdir()) / SESSION_TAG
os.environ["XLATBENCH_LOOPBACK_ROOT"] = str(SESSION_DIR / "loopback")
os.environ["XLATBENCH_TEST_SESSION"] = SESSION_TAG
# Chain prefixes the tests derive from the pytest pid (the setups' random one registers itself).
PID_PREFIXES = (f"xk{os.getpid() % 100000}", f"xr{os.getpid() % 100000}")


def free_port() -> int:
    """A port free for both UDP and TCP on loopback right now."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port


@pytest.fixture
def port() -> int:
    return free_port()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


def _session_processes() -> list[str]:
    """Live processes (not zombies) started by this session: they carry its XLATBENCH_TEST_SESSION."""
    marker = f"XLATBENCH_TEST_SESSION={SESSION_TAG}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if state != "Z":
            found.append(f"process {proc.name} ({argv[:100]})")
    return found


def session_leftovers() -> list[str]:
    """Everything this session started that is still there: processes, loopback run directories, and for
    each of its chain prefixes namespaces, cpusets, nft tables, run directory, sysctl lease, interfaces."""
    from xlatbench.setups.emulation.cleanup import leftovers
    from xlatbench.setups.emulation.rootsysctl import held_by

    found = _session_processes()
    loopback = SESSION_DIR / "loopback"
    if loopback.is_dir():
        found += [f"loopback run directory {d}" for d in loopback.iterdir()]
    prefixes = {*PID_PREFIXES, *os.environ.get("XLATBENCH_TEST_PREFIXES", "").split()}
    for prefix in sorted(prefixes):
        found += [f"{what} (prefix {prefix})" for what in leftovers(prefix)]
    if held_by(f"loopback-{os.getpid()}"):
        found.append(f"root sysctl lease loopback-{os.getpid()}")
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the whole suite nothing of it may remain; a leftover fails the run and is named."""
    if os.geteuid() != 0:
        return
    deadline = time.monotonic() + 10  # processes told to stop may take a moment to exit
    while (left := session_leftovers()) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "the test session left behind: " + "; ".join(left)
        if reporter is not None:
            reporter.write_line(text, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        shutil.rmtree(SESSION_DIR, ignore_errors=True)
