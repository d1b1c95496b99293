"""SIGTERM, SIGHUP and SIGINT stop a loopback campaign cleanly: the trial stops, knotd and its run directory
are gone, the store holds only whole records, and the same command resumes it. SIGTERM and SIGHUP are sent to
a campaign running in the background of a non-interactive shell, where SIGINT is ignored. Each child starts
with the default disposition of the signals the test sends, whatever pytest inherited (a `make test` started
as a background job runs with SIGINT ignored, and an ignored disposition survives exec)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopbackcampaign import loopback_campaign, xlatperf_pids_on

from xlatbench.data.store import ResultStore
from xlatbench.procs import alive
from xlatbench.zones.knot import loopback_rundir

pytestmark = pytest.mark.root

XLATBENCH = str(Path(sys.executable).with_name("xlatbench"))


def stored(path: Path) -> list[dict]:
    """The store's records as JSON objects (what the file holds, typed records read back)."""
    return [r.to_json() for r in ResultStore(path).records()]


def _trials(store: Path) -> int:
    return sum(1 for r in stored(store) if r["type"] == "trial")


def _wait(condition, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _sigint_ignored(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def _default_dispositions() -> None:
    """In the child before exec: the signals the test sends act as on a fresh login shell."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _start(command: list[str], background: bool, err: Path) -> tuple[subprocess.Popen[str], int]:
    if not background:
        with open(err, "w") as stderr:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                                       preexec_fn=_default_dispositions)
        return process, process.pid
    line = " ".join(command)
    shell = subprocess.Popen(["bash", "-c", f'{line} 2>{err} & echo $!; wait $!; echo "rc=$?"'],
                             stdout=subprocess.PIPE, text=True, preexec_fn=_default_dispositions)
    assert shell.stdout is not None
    return shell, int(shell.stdout.readline())


@pytest.mark.parametrize("sig, background", [(signal.SIGTERM, True), (signal.SIGHUP, True),
                                             (signal.SIGINT, False)])
def test_a_signal_stops_a_campaign_cleanly_and_it_resumes(tmp_path: Path, port: int, sig: signal.Signals,
                                                          background: bool) -> None:
    file, store, err = tmp_path / "c.toml", tmp_path / "c.jsonl", tmp_path / "err"
    file.write_text(loopback_campaign("signals", port))
    command = [XLATBENCH, "campaign", "run", str(file), "--store", str(store), "--no-progress"]
    process, pid = _start(command, background, err)
    rundir = loopback_rundir("127.0.0.1", port)
    _wait(lambda: store.exists() and _trials(store) >= 1 or not alive(pid), 60, "the first stored trial")
    assert alive(pid), err.read_text()
    knotd = int((rundir / "knot.pid").read_text())
    _wait(lambda: bool(xlatperf_pids_on(port)), 10, "the next trial's tester")
    assert _sigint_ignored(pid) == background
    process.send_signal(sig) if not background else subprocess.run(["kill", f"-{sig.name}", str(pid)])
    out, _ = process.communicate(timeout=60)
    returncode = int(out.strip().rsplit("rc=", 1)[1]) if background else process.returncode
    message = err.read_text()
    assert returncode == 130, message
    assert f"{sig.name}: stopping" in message and "run the same command again to resume" in message
    assert "Traceback" not in message
    assert not alive(knotd) and not rundir.exists() and xlatperf_pids_on(port) == []
    assert store.read_bytes().endswith(b"\n")
    stopped_with = _trials(store)

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{stopped_with} trials already in" in resumed.stderr
    keys = [r["key"] for r in stored(store)]
    assert len(keys) == len(set(keys)) and _trials(store) > stopped_with
    assert not rundir.exists()
