"""The paper's verdict on a real testbed from per-host idle records, against known answers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from xlatbench.analysis.host_idle import host_bottleneck, host_bottleneck_text
from xlatbench.scripts.records import CampaignRef, Context, IdleMean, record_from_json
from xlatbench.scripts.testbed_env import TestbedEnvironment, TestbedSetupError, usable_cpus
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.testbed.inventory import parse_inventory


def second(idle: dict[str, float]) -> dict[str, Any]:
    return {"second": 1, "runs": 1, "cpus": {cpu: {"usr": 100.0 - v, "idle": v} for cpu, v in idle.items()}}


def mean(hosts: dict[str, list[dict[str, Any]]] | None) -> IdleMean:
    applied = {"method": "cpu hotplug", "dut1": {"online": [0, 1]}, "dut2": {"online": [0, 1]}}
    context = Context(CampaignRef("c", "c.toml", "0" * 64), {"name": "lab", "kind": "testbed"}, 2,
                      {"cores": 2, "applied": applied}, {"topology": "464xlat"}, "464xlat: dut1 jool 4.1.9",
                      {"tool": "xlatperf"}, {})
    return IdleMean(key="idle-mean:lab/cores2", context=context, rate_qps=100000.0, runs=1, interval_s=1.0,
                    per_second=[], hosts=hosts)


def test_the_dut_whose_active_cores_idle_least_is_the_bottleneck() -> None:
    # dut2's offline CPU 2 shows 0 % idle (a stale column): only the active cores 0 and 1 count.
    hosts = {"dut1": [second({"0": 10.0, "1": 20.0, "2": 100.0}), second({"0": 0.0, "1": 10.0})],
             "dut2": [second({"0": 60.0, "1": 70.0, "2": 0.0})]}
    verdict = host_bottleneck(mean(hosts))
    assert verdict is not None
    assert verdict["bottleneck"] == "dut1"
    assert verdict["idle_percent"] == {"dut1": 10.0, "dut2": 65.0}
    assert verdict["active_cpus"] == {"dut1": [0, 1], "dut2": [0, 1]}
    text = host_bottleneck_text(verdict)
    assert "bottleneck dut1" in text and "dut1 10.0 %" in text and "100,000 queries/s" in text
    assert "dut1 jool 4.1.9" in text


def test_no_verdict_without_per_host_samples_and_old_records_read() -> None:
    assert host_bottleneck(mean(None)) is None
    old = mean(None).to_json()
    del old["hosts"]  # a record written before per-host samples existed
    assert record_from_json(old).hosts is None  # type: ignore[attr-defined]


def test_core_counts_take_cpu0_and_the_present_offline_cpus() -> None:
    inv = parse_inventory({
        "name": "lab", "topology": "464xlat",
        "hosts": {"client": {"ssh": "c", "interfaces": {"client-dut1": "e0"}},
                  "dut1": {"ssh": "d1", "offline_cpus": "1-7", "interfaces": {"client-dut1": "e0",
                                                                               "dut1-dut2": "e1"}},
                  "dut2": {"ssh": "d2", "offline_cpus": "2,3", "interfaces": {"dut1-dut2": "e0",
                                                                               "dut2-server": "e1"}},
                  "server": {"ssh": "s", "interfaces": {"dut2-server": "e0"}}}}, "lab.toml")
    preflight = {"hosts": {"dut1": {"cpus_present": "0-3"}, "dut2": {"cpus_present": "0-7"}}}
    assert usable_cpus(inv, preflight, "dut1") == [0, 1, 2, 3]  # 4-7 allowed but absent
    # CPUs 1 and 4-7 may not go offline: always online, so taken first; 2 and 3 follow.
    assert usable_cpus(inv, preflight, "dut2") == [0, 1, 4, 5, 6, 7, 2, 3]
    env = TestbedEnvironment("lab.toml", TesterOptions())
    env._inventory, env._preflight = inv, preflight  # noqa: SLF001 (no SSH in this test)
    assert env.max_cores() == 4
    with pytest.raises(TestbedSetupError, match=r"dut2 keeps CPUs \[0, 1, 4, 5, 6, 7\] online"):
        env.per_dut_cpus(4)
    env._preflight = {"hosts": {"dut1": {"cpus_present": "0-3"}, "dut2": {"cpus_present": "0-3"}}}
    assert env.per_dut_cpus(3) == {"dut1": [0, 1, 2], "dut2": [0, 1, 2]}
    with pytest.raises(TestbedSetupError, match=r"dut2 keeps CPUs \[0, 1\] online .* cannot run 1 core"):
        env.per_dut_cpus(1)


def test_host_samples_are_cut_to_the_trial_on_the_controllers_clock() -> None:
    from xlatbench.scripts.testbed_env import inside, trial_window
    from xlatbench.scripts.trial import TrialResult

    # The tester started at 100.0 s on the client's clock, which runs 0.5 s ahead of the controller's.
    start = dt.datetime.fromtimestamp(100.0, dt.UTC).isoformat().replace("+00:00", "Z")
    result = TrialResult(rate_qps=1000.0, duration_s=3.0, sent=3000, valid=3000, loss_ratio=0.0,
                         raw={"header": {"start_utc": start}})
    window = trial_window(result, client_offset_s=0.5)
    assert window == (99.5, 102.5)
    samples = [{"t_controller": t, "t_s": 0.0, "cpus": {}} for t in (98.9, 99.9, 100.9, 101.9, 102.9, 103.9)]
    kept = inside(samples, window)  # interval middles 98.4 .. 103.4: those in [99.5, 102.5] stay
    assert [s["t_controller"] for s in kept] == [100.9, 101.9, 102.9]
    assert [s["t_s"] for s in kept] == [1.4, 2.4, 3.4]
    no_start = TrialResult(rate_qps=1.0, duration_s=1.0, sent=1, valid=1, loss_ratio=0.0)
    assert trial_window(no_start, 0.0) is None
