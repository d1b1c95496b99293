"""What a record says about the machine that produced it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import socket
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from .. import __version__


@cache
def host_info() -> dict[str, Any]:
    """Kernel, CPU model and count, hostname, Python and xlatbench versions."""
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpus_online": os.cpu_count(),
        "python": platform.python_version(),
        "xlatbench": __version__,
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def affinity_cpus() -> list[int]:
    """CPUs this process may run on (what an emulated DUT can be given)."""
    return sorted(os.sched_getaffinity(0))


# The repository the suite runs from (scripts/ is one level below it).
SUITE_ROOT = Path(__file__).resolve().parents[1]


@cache
def suite_build() -> dict[str, Any]:
    """Which code of the suite wrote a record: `git describe --always --dirty --tags` of its checkout, whether
    tracked files differ from that commit and, if so, sha256 of that difference (two runs with different
    uncommitted edits are different code), and the MLRsearch library's version (`mlrsearch`). Outside a git
    checkout: the package version, dirty unknown."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(SUITE_ROOT), *args], capture_output=True, text=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    library = {"mlrsearch": search_library_version()}
    describe = git("describe", "--always", "--dirty", "--tags")
    if describe is None:
        return {"describe": f"xlatbench {__version__} (not a git checkout)", "dirty": None,
                "diff_sha256": None, **library}
    describe = describe.strip()
    dirty = describe.endswith("-dirty")
    diff = git("diff", "HEAD", "--binary") if dirty else None
    return {"describe": describe, "dirty": dirty,
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff is not None else None, **library}


def search_library_version() -> str | None:
    """The installed version of the MLRsearch library (PyPI `MLRsearch`), None if it is not installed: part
    of the suite's code as far as a record's provenance goes (another version may choose other trials)."""
    try:
        return importlib.metadata.version("MLRsearch")
    except importlib.metadata.PackageNotFoundError:
        return None
