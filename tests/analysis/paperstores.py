"""Results stores built from Lencse & Nagy's Jool measurements (reference 000): Tables 2 and 3 (the medians)
and the CPU idle time of Figures 8-17 as the paper describes them, on a real testbed (each DUT its own
16-core host, cores taken offline by hotplug). The paper's verdicts are the known answers: "the bottleneck
was the PLAT" (464XLAT, 1 and 16 cores) and "the bottleneck was the CE" (MAP-T, 1 and 16 cores).

What the paper says of each figure (§3.4, §3.5), and what the store makes of it:
- Fig. 8/9, 464XLAT 1 core: the PLAT "fully utilized the CPU capacity at the beginning of the 60 s of the
  test, while the CLAT had about 20% idle time". PLAT 0 % idle for seconds 1-8; the text says nothing of the
  later seconds, so the store lets it rise to 12 % by second 60 (a 60 s mean above 5 %: only the first
  seconds can decide). CLAT 19-21 %.
- Fig. 10/11, 464XLAT 16 cores: "the CLAT had more than 67% idle time, while the idle time of the PLAT cores
  was below 10% (and it showed some difference from core to core)". CLAT cores 68-76 %; PLAT cores 2-9 %
  at the start, 5 points more by second 60 (2-14 %).
- Fig. 14/15, MAP-T 1 core: the CE "has nearly fully utilized the CPU capacity (1.5%-2% idle time) at the
  beginning of the 60 s of the test, while the BR had more than 30% idle time". CE 1.5-2 % for seconds 1-10,
  rising to 5 % by second 60; BR 31-34 %.
- Fig. 16/17, MAP-T 16 cores: "the CE was practically fully utilized, while the BR had about 10% idle time
  (and it showed some slight difference from core to core)". CE cores 1.0-2.0 %; BR cores 9-11 %: 7-8 points
  apart, a near tie by the verdict's 10-point margin.
The paper gives no drop counters. A store's failing trial just above the median (with_failing) drops at the
device the paper names, as its NIC would when that device cannot keep up (the receive ring of its
client-side port overruns: rx_missed); the tests check which verdicts need it (only the near tie).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import storefix

from xlatbench.data.records import IdleMean, Record
from xlatbench.setups.backends import IN_KERNEL_SOFTIRQ

SECONDS = 60
RUNS = 1  # one stored idle run carries the paper's per-second averages (of its 100 runs)
# Table 2 and Table 3: median, minimum, maximum throughput, queries/s, at 1 and 16 active cores.
TABLES = {"464xlat": {1: (165403, 163280, 167041), 16: (530064, 529881, 530222)},
          "mapt": {1: (143498, 140624, 145314), 16: (1183615, 1179686, 1184387)}}
DEVICES = {"464xlat": ("Clat", "Plat"), "mapt": ("MapCeRole", "MapBrRole")}  # the records' role names
BOTTLENECK = {"464xlat": "dut2", "mapt": "dut1"}  # the PLAT, the CE
PREFLIGHT = {"ok": True, "hosts": {
    dut: {"cpu_model": "Intel Xeon E5-2683 v4", "cpus": 16, "kernel": "4.9.0-4-amd64", "hostname": name}
    for dut, name in (("dut1", "p095"), ("dut2", "p096"))}}


def _jool(role: str) -> dict[str, Any]:
    return {"implementation": "jool", "version": "4.2.0-rc2", "role": role,
            "execution_model": IN_KERNEL_SOFTIRQ}


def _dut(topology: str) -> dict[str, Any]:
    first, second = DEVICES[topology]
    return {"topology": topology, "world": "real testbed", "preflight": PREFLIGHT,
            "translators": {"dut1": _jool(first), "dut2": _jool(second)}}


def _idle(topology: str, cores: int, dut: str, second: int, core: int) -> float:
    """A DUT core's idle time in a second of the run, % (the curves the module's docstring describes)."""
    late = (second - 1) / (SECONDS - 1)  # 0 at the first second, 1 at the last
    wobble = 0.5 * math.sin(second / 3.0 + core)
    if topology == "464xlat" and cores == 1:
        return 20.0 + wobble if dut == "dut1" else (0.0 if second <= 8 else 12.0 * (second - 8) / 52)
    if topology == "464xlat":
        return 68.0 + core / 2 + wobble if dut == "dut1" else 2.0 + 7.0 * core / 15 + 5.0 * late
    if cores == 1:
        return (1.75 + wobble / 2 if second <= 10 else 2.0 + 3.0 * (second - 10) / 50) if dut == "dut1" \
            else 32.5 + 3 * wobble
    return 1.0 + core / 15 if dut == "dut1" else 9.0 + 2.0 * core / 15


def _cpu(idle: float) -> dict[str, float]:
    idle = round(max(idle, 0.0), 3)
    return {"usr": 1.0, "nice": 0.0, "sys": 3.0, "iowait": 0.0, "irq": 0.0, "softirq": round(96.0 - idle, 3),
            "steal": 0.0, "idle": idle}


def _host(topology: str, cores: int, dut: str) -> list[dict[str, Any]]:
    return [{"second": s, "runs": RUNS, "cpus": {str(c): _cpu(_idle(topology, cores, dut, s, c))
                                                  for c in range(cores)}} for s in range(1, SECONDS + 1)]


def records(topology: str, *, with_failing: bool = True) -> list[Record]:
    """The store of one topology at 1 and 16 cores: summaries (the paper's table), one idle run and the
    idle mean (per DUT host, per second, the figures' curves), and the failing trial just above each
    median."""
    out: list[Record] = []
    for cores in (1, 16):
        median, low, high = TABLES[topology][cores]
        online = list(range(cores))
        applied = {"method": "cpu hotplug", "dut1": {"online": online}, "dut2": {"online": online}}
        ctx = storefix.context(topology, cores, _dut(topology), topology=topology,
                               dut_cpus={"cores": cores, "placement": "own-hosts", "applied": applied})
        hosts = {dut: _host(topology, cores, dut) for dut in ("dut1", "dut2")}
        out.append(storefix.summary(ctx, median, low, high, n=10))
        run = storefix.idle_run(ctx, 1, median, {"duration_s": float(SECONDS), "sent": median * SECONDS,
                                                 "valid": median * SECONDS, "loss_ratio": 0.0})
        out.append(replace(run, hosts=hosts))
        out.append(IdleMean(key=f"idle-mean:{topology}/cores{cores}", context=ctx, rate_qps=median, runs=RUNS,
                            interval_s=1.0, per_second=[], hosts=hosts, excluded=[]))
        if with_failing:
            side = BOTTLENECK[topology]
            counters = {f"{side}:enp5s0f0": {"rx_missed": 0.004 * median * 60}}
            out.append(storefix.trial(ctx, 9, median * 1.01, "fail", {
                "duration_s": 60.0, "loss_ratio": 0.004, "dut_stats": {"counters": counters}}))
    return out


def write(path: Path, topology: str, *, with_failing: bool = True) -> Path:
    return storefix.write_store(path, records(topology, with_failing=with_failing))
