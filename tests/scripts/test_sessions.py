"""The sessions sweep: tester flows swept like core counts, refused up front when they cannot run, and a
simulated DUT whose capacity falls with sessions in a known way reproduced by the report."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import fakechain
import pytest

from xlatbench.analysis.report import write_report
from xlatbench.analysis.series import load_campaign as load_report
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaign import CampaignRun, planned_searches
from xlatbench.scripts.campaignfile import CampaignFileError, load_campaign, parse_campaign
from xlatbench.scripts.nat44 import UdpTimeout
from xlatbench.scripts.xlatperf import TesterOptions, options_for_sessions

SESSIONS = [1, 64, 1024, 4096, 16384]
CAPACITY, HALF = 100_000.0, 1024.0
ERROR_QPS = 500


def known_capacity(sessions: int, half: float | None) -> float:
    """The simulated DUT's capacity, fixed in advance: c0 / (1 + sessions / s0)."""
    return CAPACITY if half is None else CAPACITY / (1 + sessions / half)


def sweep_campaign(store: Path, **campaign: object) -> dict:
    return {
        "campaign": {"name": "sw", "methods": ["rfc8219-binary"], "cores": [1, 2], "sessions": SESSIONS,
                     **campaign},
        "search": {"max_rate_qps": 200_000, "error_qps": ERROR_QPS, "duration_s": 60, "rest_s": 10,
                   "repetitions": 2},
        "tester": {"threads": 2},
        "setup": [{"name": "falls", "kind": "fake", "capacity_qps": CAPACITY, "scaling": 0.0,
                   "half_capacity_sessions": HALF, "cores_available": 1},
                  {"name": "flat", "kind": "fake", "capacity_qps": CAPACITY, "scaling": 0.0,
                   "cores_available": 1}],
    }


def test_sessions_map_onto_threads_and_ports() -> None:
    tester = TesterOptions(threads=16, ports_per_thread=100)
    assert [(t.threads, t.ports_per_thread) for t in
            (options_for_sessions(tester, n) for n in (1, 8, 1600, 16384))] == [(1, 1), (8, 1), (16, 100),
                                                                             (16, 1024)]
    with pytest.raises(ValueError, match="not a multiple of .* threads 16"):
        options_for_sessions(tester, 1000)


def test_a_session_sweep_on_a_simulated_dut_is_reproduced_by_the_report(tmp_path: Path) -> None:
    store = tmp_path / "sw.jsonl"
    campaign = parse_campaign(sweep_campaign(store), "sw.toml", store)
    CampaignRun(campaign, progress=False).run()
    stored = list(ResultStore(store).records())
    summaries = {r.key: r for r in stored if r.TYPE == "summary"}
    assert set(summaries) == {f"summary:{s}/cores1/sessions{n}/default/rfc8219-binary"
                              for s in ("falls", "flat") for n in SESSIONS}
    one = summaries["summary:falls/cores1/sessions1024/default/rfc8219-binary"].context
    assert (one.sessions, one.swept) == (1024, True)
    assert (one.tester["options"]["threads"], one.tester["options"]["ports_per_thread"]) == (2, 512)
    _, text = write_report(store, tmp_path / "out")
    for setup, half in (("falls", HALF), ("flat", None)):
        medians = _median_row(text, f"Throughput of {setup} against tester sessions")
        assert len(medians) == len(SESSIONS)
        for sessions, median in zip(SESSIONS, medians, strict=True):
            # A binary search ends within its error below the capacity.
            assert known_capacity(sessions, half) - ERROR_QPS <= median <= known_capacity(sessions, half)
    assert (tmp_path / "out" / "throughput-vs-sessions.png").stat().st_size > 10_000
    assert "![throughput-vs-sessions](throughput-vs-sessions.png)" in text
    series = load_report(store).series
    assert {s.label for s in series} >= {"falls, 16384 tester sessions", "flat, 1 tester sessions"}


def _median_row(text: str, title_start: str) -> list[float]:
    """The Median row of the Markdown table whose title starts so, as numbers."""
    block = text.split(f"**{title_start}", 1)[1].split("\n\n", 2)[1]
    row = next(line for line in block.splitlines() if line.startswith("| Median"))
    return [float(cell.replace(",", "")) for cell in re.findall(r"\| ([\d,]+) ", row + " ")]


