"""Ending processes the suite started, by pid: also those a killed earlier run left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (a zombie has already released its sockets and files)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def dead_processes(pids: dict[str, int]) -> list[str]:
    """"name (pid N)" of each of `pids` (name -> pid) that is no longer alive."""
    return [f"{name} (pid {pid})" for name, pid in pids.items() if not alive(pid)]


def terminate(pids: list[int], timeout_s: float = 3.0, kill_wait_s: float = 2.0) -> list[int]:
    """SIGTERM, wait up to timeout_s, then SIGKILL and wait up to kill_wait_s; return the pids still alive."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, kill_wait_s)):
        live = [p for p in pids if alive(p)]
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while any(alive(p) for p in live) and time.monotonic() < deadline:
            time.sleep(0.05)
    return [p for p in pids if alive(p)]


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (stat field 22): tells a reused pid apart."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (FileNotFoundError, IndexError, ValueError):
        return None


TESTER_JSON_PREFIX = "xlatperf-"  # + controller pid + "-": a trial's JSON file in the temporary directory


def is_tester_json(argument: str) -> bool:
    """Whether a command-line argument names a trial's JSON file as the controller makes it (a file whose
    name starts with TESTER_JSON_PREFIX and ends in .json): what a wrapper running the tester elsewhere
    fetches back (setups.testbed.remote_run)."""
    name = Path(argument).name
    return name.startswith(TESTER_JSON_PREFIX) and name.endswith(".json")


def sweep_stale_json() -> list[str]:
    """Remove our trial JSON files (and the `.tmp-PID` files xlatperf writes before renaming them) whose
    controller (the pid in the name) no longer runs; returns them."""
    removed = []
    tmp = Path(tempfile.gettempdir())
    paths = [path for pattern in ("*-*.json", "*-*.json.tmp-*")
             for path in tmp.glob(TESTER_JSON_PREFIX + pattern)]
    for path in paths:
        pid = path.name.removeprefix(TESTER_JSON_PREFIX).split("-", 1)[0]
        with contextlib.suppress(FileNotFoundError):
            if pid.isdigit() and not alive(int(pid)) and path.stat().st_uid == os.getuid():
                path.unlink()
                removed.append(str(path))
    return removed
