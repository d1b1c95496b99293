"""A sessions sweep beyond the fd limit (issue 24, item 4): the rules that place up to 2^24 AF_XDP flows over
the chain's client addresses, the refusals above what the tester, the addresses or a PLAT's one NAT44
address can give, the conntrack sizing, and the sessions table's rows from hand-built trial records. No root:
topologies as data, campaign files parsed, records built by hand."""

from __future__ import annotations

import resource
from dataclasses import replace
from pathlib import Path

import pytest

from xlatbench.analysis.series import series_of
from xlatbench.analysis.sessions import point_trials, sessions_tables
from xlatbench.data.records import SummaryEntry, TrialEntry
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaignfile import CampaignFileError, parse_campaign
from xlatbench.scripts.environments import testerfit
from xlatbench.scripts.xlatperf import place_args
from xlatbench.setups.chain import place_tester, xdp_flow_sources
from xlatbench.setups.emulation.rootsysctl import conntrack_table
from xlatbench.setups.paper import topology

SEARCH = {"name": "s", "max_rate_qps": 100000, "error_qps": 50000, "duration_s": 20, "rest_s": 2,
          "repetitions": 1}
MILLION = 1_000_000


def campaign(setup: dict, sessions: list[int], tester: dict | None = None) -> dict:
    return {"campaign": {"name": "sx", "cores": [1], "sessions": sessions}, "search": SEARCH,
            "tester": {"io": "xdp", **(tester or {})}, "setup": [setup]}


def chain(name: str, **options: object) -> dict:
    return {"name": name, "kind": "chain", "topology": name, "options": {"prefix": "xq", **options}}


def test_a_million_flows_are_dealt_over_the_fewest_client_addresses() -> None:
    # 65 536 - 20 000 = 45 536 ports per address: ceil(10^6 / 45 536) = 22 addresses of 45 455 flows.
    addresses, ports = xdp_flow_sources(topology("baseline"), MILLION, 20000)
    assert (len(addresses), ports, addresses[0], addresses[-1]) == (22, 45455, "192.168.0.4", "192.168.0.25")
    assert len(addresses) * ports >= MILLION > len(addresses) * (ports - 1)
    assert place_args(place_tester(topology("baseline"), "xdp", MILLION, 20000)) == [
        "--xdp-interface", "enp5s0f0", "--source", "192.168.0.4-192.168.0.25,20000-65454"]
    assert place_args(place_tester(topology("plat", plat_netmap=True), "xdp", MILLION, 20000))[-1] == \
        "2001:db8:2::4-2001:db8:2::19,20000-65454"
    # One address holds them: the place stays as before.
    one = place_tester(topology("baseline"), "xdp", 45536, 20000)
    assert place_args(one)[-1] == "192.168.0.4,20000-65535"


@pytest.mark.parametrize(("name", "flows", "first", "says"), [
    ("464xlat", 45537, 20000, "need 2 source addresses of 45536 ports (20000-65535), but the 464xlat chain "
                              "carries 1 client address(es) from 192.168.0.4: use at most 45536 flows or a "
                              "lower first_port"),
    ("baseline", 251 * 64512 + 1, 1024, "need 252 source addresses of 64512 ports (1024-65535), but the "
                                        "baseline chain carries 251 client address(es)"),
    ("baseline", 0, 1024, "must number at least 1, got 0"),
    ("baseline", 10, None, "need a first source port 1-65535, got None"),
])
def test_flows_beyond_the_chains_addresses_are_refused_in_one_line(name: str, flows: int, first: int | None,
                                                                    says: str) -> None:
    with pytest.raises(ValueError) as err:
        xdp_flow_sources(topology(name), flows, first)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_sweep_to_a_million_flows_parses_through_the_baseline_and_the_netmapped_plat() -> None:
    for setup in (chain("baseline"), chain("plat", plat_netmap=True)):
        parsed = parse_campaign(campaign(setup, [1000, 10000, 100000, MILLION]), "c.toml")
        options = parsed.tester_for(MILLION)
        assert (options.io, options.threads, options.ports_per_thread) == ("xdp", 1, MILLION)


