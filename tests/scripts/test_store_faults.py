"""A full disk or a read-only store (a small tmpfs): refused before any trial, or, when the disk fills
mid-campaign, a one-line stop that keeps every stored record whole, and a resume that completes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from xlatbench.data.records import CampaignRef, Context, TrialFailed
from xlatbench.data.store import PROBE_BYTES, ResultStore
from xlatbench.scripts.campaign import CampaignRun
from xlatbench.scripts.campaignfile import load_campaign

pytestmark = pytest.mark.root

CAMPAIGN = """
[campaign]
name = "full"
methods = ["rfc8219-binary", "mlrsearch"]
cores = [1, 2]

[search]
max_rate_qps = 100000
error_qps = 500
duration_s = 60
rest_s = 10
repetitions = 3

[[setup]]
name = "sim"
kind = "fake"
capacity_qps = 20000
noise = 0.0  # deterministic: the resumed run is compared with an uninterrupted one
"""

XLATBENCH = str(Path(sys.executable).with_name("xlatbench"))


def stored(path: Path) -> list[dict]:
    """The store's records as JSON objects (what the file holds, typed records read back)."""
    return [r.to_json() for r in ResultStore(path).records()]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "xbtfull", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _fill(mount: Path, leave_bytes: int) -> Path:
    """Fill the tmpfs until only about leave_bytes are free."""
    filler = mount / "filler"
    free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(free - leave_bytes, 0))
    return filler


def _run(file: Path, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([XLATBENCH, "campaign", "run", str(file), "--store", str(store), "--no-progress"],
                          capture_output=True, text=True, timeout=120)


def _one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> str:
    """The error is one line (the last; results printed before it are not errors), naming `words`."""
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr and [w for w in lines if "xlatbench" in w] == lines[-1:], out.stderr
    for word in words:
        assert word in lines[-1], lines[-1]
    return lines[-1]


def test_a_full_disk_is_refused_before_any_trial(tmp_path: Path, small_disk: Path) -> None:
    file, store = tmp_path / "c.toml", small_disk / "results" / "c.jsonl"
    file.write_text(CAMPAIGN)
    _fill(small_disk, 4096)
    out = _run(file, store)
    _one_line_error(out, str(store), "No space left on device", "--store")
    assert len(out.stderr.strip().splitlines()) == 1
    assert not store.exists() or store.stat().st_size == 0
    assert sorted(p.name for p in store.parent.iterdir()) == []  # the probe is gone too


def test_a_read_only_store_is_refused_before_any_trial(tmp_path: Path, small_disk: Path) -> None:
    file, store = tmp_path / "c.toml", small_disk / "c.jsonl"
    file.write_text(CAMPAIGN)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    _one_line_error(_run(file, store), str(store), "Read-only file system")


def test_a_disk_filling_mid_campaign_stops_with_whole_records_and_resumes(tmp_path: Path,
                                                                          small_disk: Path) -> None:
    file, store = tmp_path / "c.toml", small_disk / "c.jsonl"
    file.write_text(CAMPAIGN)
    filler = _fill(small_disk, PROBE_BYTES + 24 * 1024)  # room for the probe and a few dozen records
    line = _one_line_error(_run(file, store), str(store), "No space left on device", "run the same command")
    assert "cannot write record" in line
    data = store.read_bytes()
    assert data.endswith(b"\n")
    kept = list(stored(store))
    assert 0 < len(kept) == data.count(b"\n"), "every line must be a whole record"

    filler.unlink()
    resumed = _run(file, store)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming full: {sum(r['type'] == 'trial' for r in kept)} trials" in resumed.stderr
    keys = [r["key"] for r in stored(store)]
    assert len(keys) == len(set(keys)) and keys[:len(kept)] == [r["key"] for r in kept]

    reference = tmp_path / "reference.jsonl"  # the same campaign uninterrupted (simulated, deterministic)
    CampaignRun(load_campaign(file, reference), progress=False).run()
    assert keys == [r["key"] for r in stored(reference)]


def _record(key: str, reason: str) -> TrialFailed:
    context = Context(CampaignRef("c", "c.toml", "0" * 64), {"name": "s", "kind": "fake"}, 1, None, {},
                      "fake DUT", {"tool": "xlatperf", "version": None, "options": {}}, {})
    return TrialFailed(key=key, context=context, failure={"kind": "Test", "reason": reason})


def test_a_failed_append_cuts_the_partial_record_back(tmp_path: Path, small_disk: Path) -> None:
    store = ResultStore(small_disk / "s.jsonl")
    store.append(_record("a", "short"))
    _fill(small_disk, 0)
    with pytest.raises(Exception, match=r"cannot write record 'b' \(No space left on device, ENOSPC\)"):
        store.append(_record("b", "x" * 100_000))
    assert [r["key"] for r in (r.to_json() for r in store.records())] == ["a"]
    assert store.path.read_bytes().endswith(b"\n")
    assert errno.ENOSPC  # the reason is named by its errno symbol above
