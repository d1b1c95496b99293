"""The demo's upper bound is measured: raised until a trial fails, then written into the campaign it runs."""

from pathlib import Path

from xlatbench.demo import Probe, effective_campaign, raise_until_failure
from xlatbench.scripts.campaignfile import load_campaign
from xlatbench.scripts.fakes import FakeDut

REPO = Path(__file__).resolve().parents[2]


def test_the_rate_is_raised_until_a_trial_fails():
    dut = FakeDut(capacity_qps=130_000)  # passes up to 130 000 queries/s, loses everything above
    probe = raise_until_failure(dut.measure, 1e-4, start_qps=25_000, rest_s=0, say=lambda _: None)
    assert (probe.passed_qps, probe.failed_qps) == (100_000, 200_000)
    assert [t.rate_qps for t in probe.trials] == [25_000, 50_000, 100_000, 200_000]


def test_a_tester_limited_trial_is_tried_again_before_it_counts():
    dut = FakeDut(capacity_qps=1e9, tester_limit_qps=60_000)
    probe = raise_until_failure(dut.measure, 1e-4, start_qps=25_000, rest_s=0, say=lambda _: None)
    assert probe.failed_qps == 100_000 and probe.trials[-1].tester_limited
    assert [t.rate_qps for t in probe.trials] == [25_000, 50_000, 100_000, 100_000, 100_000]


def test_the_campaign_run_carries_the_measured_bound(tmp_path):
    probe = Probe(passed_qps=200_000, failed_qps=400_000)
    effective = effective_campaign(REPO / "campaigns" / "demo.toml", probe, tmp_path)
    campaign = load_campaign(effective)
    assert {settings.max_rate_qps for _, settings in campaign.searches} == {400_000}
    assert "400,000 queries/s failed" in effective.read_text().splitlines()[0]


def test_the_self_test_runs_knot_where_the_chains_do():
    """The report divides each chain's throughput by the self-test's: the loopback setup's Knot placement
    must be the chains' (issue 31, item 7)."""
    from xlatbench.demo import knot_placement

    campaign = load_campaign(REPO / "campaigns" / "demo.toml")
    (loopback,) = [s for s in campaign.setups if s.kind == "loopback"]
    chains = {tuple(s.params["options"]["knot_cpus"]) for s in campaign.setups if s.kind == "chain"}
    assert chains == {tuple(loopback.params["knot_cpus"])} == {(0,)}
    assert knot_placement(campaign) == (0,)


def test_a_self_test_placed_unlike_the_chains_is_refused(tmp_path):
    import pytest

    from xlatbench.demo import knot_placement

    text = (REPO / "campaigns" / "demo.toml").read_text()
    unlike = tmp_path / "unlike.toml"
    old, new = 'kind = "loopback"\nknot_cpus = [0]', 'kind = "loopback"\nknot_cpus = [1]'
    assert old in text
    unlike.write_text(text.replace(old, new))
    with pytest.raises(ValueError, match=r"self-test \(loopback\) pins Knot to CPU\(s\) \[1\] but its "
                                         r"chains to \[0\]"):
        knot_placement(load_campaign(unlike))
