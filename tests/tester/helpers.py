"""Helpers for the xlatperf end-to-end tests: run results and their invariants."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xlatbench.paths import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "dnsperf" / "schema" / "result.schema.json"

# Functional tests check counting, not timing: a loaded CI machine may delay a
# sender by milliseconds, which must not turn the verdict. Timing is benchmarked.
RELAXED_TIMING = ["--max-lag", "0", "--send-tolerance-abs", "0.5"]


@dataclass
class Run:
    """One xlatperf run: exit code, stdout, stderr and the parsed JSON (None if not written)."""

    returncode: int
    stdout: str
    stderr: str
    result: dict | None

def check_consistency(result: dict) -> None:
    """Invariants every result must satisfy, whatever the trial."""
    totals = result["totals"]
    threads = result["threads"]
    assert sum(t["sent"] for t in threads) == totals["sent"]
    assert sum(t["valid"] for t in threads) == totals["valid"]
    assert sum(row["sent"] for row in result["series"]) == totals["sent"]
    assert sum(row["valid"] for row in result["series"]) == totals["valid"]
    assert result["latency"]["count"] == totals["valid"]
    assert totals["sent"] + totals["unsent"] == result["send"]["scheduled_queries"]
    answered = (totals["valid"] + totals["late"] + totals["rcode_errors"] + totals["nodata"]
                + totals["truncated"])
    assert totals["unanswered"] == totals["sent"] - answered
    datagrams = answered + totals["malformed"] + totals["unexpected"] + totals["duplicate"]
    assert totals["received"] == datagrams
    detail = totals["unexpected_detail"]
    assert detail["wrong_source"] + detail["unknown_id"] + detail["wrong_question"] == totals["unexpected"]
    if totals["sent"]:
        assert result["loss_ratio"] == pytest.approx(1 - totals["valid"] / totals["sent"])
