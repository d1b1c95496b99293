"""The paper's bottleneck verdict on a real testbed, from an idle-mean record's per-host samples.

On separate DUT hosts (`[[setup]] kind = "testbed"`), each DUT's per-core idle time is its own: the DUT whose
active cores (those online during the capture) had the least idle time at the median rate is the bottleneck
(the paper's Figures 10/11). Records of the emulation and of stores written before per-host samples existed
have no `hosts` and give None: there analysis.bottleneck's evidence applies.
"""

from __future__ import annotations

from typing import Any

from ..scripts.records import IdleMean

# Two DUTs whose active cores were idle within this many percentage points of each other are a tie: neither
# is named the bottleneck (on this machine's emulated hosts both read the same CPUs and always tie).
TIE_POINTS = 2.0


def active_idle(samples: list[dict[str, Any]], cores: list[int]) -> float | None:
    """Mean idle time (%) of the `cores` over all samples; None without samples for them."""
    values = [s["cpus"][str(c)]["idle"] for s in samples for c in cores if str(c) in s["cpus"]]
    return round(sum(values) / len(values), 2) if values else None


def bottleneck(idle: dict[str, list[dict[str, Any]]], active: dict[str, list[int]]) -> dict[str, Any]:
    """The paper's verdict on a real testbed: of the DUT hosts, the one whose active cores had the least
    idle time during the capture (taken at the median throughput rate), with every host's figure.

    idle: host -> samples (setups.remote_idle.IdleSampler.collect) or their per-second means; active: host ->
    the CPUs online for the trial."""
    figures = {host: active_idle(samples, active.get(host, [])) for host, samples in idle.items()}
    known = {host: value for host, value in figures.items() if value is not None}
    if not known:
        return {"bottleneck": None, "idle_percent": figures,
                "reason": "no idle samples of the active cores: was the sampler started?"}
    ranked = sorted(known, key=lambda h: known[h])
    host = ranked[0]
    if len(ranked) > 1 and known[ranked[1]] - known[host] < TIE_POINTS:
        return {"bottleneck": None, "idle_percent": figures,
                "reason": f"{host} and {ranked[1]} were idle about as long ({known[host]:.1f} % and "
                          f"{known[ranked[1]]:.1f} %, less than {TIE_POINTS:g} points apart): not determined"}
    return {"bottleneck": host, "idle_percent": figures,
            "reason": f"{host}'s active cores were idle {known[host]:.1f} % of the time, the least"}


def active_cpus(dut_cpus: dict[str, Any] | None) -> dict[str, list[int]]:
    """Per DUT host, the CPUs online during the record's trials (as hotplug reported them)."""
    if not isinstance(dut_cpus, dict):
        return {}
    applied = dut_cpus.get("applied") or {}
    active = {host: list(v["online"]) for host, v in applied.items()
              if isinstance(v, dict) and isinstance(v.get("online"), list)}
    if not active and isinstance(dut_cpus.get("cpus"), dict):
        active = {host: list(cpus) for host, cpus in dut_cpus["cpus"].items()}
    return active


def host_bottleneck(mean: IdleMean) -> dict[str, Any] | None:
    """{"bottleneck": host or None, "idle_percent": {host: mean idle % of its active cores}, "active_cpus",
    "reason", "rate_qps", "setup", "cores", "implementation"}; None without per-host samples."""
    if not mean.hosts:
        return None
    active = active_cpus(mean.context.dut_cpus)
    found = bottleneck(mean.hosts, active)
    return {**found, "active_cpus": active, "rate_qps": mean.rate_qps, "setup": mean.context.setup_name,
            "cores": mean.context.cores, "implementation": mean.context.implementation}


def host_bottleneck_text(verdict: dict[str, Any]) -> str:
    """One line for a report: every number with its unit and the implementation that produced it."""
    figures = ", ".join(f"{host} {value:.1f} %" if value is not None else f"{host} no samples"
                        for host, value in sorted(verdict["idle_percent"].items()))
    head = (f"{verdict['setup']}, {verdict['cores']} DUT core(s), at {verdict['rate_qps']:,.0f} queries/s "
            f"({verdict['implementation']}): ")
    who = f"bottleneck {verdict['bottleneck']}" if verdict["bottleneck"] else "bottleneck not determined"
    return f"{head}{who} (mean idle time of each DUT host's active cores: {figures})"
