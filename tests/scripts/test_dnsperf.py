"""DNS-OARC dnsperf as a Measurer: its statistics, its slow-down above capacity, a pass against Knot."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from xlatbench.scripts.dnsperf import (
    DnsperfError,
    DnsperfOptions,
    parse_statistics,
    write_queries,
)
from xlatbench.scripts.measurers import DnsperfMeasurer
from xlatbench.scripts.search import verdict
from xlatbench.zones import KnotConfig, KnotServer

STATISTICS = """[Status] Testing complete (time limit)

Statistics:

  Queries sent:         2000
  Queries completed:    1998 (99.90%)
  Queries lost:         2 (0.10%)

  Run time (s):         1.000349
  Queries per second:   1997.301341
"""


def test_statistics_are_read() -> None:
    run = parse_statistics(STATISTICS)
    assert (run.sent, run.completed, run.qps) == (2000, 1998, 1997.301341)


def test_missing_statistics_are_a_one_line_error() -> None:
    with pytest.raises(DnsperfError, match="printed no sent, completed, qps .*last line: 'Error: no server'"):
        parse_statistics("Error: no server\n")


@pytest.fixture
def queries(tmp_path: Path) -> Path:
    return write_queries(tmp_path / "queries.txt", count=256)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A UDP socket that takes queries and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_an_in_flight_cap_slowing_dnsperf_is_tester_limited(queries: Path, silent_port: int) -> None:
    # One query in flight at most and none answered within 1 s: a 2 s run sends about 2, not 2 000.
    options = DnsperfOptions(queries, port=silent_port, outstanding=1, timeout_s=1.0)
    result = DnsperfMeasurer("127.0.0.1", options).measure(2.0, 1000)
    assert 1 <= result.sent <= 4 and result.valid == 0
    assert verdict(result, 1e-4) == "tester-limited"
    assert "sent" in result.reasons[0] and "of 2000 scheduled" in result.reasons[0]


@pytest.mark.root
def test_a_low_rate_against_knot_passes_sending_every_query(queries: Path, port: int,
                                                            tmp_path: Path) -> None:
    with KnotServer(tmp_path / "knot", KnotConfig(listen=(("127.0.0.1", port),))):
        result = DnsperfMeasurer("127.0.0.1", DnsperfOptions(queries, port=port)).measure(1.0, 2000)
    assert result.sent == pytest.approx(2000, rel=1e-4) and result.valid == result.sent
    assert verdict(result, 1e-4) == "pass"
