"""Run a campaign unattended: every setup x core count x search settings x method, R repetitions each,
then the CPU-idle capture; every trial appended (fsync'ed) to the JSON Lines store as it finishes.

Resume: the campaign is deterministic given its trials' results, so a rerun replays it from the start,
taking each trial already in the store instead of measuring it (no environment is built until a trial is
really missing), and goes on measuring from the first missing one. A record is written only for a new trial,
so each finished trial is in the store exactly once.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from tqdm import tqdm

from xlatbench.scripts.campaignfile import Campaign, SetupSpec, make_environment
from xlatbench.scripts.clock import RealClock
from xlatbench.scripts.cpuload import CpuSampler, mean_per_second
from xlatbench.scripts.envs import Environment, implementation_label
from xlatbench.scripts.hostinfo import host_info
from xlatbench.scripts.measurers import ComponentFailure
from xlatbench.scripts.repeat import RepeatedSearch, repeat_search
from xlatbench.scripts.search import (
    FAST,
    OK,
    UPPER_NOT_FAILED,
    SearchOutcome,
    SearchSettings,
    TrialRecord,
    TrialRunner,
)
from xlatbench.scripts.stats import scale_up
from xlatbench.scripts.store import ResultStore, StoreError
from xlatbench.scripts.trial import TrialResult
from xlatbench.scripts.xlatperf import TesterError


class CampaignMismatch(RuntimeError):
    """The store holds records of a different campaign file."""


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def planned_searches(campaign: Campaign, setup_max_cores: Callable[[SetupSpec], int]) -> list[tuple]:
    """(setup, cores, settings name, settings, method) in the order the campaign runs them."""
    plan = []
    for setup in campaign.setups:
        for cores in capped_cores(campaign.cores, setup_max_cores(setup)):
            for name, settings in campaign.searches:
                for method in campaign.methods:
                    plan.append((setup, cores, name, settings, method))
    return plan


def capped_cores(cores: tuple[int, ...], available: int) -> list[int]:
    return [c for c in cores if c <= available]


def estimate_search_s(settings: SearchSettings, method: str) -> float:
    """Rough time of `repetitions` searches, s: for the ETA only."""
    span = settings.max_rate_qps - settings.min_rate_qps
    width = settings.width_qps(settings.min_rate_qps + span / 4)
    steps = max(1, math.ceil(math.log2(max(2.0, span / width))))
    full = settings.duration_s + settings.rest_s
    short = settings.short_duration_s + settings.short_rest_s
    if method != FAST:
        return settings.repetitions * steps * full
    first = steps * short + 2 * full
    return first + (settings.repetitions - 1) * (3 * short + 1.3 * full)


@dataclass
class ConfigResult:
    setup: str
    cores: int
    search: str
    method: str
    repeated: RepeatedSearch
    implementation: str


@dataclass
class CampaignRun:
    """Runs one Campaign. out: where progress and results are printed; progress: show the tqdm bar."""

    campaign: Campaign
    out: TextIO = field(default_factory=lambda: sys.stderr)  # the stderr of when it runs, not of import
    progress: bool = True
    results: list[ConfigResult] = field(default_factory=list)
    new_trials: int = 0
    replayed_trials: int = 0

    def run(self) -> list[ConfigResult]:
        c = self.campaign
        self.store = ResultStore(c.store)
        self.store.check_writable()
        torn = self.store.repair_torn_tail()
        if torn:
            self._say(f"store {c.store}: an unfinished last record ({torn} bytes, cut by a kill) "
                      "was moved aside")
        stored = list(self.store.records())
        self._check_campaign(stored)
        self.keys = {r["key"] for r in stored}
        self.replay = {(r["search"]["id"], r["search"]["step"]): _record_from_store(r)
                       for r in stored if r.get("type") == "trial"}
        self.idle_stored = {r["key"]: r for r in stored if r.get("type") == "idle-run"}
        envs = {s.name: make_environment(s, c.tester) for s in c.setups}
        plan = planned_searches(c, lambda s: envs[s.name].max_cores())
        self._report_capped(envs)
        self._estimates = [estimate_search_s(p[3], p[4]) for p in plan]
        self._idle_left_s = self._idle_estimate(plan)
        self._remaining_s = sum(self._estimates) + self._idle_left_s
        self._finished = 0
        total = self._remaining_s
        done = sum(r["trial"]["duration_s"] + r["trial"]["rest_before_s"]
                   for r in stored if r["type"] == "trial")
        self.bar = tqdm(total=max(total, done), initial=done, unit="s", disable=not self.progress,
                        file=self.out, desc=c.name, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} s of trials "
                                   "[{elapsed}<{remaining}]{postfix}")
        if stored:
            self._say(f"resuming {c.name}: {len(self.replay)} trials already in {c.store} are replayed, "
                      "not measured again")
        try:
            for setup in c.setups:
                self._run_setup(setup, envs[setup.name])
        finally:
            self.bar.close()
        self._print_tables()
        return self.results

    # -- one setup --------------------------------------------------------------------------------
    def _run_setup(self, setup: SetupSpec, env: Environment) -> None:
        c = self.campaign
        state: dict[str, Any] = {"up": False, "cores": None, "applied": None}
        runner = TrialRunner(None, clock=getattr(env, "clock", None) or RealClock(), replay=self.replay)
        previous_medians: dict[tuple[str, str], float] = {}
        try:
            for cores in capped_cores(c.cores, env.max_cores()):
                runner.measurer = None
                runner.before_real_trial = lambda cores=cores: self._prepare(env, state, cores)
                for name, settings in c.searches:
                    for method in c.methods:
                        context = {"setup": setup, "cores": cores, "search_name": name, "settings": settings,
                                   "method": method, "env": env, "state": state}
                        runner.on_trial = lambda record, ctx=context: self._store_trial(record, ctx)
                        prefix = f"{setup.name}/cores{cores}/{name}"
                        self.bar.set_postfix_str(f"{setup.name} cores={cores} {name} {method}", refresh=True)
                        try:
                            repeated = repeat_search(runner, settings, method, prefix,
                                                     first_guess_qps=previous_medians.get((name, method)),
                                                     on_outcome=lambda o, ctx=context: self._store_outcome(
                                                         o, ctx))
                        except (ComponentFailure, TesterError) as err:
                            self._store_failure(err, context)
                            raise
                        self._store_summary(repeated, context)
                        self._finished += 1
                        self._reestimate(self._finished)
                        self.results.append(ConfigResult(setup.name, cores, name, method, repeated,
                                                        self._implementation(env)))
                        if repeated.summary is not None and repeated.status in (OK, UPPER_NOT_FAILED):
                            previous_medians[(name, method)] = repeated.summary.median
                        self._say(f"{setup.name}, {cores} DUT core(s), search {name!r}: "
                                  f"{repeated.describe()} "
                                  f"[{self._implementation(env)}]")
                if c.idle.runs:
                    self._idle_capture(setup, env, runner, cores, state)
        finally:
            if state["up"]:
                env.down()

    def _prepare(self, env: Environment, state: dict[str, Any], cores: int) -> Any:
        if not state["up"]:
            env.up()
            state["up"] = True
        if state["cores"] != cores:
            state["applied"] = env.set_cores(cores)
            state["cores"] = cores
        return env.measurer()

    # -- records ----------------------------------------------------------------------------------
    def _base(self, key: str, kind: str, ctx: dict[str, Any]) -> dict[str, Any]:
        c, env = self.campaign, ctx["env"]
        return {
            "key": key, "type": kind, "written_utc": utc_now(),
            "campaign": {"name": c.name, "file": c.file, "sha256": c.sha256},
            "setup": ctx["setup"].record(), "cores": ctx["cores"], "dut_cpus": ctx["state"]["applied"],
            "dut": env.describe(),
            "tester": {"tool": "xlatperf", "version": env.tester_version(), "options": _tester(c)},
            "host": host_info(),
        }

    def _store_trial(self, record: TrialRecord, ctx: dict[str, Any]) -> None:
        settings: SearchSettings = ctx["settings"]
        entry = self._base(f"trial:{record.search_id}:{record.step}", "trial", ctx)
        entry["search"] = {
            "id": record.search_id, "settings_name": ctx["search_name"], "method": ctx["method"],
            "rfc8219_exact": ctx["method"] != FAST, "repetition": _repetition(record.search_id),
            "step": record.step, "phase": record.phase, "lower_qps": record.lower_qps,
            "upper_qps": record.upper_qps, "settings": asdict(settings),
        }
        entry["trial"] = {**record.result.to_dict(with_raw=False), "verdict": record.verdict,
                          "rest_before_s": record.rest_before_s, "wall_s": record.wall_s}
        entry["raw"] = record.result.raw
        self._append(entry)
        self.new_trials += 1
        self._advance(record.result.duration_s + record.rest_before_s)

    def _store_failure(self, err: Exception, ctx: dict[str, Any]) -> None:
        """A trial voided by a dead component or tester: stored as a failure with its reason (never as a
        result: a resumed campaign measures that trial again)."""
        key = f"trial-failed:{ctx['setup'].name}/cores{ctx['cores']}/{ctx['search_name']}/{ctx['method']}:" \
              f"{utc_now()}"
        entry = self._base(key, "trial-failed", ctx)
        entry["failure"] = {"kind": type(err).__name__, "reason": str(err)}
        self._append(entry)

    def _store_outcome(self, outcome: SearchOutcome, ctx: dict[str, Any]) -> None:
        key = f"search:{outcome.search_id}"
        if key in self.keys:
            return
        entry = self._base(key, "search", ctx)
        entry["search"] = {**outcome.to_dict(), "settings_name": ctx["search_name"],
                           "settings": asdict(ctx["settings"]), "describe": outcome.describe()}
        self._append(entry)

    def _store_summary(self, repeated: RepeatedSearch, ctx: dict[str, Any]) -> None:
        key = f"summary:{ctx['setup'].name}/cores{ctx['cores']}/{ctx['search_name']}/{repeated.method}"
        if key in self.keys:
            return
        entry = self._base(key, "summary", ctx)
        entry["summary"] = {**repeated.to_dict(), "settings_name": ctx["search_name"],
                            "settings": asdict(ctx["settings"]), "describe": repeated.describe()}
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        self.store.append(entry)
        self.keys.add(entry["key"])

    # -- idle capture -----------------------------------------------------------------------------
    def _idle_capture(self, setup: SetupSpec, env: Environment, runner: TrialRunner, cores: int,
                      state: dict[str, Any]) -> None:
        c = self.campaign
        name, settings = c.idle_search()
        source = next((r for r in self.results if r.setup == setup.name and r.cores == cores
                       and r.search == name and r.method == c.idle.method), None)
        ctx = {"setup": setup, "cores": cores, "search_name": name, "settings": settings,
               "method": c.idle.method, "env": env, "state": state}
        prefix = f"{setup.name}/cores{cores}"
        # A search that never failed still gives a rate the chain carried; the paper's idle capture needs
        # only that (its record says the rate is a lower bound of the throughput).
        if source is None or source.repeated.summary is None or \
                source.repeated.status not in (OK, UPPER_NOT_FAILED):
            self._say(f"{setup.name}, {cores} core(s): no idle capture, the {c.idle.method} search gave no "
                      "median rate")
            return
        rate = float(round(source.repeated.summary.median))
        duration = c.idle.duration_s or settings.duration_s
        rest = c.idle.rest_s if c.idle.rest_s is not None else settings.rest_s
        runs: list[list[dict[str, Any]]] = []
        for run in range(1, c.idle.runs + 1):
            key = f"idle:{prefix}/run{run}"
            self._idle_left_s = max(0.0, self._idle_left_s - duration - rest)
            if key in self.idle_stored:
                runs.append(self.idle_stored[key]["samples"])
                runner.owe_rest(rest)
                continue
            self.bar.set_postfix_str(f"{setup.name} cores={cores} idle capture {run}/{c.idle.runs}")
            measurer = runner.ensure_measurer()
            rest_taken = runner.take_rest()
            sampler = CpuSampler(c.idle.interval_s)
            simulated = getattr(env, "simulated", False)
            if not simulated:
                sampler.start()
            try:
                result = measurer.measure(duration, rate)
            finally:
                samples = [] if simulated else sampler.stop()
            runner.owe_rest(rest)
            runs.append(samples)
            entry = self._base(key, "idle-run", ctx)
            entry.update({"run": run, "rate_qps": rate, "interval_s": c.idle.interval_s,
                          "rate_source": f"median of {source.repeated.method} search {name!r}"
                          + (" (a lower bound: the search never failed)"
                             if source.repeated.status == UPPER_NOT_FAILED else ""),
                          "trial": {**result.to_dict(with_raw=False), "rest_before_s": rest_taken},
                          "samples": samples, "raw": result.raw,
                          "note": "simulated time: no CPU samples" if simulated else None})
            self._append(entry)
            self._advance(duration + rest_taken)
        key = f"idle-mean:{prefix}"
        if key not in self.keys:
            entry = self._base(key, "idle-mean", ctx)
            entry.update({"rate_qps": rate, "runs": len(runs), "interval_s": c.idle.interval_s,
                          "per_second": mean_per_second(runs)})
            self._append(entry)
        self._say(f"{setup.name}, {cores} core(s): idle capture done, {len(runs)} runs at "
                  f"{rate:.0f} queries/s")

    def _idle_estimate(self, plan: list[tuple]) -> float:
        c = self.campaign
        if not c.idle.runs:
            return 0.0
        configs = {(p[0].name, p[1]) for p in plan}
        _, settings = c.idle_search()
        duration = c.idle.duration_s or settings.duration_s
        rest = c.idle.rest_s if c.idle.rest_s is not None else settings.rest_s
        return len(configs) * c.idle.runs * (duration + rest)

    # -- checks and output ------------------------------------------------------------------------
    def _check_campaign(self, stored: list[dict[str, Any]]) -> None:
        for record in stored:
            sha = record.get("campaign", {}).get("sha256")
            if sha != self.campaign.sha256:
                raise CampaignMismatch(
                    f"{self.campaign.store} holds records of another campaign file (sha256 {str(sha)[:12]}…, "
                    f"this file {self.campaign.sha256[:12]}…): a changed campaign cannot resume an old "
                    "store; "
                    "use --store NEW.jsonl or restore the original file")

    def _report_capped(self, envs: dict[str, Environment]) -> None:
        for setup in self.campaign.setups:
            available = envs[setup.name].max_cores()
            dropped = [n for n in self.campaign.cores if n > available]
            if dropped:
                self._say(f"{setup.name}: core counts {dropped} skipped, its DUTs have only "
                          f"{available} core(s)")

    def _implementation(self, env: Environment) -> str:
        return implementation_label(env.describe())

    def _print_tables(self) -> None:
        groups: dict[tuple[str, str, str], list[ConfigResult]] = {}
        for r in self.results:
            groups.setdefault((r.setup, r.search, r.method), []).append(r)
        for (setup, search, method), rows in groups.items():
            label = "RFC 8219 binary search" if method != FAST else "fast search, not RFC 8219 exact"
            self._say(f"\n{setup} — search {search!r}, {label}; throughput in queries/s with loss <= "
                      f"{100 * _loss(self.campaign, search):g} %, DUT: {rows[0].implementation}")
            medians = [r.repeated.summary.median if r.repeated.summary else None for r in rows]
            ratios = scale_up([m or 0.0 for m in medians])
            self._say("  " + " | ".join(["cores", "median", "min", "max", "current/previous", "status",
                                         "trials", "time s"]))
            for r, ratio in zip(rows, ratios, strict=True):
                s = r.repeated.summary
                cells = [str(r.cores)] + ([f"{s.median:.0f}", f"{s.minimum:.0f}", f"{s.maximum:.0f}"]
                                          if s else ["-", "-", "-"])
                cells += [f"{ratio:.2f}" if ratio else "-", r.repeated.status, str(r.repeated.trials),
                          f"{r.repeated.elapsed_s:.0f}"]
                self._say("  " + " | ".join(cells))

    def _advance(self, seconds: float) -> None:
        """Move the bar by trial time; an underestimated total grows instead of overflowing."""
        if self.bar.total is not None and self.bar.n + seconds > self.bar.total:
            self.bar.total = self.bar.n + seconds + self._remaining_s
        self.bar.update(seconds)

    def _reestimate(self, finished: int) -> None:
        """After the finished-th planned search: total = trial time so far + estimate of what is left."""
        self._remaining_s = sum(self._estimates[finished:]) + self._idle_left_s
        self.bar.total = self.bar.n + self._remaining_s
        self.bar.refresh()

    def _say(self, text: str) -> None:
        if self.progress:
            tqdm.write(text, file=self.out)
        else:
            print(text, file=self.out)


def _loss(campaign: Campaign, search: str) -> float:
    return dict(campaign.searches)[search].loss_ratio


def _tester(campaign: Campaign) -> dict[str, Any]:
    data = asdict(campaign.tester)
    data["extra_args"] = list(campaign.tester.extra_args)
    return data


def _repetition(search_id: str) -> int:
    return int(search_id.rsplit("/rep", 1)[1])


def _record_from_store(record: dict[str, Any]) -> TrialRecord:
    try:
        trial = record["trial"]
        search = record["search"]
        result = TrialResult.from_dict({**trial, "raw": record.get("raw")})
        return TrialRecord(search["id"], int(search["step"]), search["phase"], float(search["lower_qps"]),
                           float(search["upper_qps"]), trial["verdict"], result,
                           float(trial.get("rest_before_s", 0.0)), float(trial.get("wall_s", 0.0)))
    except (KeyError, TypeError, ValueError) as err:
        raise StoreError(f"trial record {record.get('key')!r} lacks {err}; the store is damaged") from None
