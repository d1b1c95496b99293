"""The bottleneck verdict on synthetic evidence whose right answer is known by construction."""

from dataclasses import replace

import pytest
import storefix

from xlatbench.analysis.bottleneck import verdict
from xlatbench.analysis.evidence import Evidence, FailingTrial, evidence_from
from xlatbench.analysis.series import load_records
from xlatbench.setups.backends import IN_KERNEL_SOFTIRQ, USER_SPACE_SINGLE_THREAD


def cpu(idle: float, softirq: float = 0.0, sys: float = 0.0) -> dict[str, float]:
    return {"usr": 100.0 - idle - softirq - sys, "sys": sys, "softirq": softirq, "idle": idle}


def evidence(shares, cpus, dut_cpus, failing_drops=None, single_threaded=True, tester=(0,)) -> Evidence:
    failing = None if failing_drops is None else FailingTrial(22000.0, 0.02, 10.0, failing_drops, {})
    return Evidence(setup="464xlat", topology="464xlat", cores=1, rate_qps=20000.0, interval_s=1.0, runs=3,
                    implementation="tayga 0.9.2", emulated=True, translator_share=shares,
                    dut_cpus=dut_cpus, test_cpus=tester, cpu_use=cpus, failing=failing,
                    single_threaded=single_threaded, queue_devices={"dut1": ("nat64",), "dut2": ("nat64",)},
                    dut_cpu_use={dut: {str(c): cpus[str(c)] for c in cs if str(c) in cpus}
                                 for dut, cs in dut_cpus.items()})


DISJOINT = {"dut1": (1,), "dut2": (2,)}
CASES = {
    # tayga on DUT1 at 96 % of its core, DUT2 idle half the time; DUT1's TUN queue overflowed above the rate.
    "dut1 saturated": (evidence({"dut1": 96.0, "dut2": 41.0}, {"1": cpu(2.0), "2": cpu(52.0)},
                                DISJOINT, {"dut1:nat64:tx_dropped": 5000.0}), "dut1", None),
    "dut2 saturated": (evidence({"dut1": 40.0, "dut2": 93.0}, {"1": cpu(55.0), "2": cpu(3.0)}, DISJOINT,
                                {"dut2:nat64:tx_dropped": 800.0}), "dut2", None),
    # The MAP-T CE: its tayga only at 45 %, but its core has no idle time, most of it in softirq (the NAT44).
    "in-kernel NAT44": (evidence({"dut1": 45.0, "dut2": 30.0}, {"1": cpu(1.0, softirq=50.0), "2": cpu(60.0)},
                                 DISJOINT, {"dut1:veth1:rx_dropped": 300.0}), "dut1", "50.0 % kernel"),
    # The case: 38.9 % and 39.6 % of a core on separate idle CPUs is no saturation.
    "neither saturated": (evidence({"dut1": 38.9, "dut2": 39.6}, {"1": cpu(40.0), "2": cpu(45.0)}, DISJOINT,
                                   {}), None, "no DUT showed saturation"),
    # Both on CPU 1, which is full: the shared CPU is the limit, neither DUT alone.
    "sharing CPUs": (evidence({"dut1": 38.9, "dut2": 39.6}, {"1": cpu(1.0)}, {"dut1": (1,), "dut2": (1,)},
                              {"dut2:nat64:tx_dropped": 900.0}),
                     None, "the shared CPU, not one DUT, was full"),
    # DUT1's CPU also ran the tester: its idle time is not DUT1's, so no CPU-based verdict.
    "DUT on the tester's CPU": (evidence({}, {"0": cpu(1.0), "1": cpu(50.0)}, {"dut1": (0,), "dut2": (1,)},
                                         None), None, "also ran the tester/Knot"),
    # DUT1 looks saturated, but the tester was not pinned: its threads may have run on CPU 1.
    "tester not pinned": (replace(evidence({"dut1": 96.0, "dut2": 41.0}, {"1": cpu(2.0), "2": cpu(52.0)},
                                           DISJOINT, {"dut1:nat64:tx_dropped": 5000.0},
                                           single_threaded=False), unpinned=("tester",)),
                          None, "tester not pinned to CPUs"),
    # Saturated DUT1 but the failing trial dropped at DUT2: contradictory, so no name.
    "disagreeing drops": (evidence({"dut1": 95.0, "dut2": 50.0}, {"1": cpu(20.0), "2": cpu(30.0)}, DISJOINT,
                                   {"dut2:nat64:tx_dropped": 4000.0}), None, "the evidence disagrees"),
}


@pytest.mark.parametrize("name", CASES)
def test_verdict_on_known_evidence(name):
    given, bottleneck, phrase = CASES[name]
    found = verdict(given)
    assert found.bottleneck == bottleneck, found.text()
    if bottleneck is None:
        assert "not determined" in found.text() and found.reason
    if phrase:
        assert phrase in found.text(), found.text()


def test_the_headline_says_when_the_duts_shared_a_cpu():
    """Both DUTs on CPU 1: the reason itself (not only the evidence below it) says the shared CPU was full,
    or, when it was not, that per-CPU time could not be charged to one DUT (the demo's case on 2 vCPUs)."""
    shared = {"dut1": (1,), "dut2": (1,)}
    full = verdict(evidence({"dut1": 38.9, "dut2": 39.6}, {"1": cpu(1.0)}, shared, {}))
    assert full.reason.startswith("both DUTs ran on CPU 1, which was full"), full.text()
    busy = verdict(evidence({"dut1": 42.9, "dut2": 52.0}, {"1": cpu(8.0)}, shared, {}))
    assert "could not be charged to one DUT" in busy.reason, busy.text()


