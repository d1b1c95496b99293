"""An AF_XDP tester in an encapsulating single-DUT topology plays the CEs itself (xlatperf --encap): the chain
says where (setups.chain.tester_encap: the topology's rule, CE count and BR), scripts.xlatperf turns it into
the options, and xlatperf's own parser takes them. No root: topologies as data; the parse check runs the
built tester against an interface that does not exist here, so it stops at the start, after the options."""

from __future__ import annotations

import subprocess

import pytest

from xlatbench.paths import tester_binary as built_tester
from xlatbench.scripts.xlatperf import TesterOptions, place_args, xlatperf_argv
from xlatbench.setups.chain import TesterEncap, TesterPlace, place_tester
from xlatbench.setups.chain import tester_encap as encap_of
from xlatbench.setups.paper import topology

OPTIONS_REFUSED = 2  # xlatperf's exit status for a bad option (dnsperf/src/options.hpp kExitBadOptions)


def test_mape_br_over_xdp_plays_its_ces_with_the_reference_rule() -> None:
    place = place_tester(topology("mape-br", ces=1000), "xdp", 1, 30000)
    encap = TesterEncap("map-e", "2001:db8:ce::/51,192.0.2.0/24,13,0", 1000, "2001:db8:6::1")
    assert place == TesterPlace("enp5s0f0", encap=encap)
    assert place_args(place) == ["--xdp-interface", "enp5s0f0", "--encap", "map-e", "--encap-rule",
                                 "2001:db8:ce::/51,192.0.2.0/24,13,0", "--encap-ces", "1000",
                                 "--encap-br", "2001:db8:6::1"]


def test_lwaftr_over_xdp_plays_its_subscribers_with_the_binding_arithmetic() -> None:
    encap = encap_of(topology("lwaftr", ces=64))
    assert encap == TesterEncap("lw4o6", "2001:db8:b4::/64,192.0.2.0/24,5,0", 64, "2001:db8:6::1")


@pytest.mark.parametrize("name", ["baseline", "464xlat", "mapt", "br", "mape", "lw4o6", "mape-ce", "lwb4"])
def test_no_other_topology_makes_the_tester_encapsulate(name: str) -> None:
    assert encap_of(topology(name)) is None
    assert place_tester(topology(name), "xdp", 4, 30000).encap is None


def test_the_command_line_names_no_source_port_and_xlatperf_parses_it() -> None:
    chain = topology("mape-br", ces=1000)
    place = place_tester(chain, "xdp", 1, 30000)
    options = TesterOptions(io="xdp", first_port=30000)
    argv = xlatperf_argv(built_tester(), chain.server_address, 1000, 1, options, "/tmp/unused.json", place)
    assert "--first-port" not in argv and "--source" not in argv and "--bind" not in argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode not in (0, OPTIONS_REFUSED), done.stderr
    assert "enp5s0f0" in done.stderr and "--encap" not in done.stderr
