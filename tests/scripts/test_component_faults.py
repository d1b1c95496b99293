"""A component killed with SIGKILL at a random moment inside a trial (loopback: knotd or the tester): the
trial is void — never a throughput figure, DUT loss or tester limit —, a campaign stops with one line naming
the dead process, keeps every stored record whole, and the same command resumes it to the end."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from loopbackcampaign import loopback_campaign, xlatperf_pids_on

from xlatbench.data.store import ResultStore
from xlatbench.failures import ComponentFailure
from xlatbench.procs import alive
from xlatbench.scripts.environments.loopback import LoopbackEnvironment
from xlatbench.scripts.xlatperf import TesterError, TesterOptions
from xlatbench.zones.knot import loopback_rundir

pytestmark = pytest.mark.root

XLATBENCH = str(Path(sys.executable).with_name("xlatbench"))
DURATION_S = 2.0


def stored(path: Path) -> list[dict]:
    """The store's records as JSON objects (what the file holds, typed records read back)."""
    return [r.to_json() for r in ResultStore(path).records()]



def _kill_later(pid_of, delay_s: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(delay_s)
        for pid in pid_of():
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


@pytest.fixture
def loopback(port: int):
    env = LoopbackEnvironment(TesterOptions(port=port, threads=1, ports_per_thread=1), rmem_bytes=0)
    env.up()
    yield env
    env.down()


def test_knotd_killed_inside_a_trial_voids_it(loopback: LoopbackEnvironment) -> None:
    knotd = loopback.describe()["server"]["pid"]
    killer = _kill_later(lambda: [knotd], random.uniform(0.2, DURATION_S - 0.5))
    with pytest.raises(ComponentFailure, match=rf"knotd \(pid {knotd}\) died during the trial at 5000 q"):
        loopback.measurer().measure(DURATION_S, 5000)
    killer.join()


def test_the_tester_killed_inside_a_trial_voids_it(loopback: LoopbackEnvironment, port: int) -> None:
    killer = _kill_later(lambda: xlatperf_pids_on(port), random.uniform(0.3, DURATION_S - 0.5))
    with pytest.raises(TesterError, match="xlatperf was killed by SIGKILL during the trial"):
        loopback.measurer().measure(DURATION_S, 5000)
    killer.join()
    assert alive(loopback.describe()["server"]["pid"])


def test_a_campaign_whose_knotd_dies_stops_naming_it_and_resumes(tmp_path: Path, port: int) -> None:
    file, store = tmp_path / "c.toml", tmp_path / "c.jsonl"
    file.write_text(loopback_campaign("killed", port))
    command = [XLATBENCH, "campaign", "run", str(file), "--store", str(store), "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rundir = loopback_rundir("127.0.0.1", port)
    deadline = time.monotonic() + 60
    while not (store.exists() and any(True for _ in stored(store))) or not xlatperf_pids_on(port):
        assert time.monotonic() < deadline and process.poll() is None, "no second trial started"
        time.sleep(0.02)
    knotd = int((rundir / "knot.pid").read_text())
    time.sleep(random.uniform(0.1, 0.7))  # inside the running 1 s trial
    os.kill(knotd, signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"knotd (pid {knotd}) died during the trial" in lines[0], err
    kept = [r["key"] for r in stored(store)]
    assert store.read_bytes().endswith(b"\n") and not rundir.exists() and xlatperf_pids_on(port) == []
    failed = [r for r in stored(store) if r["type"] == "trial-failed"]
    assert len(failed) == 1 and f"knotd (pid {knotd}) died" in failed[0]["failure"]["reason"]
    assert failed[0]["failure"]["kind"] == "ComponentFailure"
    void = failed[0]["failure"]["trial"]  # the trial under way: the resume measures it

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    keys = [r["key"] for r in stored(store)]
    assert keys[: len(kept)] == kept and len(keys) == len(set(keys)) > len(kept)
    again = [r for r in stored(store) if r["type"] == "trial" and r["key"] not in kept
             and (r["search"]["id"], r["search"]["step"]) == (void["search_id"], void["step"])]
    assert [r["trial"]["rate_qps"] for r in again] == [void["rate_qps"]]
    summaries = [r for r in stored(store) if r["type"] == "summary"]
    assert len(summaries) == 1, "the resumed search must complete"
