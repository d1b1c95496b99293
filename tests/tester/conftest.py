"""Fixtures for the xlatperf end-to-end tests: the binary, the schema validator, a runner."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from xlatbench.paths import tester_binary
from xlatbench.setups.emulation.xdplink import XdpLink, xdp_link

from .helpers import SCHEMA_PATH, Run


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
