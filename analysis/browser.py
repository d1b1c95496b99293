"""Rendering report.html in Debian's headless Chromium: its DOM after loading, and a screenshot.

Used by the report's test (every table and figure is in the DOM, the page is not blank) and to make the
README's screenshot. Chromium runs with a fresh profile directory and without any network service.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--disable-extensions", "--mute-audio")
TIMEOUT_S = 120.0


class BrowserError(RuntimeError):
    """Chromium is missing or failed; the message says which and how to fix it."""


def chromium() -> str:
    found = shutil.which("chromium")
    if not found:
        raise BrowserError("chromium is not installed: run tools/install-deps (or apt-get install chromium)")
    return found


def _run(html: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="xlatbench-chromium-") as profile:
        argv = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, html.resolve().as_uri()]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"chromium did not render {html} within {TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BrowserError(f"chromium exited with code {done.returncode} rendering {html}: {last}")
    return done


def dump_dom(html: Path, width: int | None = None, height: int = 1200) -> str:
    """The page's DOM, serialized after the load event (scripts have run), laid out at `width` pixels when
    given."""
    size = (f"--window-size={width},{height}",) if width else ()
    return _run(html, *size, "--dump-dom").stdout


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2400) -> Path:
    """A PNG of the top `height` pixels of the page at `width` pixels."""
    _run(html, f"--window-size={width},{height}", f"--screenshot={png.resolve()}")
    if not png.exists() or png.stat().st_size == 0:
        raise BrowserError(f"chromium wrote no screenshot to {png}")
    return png
