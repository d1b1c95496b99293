"""kill -9 during `setup up` and during a trial, then `setup down`: nothing is left. Needs root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlatbench.procs import alive
from xlatbench.setups.emulation import leftovers
from xlatbench.setups.emulation.cleanup import down, existing_namespaces
from xlatbench.setups.emulation.names import rundir

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _xlatbench(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("xlatbench")), *args]


def _wait_for(condition, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "up never reached the point to kill it at"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("moment", "backend"),
    [("namespaces made", "tayga"), ("translators started", "tayga"), ("knot starting", "tayga"),
     ("translators started", "bpf")],
)
def test_kill_during_up(prefix, moment, backend):
    run = rundir(prefix)
    when = {
        "namespaces made": lambda: existing_namespaces(prefix),
        # tayga's pid file; bpf: the BR's program pinned in the bpffs of the run directory
        "translators started": lambda: (run / "dut2-tayga.pid").exists()
        or (run / "bpf/dut2/siit").exists(),
        "knot starting": lambda: (run / "knot" / "knot.pid").exists(),
    }[moment]
    process = subprocess.Popen(
        _xlatbench("setup", "up", "mapt", "--prefix", prefix, "--backend", backend),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_for(when)
    assert process.poll() is None, f"up finished before the kill: {process.stderr.read().decode()}"
    process.kill()
    process.wait()
    stray = [
        p
        for ns in existing_namespaces(prefix)
        for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    ]
    print(
        f"killed `setup up` ({backend}) when {moment}: {len(existing_namespaces(prefix))} namespaces, "
        f"{len(stray)} processes in them"
    )
    done = subprocess.run(_xlatbench("setup", "down", "--prefix", prefix), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert leftovers(prefix) == []
    assert not any(alive(int(p)) for p in stray)


def test_kill_during_trial(prefix, tester):
    driver = f"""
import subprocess, sys
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig
chain = EmulatedChain.up(EmulationConfig("464xlat", prefix="{prefix}"))
out = "{rundir(prefix)}/killed-trial.json"
print("tester", flush=True)
subprocess.run(chain.client_argv(["{tester}", "--server", chain.server_address, "--rate", "2000",
                                  "--duration", "60", "--json", out, "--quiet"]))
"""
    process = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "tester"
    time.sleep(2)
    pids = [
        int(p)
        for p in subprocess.run(
            ["ip", "netns", "pids", f"{prefix}-client"], capture_output=True, text=True
        ).stdout.split()
    ]
    assert pids, "the tester should be running in the client namespace"
    os.kill(process.pid, signal.SIGKILL)  # the driver dies; its tester, tayga and knotd live on
    process.wait()
    assert any(alive(p) for p in pids)
    removed = down(prefix)
    assert set(pids) <= set(removed["processes"])
    assert not any(alive(p) for p in pids)
    assert leftovers(prefix) == []
