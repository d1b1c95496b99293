"""Fixtures of the testbed tests: four sshd hosts in the suite's own namespaces, always taken down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sshnet import SshHosts


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[SshHosts]:
    net = SshHosts(tmp_path / "hosts")
    net.workdir.mkdir()
    try:
        net.up()
        yield net
    finally:
        net.down()
