"""The loopback self-test environment: Knot gets the chains' socket buffers, and gives them back."""

from __future__ import annotations

import pytest

from xlatbench.scripts.environments.loopback import LoopbackEnvironment
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.emulation import rootsysctl

pytestmark = pytest.mark.root


def test_loopback_self_test_raises_socket_buffers_while_up_and_restores_them(port: int) -> None:
    before = rootsysctl.read("net.core.rmem_default")
    wanted = max(4 << 20, int(before) + 4096)
    env = LoopbackEnvironment(TesterOptions(port=port), knot_cpus=(0,), rmem_bytes=wanted)
    env.up()
    try:
        assert int(rootsysctl.read("net.core.rmem_default")) >= wanted
        assert env.describe()["root_sysctls"]["net.core.rmem_default"]["original"] == before
        result = env.measurer().measure(1.0, 2000)
        assert result.sent == 2000 and result.valid == 2000, result.reasons
    finally:
        env.down()
    assert rootsysctl.read("net.core.rmem_default") == before
