"""The echo server against a real knotd on loopback."""

import os
import signal
import subprocess
import sys
import time

import pytest

from xlatbench.zones import KnotConfig, KnotError, KnotServer

pytestmark = [pytest.mark.root]


def kdig(port: int, name: str) -> str:
    out = subprocess.run(
        ["kdig", "@127.0.0.1", "-p", str(port), name, "AAAA", "+short", "+retry=0", "+timeout=1"],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def test_answers_the_zone_and_stops(tmp_path, port):
    server = KnotServer(tmp_path, KnotConfig(listen=(("127.0.0.1", port),), cpus=(0,)))
    with server:
        assert kdig(port, "010-000-001-002.dns64perf.test") == "2001:db8::a00:102"
        info = server.describe()
        assert info["threads"] and all(t["cpus_allowed"] == [0] for t in info["threads"])
        pid = server.pid
    assert pid is not None
    assert not os.path.exists(f"/proc/{pid}/status") or _zombie(pid)
    assert not (tmp_path / "knot.pid").exists()


def test_name_outside_the_subnet_is_nxdomain(tmp_path, port):
    with KnotServer(tmp_path, KnotConfig(listen=(("127.0.0.1", port),))):
        out = subprocess.run(
            ["kdig", "@127.0.0.1", "-p", str(port), "010-001-000-000.dns64perf.test", "AAAA", "+retry=0"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert "status: NXDOMAIN" in out


def test_start_ends_a_knotd_left_by_a_killed_run(tmp_path, port):
    # A separate Python process starts knotd, then dies by SIGKILL without stopping it.
    code = (
        "import sys, time; from pathlib import Path; from xlatbench.zones import KnotConfig, KnotServer;"
        f"s = KnotServer(Path({str(tmp_path)!r}), KnotConfig(listen=(('127.0.0.1', {port}),)));"
        "s.start(); print(s.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    orphan = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert os.path.exists(f"/proc/{orphan}")

    with KnotServer(tmp_path, KnotConfig(listen=(("127.0.0.1", port),))) as server:
        assert server.pid != orphan
        assert kdig(port, "010-000-000-001.dns64perf.test") == "2001:db8::a00:1"
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{orphan}") and not _zombie(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{orphan}") or _zombie(orphan)


def test_failure_to_start_says_why(tmp_path, port):
    # 192.0.2.1 is not on this host: knotd cannot bind it (no non-local bind) and never answers.
    server = KnotServer(tmp_path, KnotConfig(listen=(("192.0.2.1", port),)))
    with pytest.raises(KnotError):
        server.start(timeout_s=3)
    assert server.pid is None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