def test_a_resumed_sweep_measures_nothing_again(tmp_path: Path) -> None:
    store = tmp_path / "sw.jsonl"
    data = sweep_campaign(store, cores=[1])
    CampaignRun(parse_campaign(data, "sw.toml", store), progress=False).run()
    lines = store.read_text().count("\n")
    run = CampaignRun(parse_campaign(data, "sw.toml", store), progress=False)
    run.run()
    assert run.new_trials == 0 and store.read_text().count("\n") == lines


def test_without_sessions_the_keys_stay_as_they_were(tmp_path: Path) -> None:
    data = sweep_campaign(tmp_path / "x.jsonl")
    del data["campaign"]["sessions"]
    campaign = parse_campaign(data, "x.toml")
    plan = planned_searches(campaign, {"falls": 1, "flat": 1})
    assert [k.summary_key for k in plan][:1] == ["summary:falls/cores1/default/rfc8219-binary"]


@pytest.fixture
def conntrack_default(monkeypatch) -> None:
    """The kernel's default UDP stream timeout (120 s), whatever this host was set to."""
    monkeypatch.setattr("xlatbench.scripts.environments.emulated.udp_timeout",
                        lambda: UdpTimeout(120, "the kernel default"))


def chain(topology: str, **options: object) -> dict:
    return {"kind": "chain", "topology": topology, "options": {"prefix": "xbsst", **options}}


@pytest.mark.parametrize("change, message", [
    ({"setup": [chain("mapt")]},
     r"16384 tester sessions .* do not fit the mapt chain's 2048 flows \(MAP-T CE 192\.0\.2\.8 PSID 27: "
     r"PSID length 5 leaves 2\^\(16 - 5\) = 2048 ports, 55296-57343\): use sessions <= 2048"),
    ({"setup": [chain("br")]}, "do not fit the br chain's 2048 flows"),
    ({"setup": [chain("ce")]}, "do not fit the ce chain's 2048 flows"),
    ({"setup": [chain("ce")], "campaign": {"name": "x", "sessions": [2, 1026]}},
     r"1026 tester sessions on ephemeral ports .* 3 × 1026 = 3078 do not fit its 2048-port set: set "
     r"\[tester\] first_port"),
    ({"setup": [chain("br")], "tester": {"threads": 1, "first_port": 20000}},
     "first_port cannot be used with br"),
    ({"tester": {"threads": 3}}, r"sessions 64 is not a multiple of \[tester\] threads 3"),
    ({"tester": {"threads": 2, "ports_per_thread": 8}}, "ports_per_thread and .* sessions both given"),
    ({"campaign": {"name": "x", "sessions": [0, 4]}}, "positive integers"),
    ({"campaign": {"name": "x", "sessions": [4, 4]}}, "repeated"),
])
def test_impossible_session_counts_are_refused_at_load(tmp_path: Path, change: dict, message: str,
                                                       conntrack_default: None) -> None:
    data = sweep_campaign(tmp_path / "x.jsonl")
    data["search"]["max_rate_qps"] = 100_000  # 25,000 queries in flight on one socket: xlatperf takes it
    data.update(change)
    with pytest.raises(CampaignFileError, match=message):
        parse_campaign(data, "bad.toml")


def test_sessions_that_fit_the_port_set_and_the_tester_pass(tmp_path: Path, conntrack_default: None) -> None:
    # 60 s trials, 10 s rests, conntrack 120 s: 3 trials' mappings coexist, 3 x 512 <= 2048 (scripts.nat44).
    data = sweep_campaign(tmp_path / "x.jsonl", sessions=[2, 512])
    data["setup"] = [chain("mapt"), chain("br"), chain("464xlat")]
    data["search"]["max_rate_qps"] = 100_000
    assert parse_campaign(data, "ok.toml").sessions == (2, 512)
    data["campaign"]["sessions"] = [2, 2048]
    data["setup"] = [chain("mapt"), chain("464xlat")]
    data["tester"]["first_port"] = 20000
    assert parse_campaign(data, "ok.toml").sessions == (2, 2048)
    del data["tester"]["first_port"]
    data["search"]["max_rate_qps"] = 300_000  # 150,000 queries/s on one socket: 37,500 in flight
    with pytest.raises(CampaignFileError, match=r"use \[campaign\] sessions >= 3 or a lower max_rate_qps"):
        parse_campaign(data, "bad.toml")


