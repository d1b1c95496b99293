"""The MAP-T CE's NAT44 conntrack timeout read in its own namespace (issue 23, item 4): a namespace has its
own UDP timeouts, not the root's, so the port rule reads them where the NAT44 runs. The value is set in the
namespace by the test itself (the known answer). Needs root."""

from __future__ import annotations

import subprocess

import pytest

from xlatbench.scripts.nat44 import Cycle, chain_refusal

pytestmark = [pytest.mark.root]

STREAM = "net.netfilter.nf_conntrack_udp_timeout_stream"


def test_the_timeout_is_read_in_the_ce_nat44_namespace(chain_factory) -> None:
    chain = chain_factory("mapt")
    netns = chain.emulation.netns_of["napt"]
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{STREAM}=300"], check=True)
    seconds, where = chain.nat44_udp_timeout()
    assert seconds == 300 and netns in where
    # 300 s, 10 s trials and rests: 1 + ⌈290 / 20⌉ = 16 trials' mappings; 16 x 128 = 2048 fit, 16 x 129 not.
    cycles = [Cycle(10, 10, "search 'default'")]
    assert chain_refusal(chain, 128, None, cycles) is None
    refusal = chain_refusal(chain, 129, None, cycles) or ""
    assert "= 16 trials coexist, and 16 × 129 = 2064 do not fit its 2048-port set" in refusal
    assert f"namespace {netns} = 300" in refusal
    assert chain_refusal(chain, 129, 20000, cycles) is None  # first_port: the same flows every trial
