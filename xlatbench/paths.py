"""Where the suite finds its own build products."""

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    """The CMake build directory: $XLATBENCH_BUILD, else build/ in the repository."""
    return Path(os.environ.get("XLATBENCH_BUILD", REPO_ROOT / "build"))


def tester_binary() -> Path:
    """Path of the xlatperf tester; raises FileNotFoundError with a fix if it is not built."""
    candidate = build_dir() / "dnsperf" / "xlatperf"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    on_path = shutil.which("xlatperf")
    if on_path:
        return Path(on_path)
    raise FileNotFoundError(
        f"xlatperf not found at {candidate} nor on PATH: build it with `make build` "
        "(or set XLATBENCH_BUILD to your CMake build directory)"
    )
