"""The memory arithmetic before a stateful run (scripts/stateful/memory.py): N conntrack entries of the slab's
size plus 8 B a hash bucket against 80 % of MemAvailable, from files written here (known answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlatbench.scripts.stateful.memory import FALLBACK_ENTRY_BYTES, budget, memory_refusal


@pytest.fixture
def machine(tmp_path: Path) -> tuple[Path, Path]:
    slab, meminfo = tmp_path / "slab_size", tmp_path / "meminfo"
    slab.write_text("256\n")
    meminfo.write_text("MemTotal:       25165824 kB\nMemAvailable:   20971520 kB\n")  # 20 GiB available
    return slab, meminfo


def test_ten_million_fit_twenty_gib(machine) -> None:
    found = budget(10**7, 1 << 24, *machine)
    assert found.need_bytes == 10**7 * 256 + (1 << 24) * 8     # 2.69 GiB
    assert found.fits and memory_refusal(found) is None
    assert "10000000 connections x 256 B" in found.line() and "GiB" in found.line()


def test_a_run_that_cannot_fit_is_refused_with_its_arithmetic(machine) -> None:
    found = budget(800_000_000, 1 << 28, *machine)              # the draft's 800 M: 192.7 GiB
    refusal = memory_refusal(found)
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith("800000000 connections do not fit this machine's memory: 800000000 connections "
                              "x 256 B (conntrack slab size")
    assert "= 192.73 GiB; 80% of MemAvailable 20.00 GiB = 16.00 GiB" in refusal


def test_the_boundary_is_eighty_percent(machine) -> None:
    share = int(0.8 * 20 * 2**30)
    assert budget(share // 256, 0, *machine).fits
    assert not budget(share // 256 + 1, 0, *machine).fits


def test_an_unreadable_slab_says_the_size_is_assumed(machine, tmp_path: Path) -> None:
    found = budget(1000, 1024, tmp_path / "absent", machine[1])
    assert found.entry_bytes == FALLBACK_ENTRY_BYTES and "assumed" in found.line()
