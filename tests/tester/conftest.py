"""Fixtures for the xlatperf end-to-end tests: the binary, the schema validator, a runner, and where a
Python peer stands for each I/O path (loopback for sockets, behind a veth for AF_XDP)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from xdplink import SERVER_V4, TESTER_V4, XdpLink, xdp_link

from xlatbench.paths import tester_binary

from .helpers import SCHEMA_PATH, PeerSide, Run


@pytest.fixture(scope="session")
def xlatperf() -> Path:
    return tester_binary()


@pytest.fixture(scope="session")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def run_xlatperf(xlatperf: Path, tmp_path: Path):
    """Runs xlatperf with the given arguments plus --json; returns a Run."""

    def run(*args: str, timeout_s: float = 120) -> Run:
        out = tmp_path / "result.json"
        out.unlink(missing_ok=True)
        proc = subprocess.run([str(xlatperf), *args, "--json", str(out)], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        result = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
        return Run(proc.returncode, proc.stdout, proc.stderr, result)

    return run


@pytest.fixture
def link() -> Iterator[XdpLink]:
    """A veth pair into a namespace of its own for the AF_XDP tests, always removed."""
    with xdp_link("xbx" + secrets.token_hex(2)) as made:
        yield made


FIRST_FLOW_PORT = 20000


@pytest.fixture(params=["socket", pytest.param("xdp", marks=pytest.mark.root)])
def peer_side(request: pytest.FixtureRequest) -> PeerSide:
    """Where a test's Python peer answers and how xlatperf reaches it: `socket` on loopback (127.0.0.1, the
    tester's sockets); `xdp` in the server namespace of a veth pair (the peer's sockets made there), xlatperf
    on the pair's root end with --io xdp, one flow per socket the socket run would use, from the tester's
    address and ports 20000 on."""
    if request.param == "socket":
        return PeerSide("socket", "127.0.0.1")
    made: XdpLink = request.getfixturevalue("link")
    return PeerSide("xdp", SERVER_V4, made.netns, made.outer, TESTER_V4, FIRST_FLOW_PORT)