def test_the_papers_plat_shares_one_nat44_address_and_refuses_more_than_its_ports() -> None:
    # 203.0.113.2 toward 203.0.113.56:53: nf_nat's ports 1024-65535 are 64 512 flows at most.
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(campaign(chain("plat"), [1000, MILLION]), "c.toml")
    text = str(err.value)
    assert "1000000 tester sessions" in text and "64512 flows" in text and "plat_netmap = true" in text
    assert "\n" not in text
    parse_campaign(campaign(chain("plat"), [1000, 64512]), "c.toml")  # at the limit: accepted


def test_sockets_beyond_the_fd_limit_are_refused_naming_io_xdp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testerfit.resource, "getrlimit", lambda which: (
        (20000, 20000) if which == resource.RLIMIT_NOFILE else resource.getrlimit(which)))
    data = campaign(chain("baseline"), [1000, 30000], {"io": "socket", "first_port": 20000})
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(data, "c.toml")
    assert "asks for 30000 tester sockets" in str(err.value) and 'io = "xdp"' in str(err.value)
    data["tester"]["io"] = "xdp"
    parse_campaign(data, "c.toml")  # no socket per flow: no fd limit


def test_plat_netmap_is_only_for_the_plat_topology() -> None:
    with pytest.raises(CampaignFileError, match="plat_netmap applies only to the plat topology"):
        parse_campaign(campaign(chain("baseline", plat_netmap=True), [1000, 2000]), "c.toml")


def test_the_conntrack_table_is_sized_for_the_flows() -> None:
    assert conntrack_table(MILLION) == {"net.netfilter.nf_conntrack_max": 2 * MILLION,
                                        "net.netfilter.nf_conntrack_buckets": 1 << 20}
    assert conntrack_table(1000)["net.netfilter.nf_conntrack_buckets"] == 1024


def _swept_store(tmp_path: Path) -> list:
    """A fake DUT's sweep at 2 session counts, its trial records then given a chain's io, conntrack and
    matching figures by hand (the truth the table must show)."""
    from xlatbench.cli import main

    toml = tmp_path / "c.toml"
    toml.write_text('[campaign]\nname = "sx"\ncores = [1]\nsessions = [1000, 1000000]\n'
                    f'store = "{tmp_path / "s.jsonl"}"\n'
                    '[search]\nmax_rate_qps = 100000\nerror_qps = 50000\nduration_s = 20\nrest_s = 0\n'
                    'repetitions = 1\n[tester]\nio = "xdp"\n'
                    '[[setup]]\nname = "sim"\nkind = "fake"\ncapacity_qps = 80000\n')
    assert main(["campaign", "run", str(toml), "--no-progress"]) == 0
    records = []
    for record in ResultStore(tmp_path / "s.jsonl").records():
        if isinstance(record, TrialEntry):
            flows = record.context.sessions
            result = {**record.result, "dut_stats": {"conntrack_entries": {"dut1": flows, "dut2": 0}},
                      "loss_ratio": 0.001 if flows == MILLION else 0.0}
            record = replace(record, result=result, raw={"io": {"matching": {"total_bytes": 528_312}}})
        records.append(record)
    return records


def test_the_sessions_table_shows_io_conntrack_memory_and_loss_per_point(tmp_path: Path) -> None:
    records = _swept_store(tmp_path)
    points = point_trials(records)
    assert {key[4]: p.conntrack for key, p in points.items()} == {1000: 1000, MILLION: MILLION}
    series = series_of([r for r in records if isinstance(r, SummaryEntry)])
    [table] = sessions_tables(series, records)
    rows = {row[0]: row[1:] for row in table.rows}
    assert table.header[1:] == ["1000", "1000000"]
    assert rows["Tester io"] == ["AF_XDP", "AF_XDP"]
    assert rows["Conntrack entries after a trial (DUT's own count, most)"] == ["1,000", "1,000,000"]
    assert rows["Tester matching memory (bytes, most)"] == ["528,312", "528,312"]
    assert rows["Loss at the throughput (%, its passing trial; worst repetition)"] == ["0", "0.1"]
    # Without the records (older callers) the table has only its throughput rows.
    [bare] = sessions_tables(series)
    assert "Tester io" not in {row[0] for row in bare.rows}
