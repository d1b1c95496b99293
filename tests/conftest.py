"""Shared pytest fixtures."""

from __future__ import annotations

import os
import socket

import pytest

# This session's loopback knotds keep their run directories here (not in the machine-wide per-user
# root), so cleanup tests and the end-of-session check see only this session's servers.
SESSION_TAG = f"xlatbench-test-{os.getpid()}"
os.environ["XLATBENCH_LOOPBACK_ROOT"] = f"/tmp/{SESSION_TAG}/loopback"


def free_port() -> int:
    """A port free for both UDP and TCP on loopback right now."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port


@pytest.fixture
def port() -> int:
    return free_port()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
