"""The MAP-T CE's NAT44 port rule (issue 23, item 4): tester sessions on ephemeral ports must fit the port set
while conntrack keeps earlier trials' mappings. The arithmetic is checked against a step-by-step simulation of
mappings expiring, and the campaign check against the issue's reproduction (512 flows, 10 s trials)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from xlatbench.scripts.campaignfile import CampaignFileError, parse_campaign
from xlatbench.scripts.nat44 import Cycle, UdpTimeout, coexisting_trials, ephemeral_refusal, udp_timeout

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "paper-mapt.toml"


def simulated_peak_sets(timeout_s: float, trial_s: float, rest_s: float, trials: int = 60) -> int:
    """Most trials' mappings alive at once, stepping time by 0.01 s: trial k runs from k (trial + rest) for
    trial_s; its mappings are made at its start and expire timeout_s after its end."""
    period = trial_s + rest_s
    peak = 0
    for step in range(round(trials * period * 100)):
        t = step / 100
        alive = sum(1 for k in range(trials) if k * period <= t < k * period + trial_s + timeout_s)
        peak = max(peak, alive)
    return peak


@pytest.mark.parametrize("trial_s, rest_s", [(10, 10), (60, 10), (5, 2), (4, 1), (200, 10), (30, 0)])
def test_the_arithmetic_matches_mappings_expiring(trial_s: float, rest_s: float) -> None:
    sets = coexisting_trials(120, Cycle(trial_s, rest_s, "t"))
    assert sets == simulated_peak_sets(120, trial_s, rest_s, trials=8 + round(240 / (trial_s + rest_s)))


DEFAULT = UdpTimeout(120, "net.netfilter.nf_conntrack_udp_timeout_stream = 120 on this host")


@pytest.fixture(autouse=True)
def conntrack_default(monkeypatch) -> None:
    """The kernel's default stream timeout, whatever this host was set to (the tests' numbers assume it)."""
    monkeypatch.setattr("xlatbench.scripts.environments.emulated.udp_timeout", lambda: DEFAULT)


def chain_campaign(sessions: int, **tester: object) -> dict:
    return {"campaign": {"name": "n", "methods": ["rfc8219-binary"], "cores": [1]},
            "search": {"max_rate_qps": 100_000, "error_qps": 1000, "duration_s": 10, "rest_s": 10},
            "tester": {"threads": 1, "ports_per_thread": sessions, **tester},
            "setup": [{"kind": "chain", "topology": "mapt", "options": {"prefix": "xbnat"}}]}


def test_512_flows_with_10_s_trials_are_refused_with_the_arithmetic() -> None:
    # Before: accepted (2 x 512 <= 2048) and the port set ran out from about the 5th trial.
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(chain_campaign(512), "n.toml")
    text = str(err.value)
    assert f"conntrack keeps a replied UDP mapping 120 s ({DEFAULT.source})" in text
    assert "1 + ⌈(120 − 10) / (10 + 10)⌉ = 7 trials coexist, and 7 × 512 = 3584 do not fit its 2048-port " \
           "set" in text
    assert "first_port" in text and "use at most 292 sessions" in text


def test_first_port_or_few_enough_sessions_pass() -> None:
    assert parse_campaign(chain_campaign(512, first_port=20000), "n.toml").tester.first_port == 20000
    assert parse_campaign(chain_campaign(256), "n.toml").tester.ports_per_thread == 256  # 7 x 256 = 1792


def test_mlrsearchs_shorter_trials_decide() -> None:
    data = chain_campaign(64)
    assert parse_campaign(data, "n.toml")  # RFC 8219 alone: 10 s trials, 7 sets x 64 fit
    data["campaign"]["methods"] = ["mlrsearch"]
    data["idle"] = {"method": "mlrsearch"}
    # The default goals: "rfc8219" starts with 5 s trials (short_duration_s), "short" with 1 s ones, each
    # followed by short_rest_s = 2 s: 1 + ⌈118 / 3⌉ = 41 sets, 41 x 64 > 2048.
    data["search"].update(short_duration_s=5, short_rest_s=2)
    with pytest.raises(CampaignFileError,
                       match=r"MLRsearch's goal 'short' initial trials\) .* = 41 trials coexist"):
        parse_campaign(data, "n.toml")
    # One goal starting with 5 s trials: 1 + ⌈118 / 7⌉ = 18 sets, 18 x 64 = 1152 fit.
    data["search"]["goals"] = [{"name": "g", "initial_trial_duration_s": 5}]
    assert parse_campaign(data, "n.toml").searches[0][1].mlr_goals()[0].initial_trial_duration_s == 5


def test_the_timeout_is_read_from_the_host(tmp_path: Path) -> None:
    netfilter = tmp_path / "net" / "netfilter"
    netfilter.mkdir(parents=True)
    (netfilter / "nf_conntrack_udp_timeout_stream").write_text("60\n")
    (netfilter / "nf_conntrack_udp_timeout").write_text("30\n")
    found = udp_timeout(tmp_path)
    assert found == UdpTimeout(60, "net.netfilter.nf_conntrack_udp_timeout_stream = 60 on this host")
    # 60 s: 1 + ⌈50 / 20⌉ = 4 sets; 4 x 512 fits, 4 x 600 does not.
    assert ephemeral_refusal(512, 2048, [Cycle(10, 10, "t")], found) is None
    assert "4 × 600 = 2400" in (ephemeral_refusal(600, 2048, [Cycle(10, 10, "t")], found) or "")
    missing = udp_timeout(tmp_path / "none")
    assert missing.seconds == 120 and "kernel default" in missing.source


def test_a_testbed_mapt_inventory_is_checked_too(tmp_path: Path) -> None:
    data = chain_campaign(512)
    data["setup"] = [{"kind": "testbed", "inventory": str(EXAMPLE)}]
    with pytest.raises(CampaignFileError, match=r"7 × 512 = 3584 .* the testbed CE host's own value is not "
                                                r"read|testbed CE host's own value is not read.* 7 × 512"):
        parse_campaign(data, "n.toml")


def test_a_testbed_reads_the_timeout_in_the_napt_namespace_on_its_host() -> None:
    from xlatbench.setups.testbed.chain import TestbedChain
    from xlatbench.setups.testbed.inventory import load_inventory

    calls: list[tuple[str, str]] = []

    class Shell:
        def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None):
            calls.append((host, script))
            return SimpleNamespace(stdout="300\n30\n", returncode=0)

    inventory = load_inventory(EXAMPLE)
    stub = SimpleNamespace(inventory=inventory, shell=Shell())
    seconds, where = TestbedChain.nat44_udp_timeout(stub)  # type: ignore[arg-type]
    assert seconds == 300 and inventory.napt_netns in where
    ((host, script),) = calls
    assert host == "dut1" and script.startswith(f"ip netns exec {inventory.napt_netns} ")
    assert "nf_conntrack_udp_timeout_stream" in script


def test_the_campaign_checks_again_once_the_chain_is_up(tmp_path: Path, monkeypatch) -> None:
    # The environment, once up, reports the CE's real timeout refuses the flows: nothing is measured.
    from xlatbench.scripts.campaign import CampaignRun, PortSetTooSmall
    from xlatbench.scripts.environments.simulated import FakeEnvironment

    seen: list[list[Cycle]] = []

    def refusal(self, cycles: list[Cycle]) -> str:
        seen.append(cycles)
        return "7 × 512 = 3584 do not fit its 2048-port set"

    monkeypatch.setattr(FakeEnvironment, "nat44_port_refusal", refusal)
    store = tmp_path / "r.jsonl"
    data = {"campaign": {"name": "n", "methods": ["rfc8219-binary"], "cores": [1]},
            "search": {"max_rate_qps": 100_000, "error_qps": 1000, "duration_s": 10, "rest_s": 10},
            "setup": [{"name": "sim", "kind": "fake", "capacity_qps": 20_000}]}
    with pytest.raises(PortSetTooSmall, match=r"setup 'sim': 7 × 512"):
        CampaignRun(parse_campaign(data, "n.toml", store), progress=False).run()
    assert seen == [[Cycle(10, 10, "search 'default'")]]
    assert not store.exists() or "trial" not in store.read_text()