def test_the_cli_refuses_a_session_count_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[campaign]\nname = "x"\nsessions = [4096]\n[search]\nmax_rate_qps = 1000\n'
                   'error_qps = 10\n[[setup]]\nkind = "chain"\ntopology = "mapt"\n')
    code = "import sys; from xlatbench.cli import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.run([sys.executable, "-c", code, "campaign", "run", str(bad)],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode != 0
    assert len(process.stderr.strip().splitlines()) == 1, process.stderr
    assert "2^(16 - 5) = 2048 ports" in process.stderr


def test_more_sockets_than_the_tester_may_open_are_refused(tmp_path: Path) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    data = sweep_campaign(tmp_path / "x.jsonl", sessions=[2, 2 * soft])
    data["setup"] = [chain("baseline")]  # a chain without a NAT44, whose port rule would speak first
    with pytest.raises(CampaignFileError, match=f"asks for {2 * soft} tester sockets, but this process may "
                                                f"open only {soft} files"):
        parse_campaign(data, "bad.toml")


def test_the_shipped_sessions_campaign_parses() -> None:
    campaign = load_campaign(Path(__file__).resolve().parents[2] / "campaigns" / "sessions.toml")
    assert campaign.sessions == (1, 64, 1024, 2048)
    assert {s.params["topology"] for s in campaign.setups} == {"464xlat", "clat", "plat", "mapt", "ce"}
    assert campaign.tester.first_port == 20000
    loopback = load_campaign(Path(__file__).resolve().parents[2] / "campaigns" / "sessions-loopback.toml")
    assert loopback.sessions[-1] == 16384 and loopback.setups[0].kind == "loopback"


def test_the_idle_capture_runs_at_each_session_count(tmp_path: Path) -> None:
    store = tmp_path / "sw.jsonl"
    data = sweep_campaign(store, cores=[1], sessions=[64, 4096])
    data["idle"] = {"runs": 1}
    CampaignRun(parse_campaign(data, "sw.toml", store), progress=False).run()
    idle = {r.key: r for r in ResultStore(store).records() if r.TYPE == "idle-run"}
    assert set(idle) == {f"idle:{s}/cores1/sessions{n}/run1" for s in ("falls", "flat") for n in (64, 4096)}
    # Each at its own session count's median: the falling DUT's rate at 4096 is a fifth of its capacity.
    rate = idle["idle:falls/cores1/sessions4096/run1"].rate_qps
    assert CAPACITY / 5 - ERROR_QPS <= rate <= CAPACITY / 5


def test_a_chain_sweep_runs_the_tester_with_each_session_count(tmp_path: Path, monkeypatch) -> None:
    """Through a chain's factory (a fake chain and a fake xlatperf): each point's trials run xlatperf with
    that point's threads and ports, on one chain brought up once."""
    for key, value in fakechain.env_with_fake_tester(tmp_path, 5000).items():
        monkeypatch.setenv(key, value)
    fakechain.LOG.clear()
    store = tmp_path / "c.jsonl"
    data = {"campaign": {"name": "c", "methods": ["rfc8219-binary"], "cores": [1], "sessions": [1, 6, 64]},
            "search": {"max_rate_qps": 20_000, "error_qps": 1000, "duration_s": 0.1, "rest_s": 0,
                       "repetitions": 1},
            "tester": {"threads": 2},
            "setup": [{"name": "fc", "kind": "chain", "topology": "baseline",
                       "factory": "fakechain:fake_chain", "options": {"prefix": "xbt"}}]}
    CampaignRun(parse_campaign(data, "c.toml", store), progress=False).run()
    seen = set()
    for record in ResultStore(store).records():
        if record.TYPE == "trial":
            argv = record.raw["header"]["argv"]
            options = tuple(int(argv[argv.index(flag) + 1]) for flag in ("--threads", "--ports-per-thread"))
            assert options[0] * options[1] == record.context.sessions
            seen.add(options)
    assert seen == {(1, 1), (2, 3), (2, 32)}
    assert [entry[0] for entry in fakechain.LOG].count("up") == 1
