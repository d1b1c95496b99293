"""A real emulated chain: a campaign killed with SIGKILL mid-trial resumes, cleans up what the killed run
left, and ends with every trial stored once and nothing of the chain left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlatbench.data.records import IdleRun, TrialEntry
from xlatbench.data.store import ResultStore

pytestmark = [pytest.mark.root, pytest.mark.slow]

CAMPAIGN = """
[campaign]
name = "chainresume"
methods = ["rfc8219-binary"]
cores = [1, 2]

[search]
max_rate_qps = 8000
error_qps = 1000
duration_s = 1
rest_s = 0.2
repetitions = 1

[tester]
sender_cpus = "0"
receiver_cpus = "0"

[idle]
runs = 1
duration_s = 2
rest_s = 0.2

[[setup]]
name = "baseline"
kind = "chain"
topology = "baseline"
options = { prefix = "PREFIX", knot_cpus = [0] }
"""


def _cli(*args: str) -> subprocess.Popen:
    code = "import sys; from xlatbench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _trials(store: Path) -> list[dict]:
    return [r.to_json() for r in ResultStore(store).records() if isinstance(r, TrialEntry)]


def test_emulated_campaign_survives_sigkill(tmp_path: Path) -> None:
    from xlatbench.setups.emulation.cleanup import down, leftovers

    prefix = f"xr{os.getpid() % 100000}"
    file = tmp_path / "c.toml"
    file.write_text(CAMPAIGN.replace("PREFIX", prefix))
    store = tmp_path / "c.jsonl"
    try:
        process = _cli("campaign", "run", str(file), "--store", str(store), "--no-progress")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_trials(store)) < 2 and process.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)  # inside the 3rd trial (0.2 s rest + 1 s)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = [r["key"] for r in _trials(store)]
        assert len(finished) == 2
        assert leftovers(prefix), "a SIGKILLed campaign cannot have taken its chain down"

        process = _cli("campaign", "run", str(file), "--store", str(store), "--no-progress")
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert f"removing what a killed run with prefix {prefix!r} left" in err
        trials = _trials(store)
        keys = [r["key"] for r in trials]
        assert keys[:2] == finished and len(keys) == len(set(keys))
        assert {r["cores"] for r in trials} == {1, 2}
        assert all(r["raw"]["header"]["tool"] == "xlatperf" for r in trials)
        idle = [r.to_json() for r in ResultStore(store).records() if isinstance(r, IdleRun)]
        assert len(idle) == 2 and all(r["samples"] for r in idle)
        assert not leftovers(prefix)
    finally:
        down(prefix)
