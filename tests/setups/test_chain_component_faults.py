"""Each topology: knotd or a translator (tayga) killed with SIGKILL at a random moment inside a trial makes
that trial void (ComponentFailure naming the process), never a throughput figure or DUT loss."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time

import pytest

from xlatbench.failures import ComponentFailure
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions

pytestmark = [pytest.mark.root, pytest.mark.slow]

DURATION_S = 2.0


@pytest.mark.parametrize("topology", ["baseline", "464xlat", "mapt"])
def test_a_component_killed_inside_a_trial_voids_it(topology: str, chain_factory, tester) -> None:
    chain = chain_factory(topology)
    components = chain.component_pids()
    assert "knotd (server)" in components
    if topology != "baseline":
        assert any(name.startswith("tayga") for name in components), components
    name, pid = random.choice(sorted(components.items()))
    measurer = ChainMeasurer(chain, TesterOptions(threads=1, ports_per_thread=4), binary=tester)

    def kill() -> None:
        time.sleep(random.uniform(0.3, DURATION_S - 0.5))
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill)
    killer.start()
    with pytest.raises(ComponentFailure, match=rf"{re.escape(name)} \(pid {pid}\) died"):
        measurer.measure(DURATION_S, 2000)
    killer.join()
