"""Complete store records for the analysis tests, made with the store's own dataclasses
(xlatbench.data.records), so every fixture line is a record the campaign could have written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xlatbench.data.records import (
    CampaignRef,
    Context,
    IdleMean,
    IdleRun,
    RateOf,
    Record,
    Stats,
    SummaryEntry,
    TrialEntry,
    TrialPosition,
    implementation_label,
)

HOST = {"cpu_model": "Xeon E5-2683", "cpus_online": 32, "kernel": "4.19"}
TESTER = {"tool": "xlatperf", "version": "t", "options": {"timeout_s": 0.25}}
SETTINGS = {"duration_s": 60, "rest_s": 10, "loss_ratio": 1e-4, "repetitions": 10}


def context(setup: str, cores: int, dut: dict[str, Any], *, campaign: str = "paper",
            campaign_file: str = "paper.toml", topology: str | None = None, dut_cpus: dict | None = None,
            tester: dict | None = None, host: dict | None = None, options: dict | None = None,
            sessions: int = 0, swept: bool = False) -> Context:
    """The envelope of a record of `setup` at `cores` DUT cores, measured on `dut` (sessions: the tester's
    flows, 0 for the tester options' own; swept: a sessions sweep's point)."""
    table = {"name": setup, "kind": "loopback" if setup == "loopback" else "chain",
             "topology": topology or setup, **({"options": options} if options else {})}
    return Context(CampaignRef(campaign, campaign_file, "0" * 64), table, cores, dut_cpus, dut,
                   implementation_label(dut), tester or TESTER, host or HOST, sessions, swept)


def _point(ctx: Context) -> str:
    return f"{ctx.setup_name}/cores{ctx.cores}" + (f"/sessions{ctx.sessions}" if ctx.swept else "")


def summary(ctx: Context, median: float | None, low: float | None, high: float | None, *,
            method: str = "rfc8219-binary", status: str = "ok", settings_name: str = "default",
            settings: dict | None = None, n: int = 10, tester_limit_qps: float | None = None) -> SummaryEntry:
    stats = None if median is None else Stats(n, median, low, high, None, None, None)
    return SummaryEntry(key=f"summary:{_point(ctx)}/{settings_name}/{method}",
                        context=ctx, method=method, rfc8219_exact=method == "rfc8219-binary",
                        status=status, stats=stats, tester_limit_qps=tester_limit_qps, throughputs_qps=[],
                        trials=0, elapsed_s=0.0, settings_name=settings_name,
                        settings=settings or SETTINGS, describe="")


def idle_run(ctx: Context, run: int, rate_qps: float, result: dict[str, Any],
             raw: dict | None = None, rate_of: RateOf | None = None) -> IdleRun:
    return IdleRun(key=f"idle:{_point(ctx)}/run{run}", context=ctx, run=run,
                   rate_qps=rate_qps, interval_s=1.0, rate_source="median", result=result, samples=[],
                   raw=raw, note=None, rate_of=rate_of)


def idle_mean(ctx: Context, rate_qps: float, runs: int, per_second: list[dict[str, Any]],
              rate_of: RateOf | None = None) -> IdleMean:
    return IdleMean(key=f"idle-mean:{_point(ctx)}", context=ctx, rate_qps=rate_qps,
                    runs=runs, interval_s=1.0, per_second=per_second, rate_of=rate_of)


def trial(ctx: Context, step: int, rate_qps: float, verdict: str, result: dict[str, Any], *,
          exact: bool = True, settings_name: str = "default") -> TrialEntry:
    # Not exact: a record of the retired fast search, as old stores hold them.
    method = "rfc8219-binary" if exact else "fast"
    search_id = f"{_point(ctx)}/{settings_name}/{method}/rep1"
    position = TrialPosition(search_id, settings_name, method, exact, 1, step, "binary", 0.0, 1e6, {})
    return TrialEntry(key=f"trial:{search_id}:{step}", context=ctx, search=position,
                      result={"rate_qps": rate_qps, **result}, verdict=verdict, rest_before_s=0.0,
                      wall_s=1.0, raw=None)


def write_store(path: Path, records: list[Record | dict[str, Any]]) -> Path:
    """A store file of these records (dicts are written as given: a version-1 line, a torn record)."""

    path.write_text("".join(json.dumps(r if isinstance(r, dict) else r.to_json()) + "\n" for r in records))
    return path
