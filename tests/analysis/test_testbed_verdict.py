"""The one verdict on a real testbed's DUT hosts (their own idle samples), against known answers: a store
whose DUT hosts idled 20 % and 0.5 % names the second in the console, the report and verdicts.json and plots
both hosts; 70 % and 75 % is "not determined"."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import storefix

from xlatbench.analysis.bottleneck import verdict
from xlatbench.analysis.evidence import evidence_from
from xlatbench.analysis.report import write_report
from xlatbench.analysis.series import load_records
from xlatbench.data.records import IdleMean, record_from_json
from xlatbench.scripts.environments.testbed import TestbedEnvironment, TestbedSetupError, dut_cpu_order
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.testbed.inventory import parse_inventory

PREFLIGHT = {"ok": True, "hosts": {
    "dut1": {"cpu_model": "Xeon Gold 6130", "cpus": 4, "kernel": "6.1.0-dut1", "hostname": "p095"},
    "dut2": {"cpu_model": "EPYC 7302", "cpus": 4, "kernel": "6.1.0-dut2", "hostname": "p096"}}}
TUN = {"implementation": "tayga", "version": "0.9.2", "tun_device": "xlatbench64",
       "execution_model": "user-space, one thread per instance"}
TAYGA = {"topology": "464xlat", "world": "real testbed", "preflight": PREFLIGHT,
         "translators": {"dut1": TUN, "dut2": TUN}}


def second(n: int, idle: dict[str, float]) -> dict[str, Any]:
    return {"second": n, "runs": 1, "cpus": {cpu: {"usr": 100.0 - v, "idle": v} for cpu, v in idle.items()}}


def store_of_testbed(tmp_path: Path, dut1_idle: float, dut2_idle: float,
                  rate_source: str = "median of rfc8219-binary search 'default'") -> Path:
    """A testbed campaign at 2 DUT cores whose idle capture at 100,000 queries/s saw each DUT host's active
    cores (0 and 1; CPU 2 offline, a stale 0 % column) at the given idle time; the controller's own CPUs
    (per_second) were busy, which must not count."""
    applied = {"method": "cpu hotplug", "dut1": {"online": [0, 1]}, "dut2": {"online": [0, 1]}}
    ctx = storefix.context("lab", 2, TAYGA, topology="464xlat",
                           dut_cpus={"cores": 2, "placement": "own-hosts", "applied": applied})
    hosts = {dut: [second(n, {"0": idle, "1": idle, "2": 0.0}) for n in (1, 2, 3)]
             for dut, idle in (("dut1", dut1_idle), ("dut2", dut2_idle))}
    run = storefix.idle_run(ctx, 1, 100000.0, {"duration_s": 3.0, "dut_stats": {"cpu_s": {}}})
    run = replace(run, rate_source=rate_source, hosts=hosts)
    mean = IdleMean(key="idle-mean:lab/cores2", context=ctx, rate_qps=100000.0, runs=1, interval_s=1.0,
                    per_second=[second(n, {"0": 1.0, "1": 1.0}) for n in (1, 2, 3)], hosts=hosts)
    return storefix.write_store(tmp_path / "s.jsonl",
                                [storefix.summary(ctx, 100000.0, 99000.0, 101000.0), run, mean])


def test_the_saturated_dut_host_is_named_by_console_report_and_verdicts_json(tmp_path: Path) -> None:
    store = store_of_testbed(tmp_path, 20.0, 0.5)
    (evidence,) = evidence_from(load_records(store))
    assert evidence.separate_hosts and evidence.dut_cpus == {"dut1": (0, 1), "dut2": (0, 1)}
    assert set(evidence.dut_cpu_use["dut2"]) == {"0", "1"}  # the offline CPU 2 does not count
    found = verdict(evidence)  # what the campaign prints after the idle capture
    assert found.bottleneck == "dut2", found.text()
    assert "dut2 (CPU 0,1): 0.5 % idle" in found.text() and "dut1 (CPU 0,1): 20.0 % idle" in found.text()
    _, text = write_report(store, tmp_path / "report")
    (stored,) = json.loads((tmp_path / "report" / "verdicts.json").read_text())
    assert stored["bottleneck"] == "dut2"
    assert "bottleneck dut2" in text
    for dut in ("dut1", "dut2"):
        assert (tmp_path / "report" / f"idle-lab-cores2-{dut}.png").stat().st_size > 1000
    assert not (tmp_path / "report" / "idle-lab-cores2.png").exists()  # not the controller's CPUs
    assert "DUT hosts: dut1 Xeon Gold 6130, 4 CPUs, kernel 6.1.0-dut1, hostname p095; dut2 EPYC 7302" in text
    html = (tmp_path / "report" / "report.html").read_text()
    assert "6.1.0-dut2" in html and "idle-lab-cores2-dut2.png" in html


@pytest.mark.parametrize(("dut1", "dut2", "rate_source", "reason"), [
    (70.0, 75.0, "median", "no DUT showed saturation"),
    (3.0, 4.0, "median", "dut1 and dut2 both show saturation"),
    (0.5, 20.0, "median of fast search 'default' (a lower bound: the search never failed)",
     "the rate is a lower bound (its search never failed)"),
])
def test_not_determined(tmp_path: Path, dut1: float, dut2: float, rate_source: str, reason: str) -> None:
    store = store_of_testbed(tmp_path, dut1, dut2, rate_source)
    found = verdict(evidence_from(load_records(store))[0])
    assert found.bottleneck is None and reason in found.reason, found.text()
    _, text = write_report(store, tmp_path / "report")
    assert "bottleneck not determined" in text
    assert json.loads((tmp_path / "report" / "verdicts.json").read_text())[0]["bottleneck"] is None


def test_old_records_without_per_host_samples_read() -> None:
    ctx = storefix.context("lab", 2, TAYGA)
    old = IdleMean(key="idle-mean:lab/cores2", context=ctx, rate_qps=1.0, runs=1, interval_s=1.0,
                   per_second=[]).to_json()
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
    assert dut_cpu_order(inv, preflight, "dut1") == [0, 1, 2, 3]  # 4-7 allowed but absent
    # CPUs 1 and 4-7 may not go offline: always online, so taken first; 2 and 3 follow.
    assert dut_cpu_order(inv, preflight, "dut2") == [0, 1, 4, 5, 6, 7, 2, 3]
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
    from xlatbench.cpuload import samples_within, trial_window
    from xlatbench.scripts.environments.testbed import SAMPLE_INTERVAL_S
    from xlatbench.scripts.trial import TrialResult

    # The tester started at 100.0 s on the client's clock, which runs 0.5 s ahead of the controller's.
    start = dt.datetime.fromtimestamp(100.0, dt.UTC).isoformat().replace("+00:00", "Z")
    result = TrialResult(rate_qps=1000.0, duration_s=3.0, sent=3000, valid=3000, loss_ratio=0.0,
                         raw={"header": {"start_utc": start}})
    window = trial_window(result.raw, result.duration_s, clock_offset_s=0.5)
    assert window == (99.5, 102.5)
    samples = [{"t_controller": t, "t_s": 0.0, "cpus": {}} for t in (98.9, 99.9, 100.9, 101.9, 102.9, 103.9)]
    # interval middles 98.4 .. 103.4: those in [99.5, 102.5] stay
    kept = samples_within(samples, window, "t_controller", SAMPLE_INTERVAL_S)
    assert [s["t_controller"] for s in kept] == [100.9, 101.9, 102.9]
    assert [s["t_s"] for s in kept] == [1.4, 2.4, 3.4]
    no_start = TrialResult(rate_qps=1.0, duration_s=1.0, sent=1, valid=1, loss_ratio=0.0)
    assert trial_window(no_start.raw, no_start.duration_s, 0.0) is None


def test_impossible_core_counts_are_refused_from_the_preflight() -> None:
    inv = parse_inventory({
        "name": "lab", "topology": "464xlat",
        "hosts": {"client": {"ssh": "c", "interfaces": {"client-dut1": "e0"}},
                  "dut1": {"ssh": "d1", "offline_cpus": "1-3", "interfaces": {"client-dut1": "e0",
                                                                               "dut1-dut2": "e1"}},
                  "dut2": {"ssh": "d2", "offline_cpus": "2,3", "interfaces": {"dut1-dut2": "e0",
                                                                               "dut2-server": "e1"}},
                  "server": {"ssh": "s", "interfaces": {"dut2-server": "e0"}}}}, "lab.toml")
    env = TestbedEnvironment("lab.toml", TesterOptions())
    env._inventory = inv  # noqa: SLF001 (no SSH in this test)
    env._preflight = {"hosts": {"dut1": {"cpus_present": "0-3"}, "dut2": {"cpus_present": "0-3"}}}  # noqa: SLF001
    env.refuse_cores([2, 3, 4])
    with pytest.raises(TestbedSetupError, match=r"dut2 keeps CPUs \[0, 1\] online .* cannot run 1 core"):
        env.refuse_cores([1, 2])