def test_a_busy_multithreaded_translator_is_not_called_saturated_by_its_cpu_share():
    # 95 % of "one CPU" from a multi-threaded translator says nothing of saturation; CPUs were idle.
    given = evidence({"dut1": 95.0, "dut2": 20.0}, {"1": cpu(30.0), "2": cpu(60.0)}, DISJOINT, {},
                     single_threaded=False)
    assert verdict(given).bottleneck is None


def test_both_duts_saturated_is_not_determined():
    given = replace(CASES["dut1 saturated"][0], translator_share={"dut1": 97.0, "dut2": 95.0})
    assert "both show saturation" in verdict(given).reason


def _failing_trial_store(tmp_path, translator):
    """A store whose dut1 translator used 96 % of a core in the failing trial just above the rate."""
    dut = {"namespaces": {}, "translators": {"dut1": translator}}
    ctx = storefix.context("464xlat", 1, dut)

    def trial(step, rate, verdict_, drops, exact=True):
        result = {"duration_s": 10.0, "loss_ratio": 0.01,
                  "dut_stats": {"cpu_s": {"dut1": 9.6}, "counters": {"dut1:nat64": {"tx_dropped": drops}}}}
        return storefix.trial(ctx, step, rate, verdict_, result, exact=exact)

    records = [trial(0, 20000, "pass", 1), trial(1, 40000, "fail", 90000), trial(2, 21000, "fail", 700),
               trial(3, 20500, "fail", 600, exact=False), trial(4, 15000, "fail", 50),
               storefix.idle_mean(ctx, 20000, 1, [])]
    (found,) = evidence_from(load_records(storefix.write_store(tmp_path / "s.jsonl", records)))
    return found


def test_drops_come_from_the_failing_trial_just_above_the_rate(tmp_path):
    found = _failing_trial_store(tmp_path, {"implementation": "tayga", "tun_device": "nat64",
                                            "execution_model": USER_SPACE_SINGLE_THREAD})
    assert found.single_threaded is True
    assert found.failing.rate_qps == 21000 and found.failing.drops == {"dut1:nat64:tx_dropped": 700.0}
    assert found.failing.translator_share == {"dut1": pytest.approx(96.0)}
    result = verdict(found)
    assert "dut1:nat64:tx_dropped: 700 packets dropped in that trial (dut1)" in result.evidence
    # dut1's tayga at 96 % of a core is saturated, but nothing shows the other DUT clearly idler: no name.
    assert result.bottleneck is None and "nothing was recorded of the other DUT" in result.reason


def test_a_store_without_execution_model_says_it_is_not_known(tmp_path):
    # A record written before translators carried execution_model: 96 % of a core is not called saturation
    # (one core may not be the limit of an unknown translator), and the verdict says why.
    found = _failing_trial_store(tmp_path, {"implementation": "tayga", "tun_device": "nat64"})
    assert found.single_threaded is None
    result = verdict(found)
    assert "dut1: its translator's execution model is not recorded" in " ".join(result.evidence)
    assert not any("is saturated" in line for line in result.evidence)
    assert result.bottleneck is None


def test_an_in_kernel_translator_is_not_single_threaded(tmp_path):
    found = _failing_trial_store(tmp_path, {"implementation": "x", "execution_model": IN_KERNEL_SOFTIRQ})
    assert found.single_threaded is False


def test_drops_are_charged_to_the_side_that_could_not_keep_up():
    # A veth drop shows at both ends; Knot's socket overflowing is the server's, not a DUT's.
    from xlatbench.analysis.bottleneck import drops_by_side

    counters = {"client:enp5s0f0:tx_dropped": 150, "dut1:enp5s0f0:rx_dropped": 150,
                "server:udp:RcvbufErrors": 900, "server:udp:InErrors": 900, "dut2:enp5s0f1:tx_dropped": 40}
    assert drops_by_side(counters, {}) == {"dut1": {"dut1:enp5s0f0:rx_dropped": 150},
                                           "tester/server": {"server:udp:RcvbufErrors": 900}}


def test_an_unpinned_tester_or_knot_is_read_from_the_store(tmp_path):
    """A chain measured with neither the tester's nor Knot's CPUs pinned gives evidence naming both; pinned,
    none (the verdict then may use the DUTs' idle time)."""
    dut = {"namespaces": {}, "translators": {"dut1": {"implementation": "tayga", "tun_device": "nat64"}}}
    placement = {"placement": "per-dut", "cpus": [2, 3], "per_dut": {"dut1": [2], "dut2": [3]}}
    pinned_tester = {**storefix.TESTER, "options": {**storefix.TESTER["options"], "sender_cpus": "0",
                                                    "receiver_cpus": "0"}}
    found = {}
    for name, tester, options in (("loose", None, None), ("pinned", pinned_tester, {"knot_cpus": [1]})):
        ctx = storefix.context("464xlat", 1, dut, dut_cpus=placement, tester=tester, options=options)
        store = storefix.write_store(tmp_path / f"{name}.jsonl", [storefix.idle_mean(ctx, 20000, 1, [])])
        (found[name],) = evidence_from(load_records(store))
    assert found["loose"].unpinned == ("tester", "Knot")
    assert found["pinned"].unpinned == ()
