"""Catch2 case names that ctest can run: ctest passes each name to the test binary as an argument, and a name
starting with '-' is taken for an option and refused ("Unrecognised token"), which failed CI twice."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "dnsperf" / "tests"
CASE = re.compile(r'TEST_CASE\(\s*"([^"]*)"')


def test_no_catch2_case_name_starts_with_a_dash() -> None:
    names = [(path.name, name) for path in sorted(TESTS.glob("*.cpp"))
             for name in CASE.findall(path.read_text())]
    assert len(names) > 50  # the pattern still finds the cases
    assert [(f, n) for f, n in names if n.startswith("-")] == []
