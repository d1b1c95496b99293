"""[tester] io (xlatperf's --io): one rule from campaign files and the command line to xlatperf's command
line, and every record and the report say which io the tester used. No root: the chain side is the
topologies as data, the measurement a fake DUT, the report records of a fake DUT's search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from xlatbench.analysis.html import conditions_of
from xlatbench.cli import main
from xlatbench.data.records import TrialEntry
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaignfile import CampaignFileError, parse_campaign
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import (
    XDP_FIRST_PORT,
    TesterOptions,
    place_args,
    source_first_port,
    xlatperf_argv,
)
from xlatbench.setups.chain import TesterPlace, place_tester
from xlatbench.setups.paper import topology

SEARCH = {"name": "s", "max_rate_qps": 20000, "error_qps": 500, "duration_s": 1, "rest_s": 0,
          "repetitions": 1}


def campaign(tester: dict, setup: dict) -> dict:
    return {"campaign": {"name": "io", "cores": [1]}, "search": SEARCH, "tester": tester, "setup": [setup]}


def test_sockets_stay_the_default_and_xlatperf_gets_no_io_option() -> None:
    argv = xlatperf_argv("xlatperf", "203.0.113.56", 1000, 2, TesterOptions(first_port=30000), "r.json")
    assert "--io" not in argv and argv[argv.index("--first-port") + 1] == "30000"
    assert source_first_port(TesterOptions()) is None  # ephemeral ports, new ones every trial


def test_xdp_gives_io_and_the_chains_place_which_carries_the_ports() -> None:
    options = TesterOptions(io="xdp", ports_per_thread=8, first_port=30000)
    place = place_tester(topology("464xlat"), "xdp", 8, source_first_port(options))
    assert place_args(place) == ["--xdp-interface", "enp5s0f0", "--source", "192.168.0.4,30000-30007"]
    argv = xlatperf_argv("xlatperf", "203.0.113.56", 1000, 2, options, "r.json", place)
    assert argv[argv.index("--io") + 1] == "xdp"
    assert "--first-port" not in argv  # --source names the ports; xlatperf refuses both
    assert argv[argv.index("--source") + 1] == "192.168.0.4,30000-30007"


@pytest.mark.parametrize("name", ["baseline", "464xlat", "mapt", "clat", "ce", "plat"])
def test_without_first_port_xdp_flows_take_fixed_ports_from_the_client_address(name: str) -> None:
    chain = topology(name)
    assert source_first_port(TesterOptions(io="xdp")) == XDP_FIRST_PORT
    place = place_tester(chain, "xdp", 4, XDP_FIRST_PORT)
    assert place_args(place) == ["--xdp-interface", "enp5s0f0", "--source",
                                 f"{chain.client_address},{XDP_FIRST_PORT}-{XDP_FIRST_PORT + 3}"]


@pytest.mark.parametrize("io", ["socket", "xdp"])
def test_a_tester_playing_a_map_t_ce_sends_from_its_address_and_port_set_whatever_its_io(io: str) -> None:
    # br: the paper's CE 11b, MAP address 2001:db8:ce:11b:0:c000:208:1b, port set 55296-57343 (section 3.5).
    place = place_tester(topology("br"), io, 4, XDP_FIRST_PORT)
    assert place.ce and (place.interface is not None) == (io == "xdp")
    options = TesterOptions(io=io, first_port=30000)
    argv = xlatperf_argv("xlatperf", "64:ff9b::cb00:7138", 1000, 2, options, "r.json", place)
    assert argv[argv.index("--bind") + 1] == "2001:db8:ce:11b:0:c000:208:1b"
    assert argv.count("--first-port") == 1 and argv[argv.index("--first-port") + 1] == "55296"
    assert ("--xdp-interface" in argv) == (io == "xdp")


def test_a_socket_tester_through_any_other_chain_needs_no_place() -> None:
    assert place_tester(topology("464xlat"), "socket", 4, None) == TesterPlace()
    assert place_args(TesterPlace()) == []
    with pytest.raises(ValueError, match="tester io must be 'socket' or 'xdp', got 'dpdk'"):
        place_tester(topology("464xlat"), "dpdk", 4, None)


@pytest.mark.parametrize(("given", "says"), [
    ({"io": "dpdk"}, "tester io must be one of ['socket', 'xdp'], got 'dpdk'"),
    ({"io": "xdp", "threads": 2}, "set threads = 1"),
    ({"io": "xdp", "ports_per_thread": (1 << 24) + 1}, "at most 16777216 flows"),
    ({"ports_per_thread": 45537, "first_port": 20000}, "source ports 20000-65536 run past 65535"),
])
def test_bad_tester_io_is_refused_in_one_line(given: dict, says: str) -> None:
    with pytest.raises(ValueError) as err:
        TesterOptions(**given)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_xdp_ports_are_fixed_so_the_map_t_nat44_port_rule_does_not_apply() -> None:
    # 1 s trials without rest: on ephemeral ports conntrack keeps ~120 trials' mappings in the CE's NAT44.
    mapt = {"name": "m", "kind": "chain", "topology": "mapt"}
    with pytest.raises(CampaignFileError, match="set \\[tester\\] first_port"):
        parse_campaign(campaign({"ports_per_thread": 64}, mapt), "c.toml")
    parsed = parse_campaign(campaign({"ports_per_thread": 64, "io": "xdp"}, mapt), "c.toml")
    assert parsed.tester.io == "xdp"


def test_a_chain_that_cannot_place_xdp_flows_is_refused_before_a_trial() -> None:
    class NoPlace:
        topology, max_flows = "other", None

    with pytest.raises(ValueError, match="cannot place the tester's flows for io = 'xdp'"):
        ChainMeasurer(NoPlace(), TesterOptions(io="xdp"))  # type: ignore[arg-type]
    assert ChainMeasurer(NoPlace(), TesterOptions()).place == TesterPlace()  # type: ignore[arg-type]


def test_the_command_lines_io_reaches_every_record_and_the_report(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    status = main(["search", "--dut", "fake", "--io", "xdp", "--max-rate", "20000", "--duration", "1",
                   "--rest", "0", "--repetitions", "1", "--store", str(store), "--no-progress"])
    assert status == 0
    records = list(ResultStore(store).records())
    assert records and all(r.context.tester["options"]["io"] == "xdp" for r in records)
    tester_line = dict(conditions_of(records))["Tester"]
    assert tester_line.endswith("AF_XDP (xlatperf --io xdp)"), tester_line


def test_the_report_names_the_xdp_mode_xlatperfs_own_io_block_gives(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    assert main(["search", "--dut", "fake", "--io", "xdp", "--max-rate", "20000", "--duration", "1",
                 "--rest", "0", "--repetitions", "1", "--store", str(store), "--no-progress"]) == 0
    records = list(ResultStore(store).records())
    io = {"mode": "xdp", "xdp_mode": "native", "interface": "enp5s0f0", "zero_copy": False}
    assert any(isinstance(r, TrialEntry) for r in records)
    records = [replace(r, raw={"io": io}) if isinstance(r, TrialEntry) else r for r in records]
    assert dict(conditions_of(records))["Tester"].endswith(
        "AF_XDP (xlatperf --io xdp: native XDP on enp5s0f0, copy mode)")
    sockets = [replace(r, context=replace(r.context, tester={**r.context.tester, "options": {}}))
               for r in records]  # a store written before io was recorded: sockets, the only io then
    assert dict(conditions_of(sockets))["Tester"].endswith("UDP sockets")
