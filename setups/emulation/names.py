"""Names of everything an emulated testbed creates, all derived from one prefix (default "xb").

Namespaces `<prefix>-<host>`, the run directory /run/xlatbench/<prefix> (state file, configs, pid files,
logs, Knot's workdir), cpusets /sys/fs/cgroup/cpuset/<prefix>-<dut>, nft tables `<prefix>_*`, the
root-sysctl lease `<prefix>`: `down` finds all of them by the prefix alone.
"""

from __future__ import annotations

import re
from pathlib import Path

RUN_ROOT = Path("/run/xlatbench")
CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")
HOST_NAMES = ("client", "napt", "dut1", "dut2", "server")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")


def check_prefix(prefix: str) -> str:
    if not PREFIX_RE.match(prefix):
        raise ValueError(
            f"prefix {prefix!r} must be 1-8 lower-case letters/digits starting with a letter "
            "(it names namespaces, cgroups and nft tables)"
        )
    return prefix


def rundir(prefix: str) -> Path:
    return RUN_ROOT / check_prefix(prefix)


def netns_name(prefix: str, host: str) -> str:
    return f"{prefix}-{host}"


def statefile(prefix: str) -> Path:
    return rundir(prefix) / "state.json"


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
