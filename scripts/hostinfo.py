"""What a record says about the machine that produced it."""

from __future__ import annotations

import os
import platform
import socket
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


def usable_cpus() -> list[int]:
    """CPUs this process may run on (what an emulated DUT can be given)."""
    return sorted(os.sched_getaffinity(0))
