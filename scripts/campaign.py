"""Run a campaign unattended: every setup x core count x tester sessions x search settings x method, R
repetitions each,
then the CPU-idle capture and the RFC 8219 procedures (scripts.procedures); every trial appended (fsync'ed)
to the JSON Lines store as it finishes.

Resume: the campaign is deterministic given its trials' results, so a rerun replays it from the start,
taking each trial already in the store instead of measuring it (no environment is built until a trial is
really missing), and goes on measuring from the first missing one. A record is written only for a new trial,
so each finished trial is in the store exactly once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from tqdm import tqdm

from ..analysis.bottleneck import verdict
from ..analysis.bounded import rate_text
from ..analysis.evidence import evidence_from
from ..analysis.series import series_of
from ..analysis.tables import throughput_table
from ..cpuload import CpuSampler, mean_per_second, samples_within, trial_window
from ..data.records import (
    CampaignRef,
    ConfigKey,
    Context,
    IdleMean,
    IdleRun,
    ProcedureTrial,
    Provenance,
    RateOf,
    Record,
    SearchEntry,
    StatefulResult,
    StatefulTrial,
    Stats,
    SummaryEntry,
    TrialEntry,
    TrialFailed,
    TrialPosition,
    idle_mean_key,
    idle_run_exclusion,
    idle_run_key,
    implementation_label,
    provenance,
    search_key,
    steal_note,
    trial_failed_key,
    trial_key,
    utc_now,
)
from ..data.store import ResultStore
from ..failures import ComponentFailure
from .campaignfile import Campaign, trial_cycles
from .environments.base import Environment, SetupSpec
from .environments.registry import make_environment
from .hostinfo import host_info, suite_build
from .overhead import Overhead, idle_overhead_s, setup_overheads, trials_overhead_s
from .procedures import ProcedureRun, procedure_time_s
from .search import (
    OK,
    RFC8219,
    UPPER_NOT_FAILED,
    RepeatedSearch,
    SearchOutcome,
    SearchSettings,
    TrialRecord,
    TrialRunner,
    repeat_search,
)
from .stateful.measurer import StatefulMeasurer
from .stateful.procedures import expected_cps
from .stateful.procedures import procedure_time_s as stateful_time_s
from .stateful.run import StatefulRun, stored_calls
from .trial import Measurer, TrialResult
from .xlatperf import TesterError, TesterOptions, flows

# Per host (a real testbed's DUTs), its CPU samples of one idle run; None where hosts share this machine.
HostSamples = dict[str, list[dict[str, Any]]] | None


class CampaignMismatch(RuntimeError):
    """The store holds records of a different campaign file."""


class PortSetTooSmall(RuntimeError):
    """The chain, once up, keeps NAT44 mappings longer than the campaign file's check assumed, and the
    tester's ephemeral-port flows do not fit the MAP-T CE's port set (scripts.nat44)."""


class MixedResume(CampaignMismatch):
    """A resume would add records of another suite commit, tester build, host or MLRsearch library version
    to the store."""


def planned_searches(campaign: Campaign, max_cores: Mapping[str, int]) -> list[ConfigKey]:
    """Every configuration in the order the campaign runs them; max_cores: per setup name, its DUTs' cores."""
    return [ConfigKey(setup.name, cores, name, method, sessions)
            for setup in campaign.setups
            for cores in capped_cores(campaign.cores, max_cores[setup.name])
            for sessions in campaign.session_counts()
            for name, _ in campaign.searches
            for method in campaign.methods]


def capped_cores(cores: tuple[int, ...], available: int) -> list[int]:
    return [c for c in cores if c <= available]


def estimate_search_s(settings: SearchSettings, method: str) -> float:
    """Rough time of `repetitions` searches of `method`, s (the ETA and `campaign plan`): every method by
    simulating its searches (methodbench.simulated_search_s), so the estimate is the method's own code."""
    from .methodbench import simulated_search_s  # the simulator, only where an estimate is wanted

    return simulated_search_s(settings, method)


def estimate_search_trials(settings: SearchSettings, method: str) -> float:
    """How many trials `repetitions` searches of `method` take, from the same simulation (mean)."""
    from .methodbench import simulated_search

    return simulated_search(settings, method)[1]


def idle_estimate_s(campaign: Campaign, plan: list[ConfigKey]) -> float:
    """Time of the whole idle capture of a plan, s: runs x (duration + rest) per (setup, cores)."""
    duration, rest = campaign.idle_timing()
    return idle_configurations(plan) * campaign.idle.runs * (duration + rest)


def idle_configurations(plan: list[ConfigKey]) -> int:
    """How many (setup, cores, sessions) points get an idle capture."""
    return len({(key.setup, key.cores, key.sessions) for key in plan})


def idle_runs(campaign: Campaign, plan: list[ConfigKey]) -> dict[str, int]:
    """How many idle-capture runs each setup of a plan makes."""
    return {setup: campaign.idle.runs * len({(k.cores, k.sessions) for k in plan if k.setup == setup})
            for setup in {k.setup for k in plan}}


def eta_estimates(campaign: Campaign, plan: list[ConfigKey], overheads: Mapping[str, Overhead | None]
                  ) -> tuple[list[float], float]:
    """What a running campaign's ETA starts from, s: per planned search its simulated trial time plus, where
    its setup's per-trial overhead is known, that overhead times its simulated number of trials; and the
    idle capture's time plus its runs' overhead (as `campaign plan` adds them)."""
    searches = []
    for key in plan:
        settings = campaign.settings(key.search)
        found = overheads.get(key.setup)
        trials = estimate_search_trials(settings, key.method) if found is not None else 0.0
        searches.append(estimate_search_s(settings, key.method) + (trials_overhead_s(found, trials) or 0.0))
    procedures = procedures_estimate_s(campaign, plan) + \
        stateful_estimate_s(campaign, setup_core_counts(plan, campaign))
    if not campaign.idle.runs:
        return searches, procedures
    extra_idle = sum(idle_overhead_s(overheads.get(setup), runs) or 0.0
                     for setup, runs in idle_runs(campaign, plan).items())
    return searches, idle_estimate_s(campaign, plan) + extra_idle + procedures


def procedures_estimate_s(campaign: Campaign, plan: list[ConfigKey]) -> float:
    """Trial time of every [[procedure]] of a plan, s: per (setup, cores, sessions) point, each procedure's
    trials x (duration + rest)."""
    return idle_configurations(plan) * sum(procedure_time_s(spec, campaign.settings(spec.search).rest_s)
                                           for spec in campaign.procedures)


def setup_core_counts(plan: list[ConfigKey], campaign: Campaign) -> dict[str, list[int]]:
    """Per setup, the core counts it runs at (from the plan; a campaign without searches: every one)."""
    found: dict[str, list[int]] = {}
    for key in plan:
        found.setdefault(key.setup, [])
        if key.cores not in found[key.setup]:
            found[key.setup].append(key.cores)
    return found or {s.name: list(campaign.cores) for s in campaign.setups}


def stateful_points(campaign: Campaign, cores: Mapping[str, list[int]]) -> list[tuple[str, int, Any]]:
    """Every (setup, cores, point) the stateful procedures run at, in order."""
    if campaign.stateful is None:
        return []
    return [(setup, count, point) for setup, counts in cores.items() for count in counts
            for point in campaign.stateful.points_at(count)]


def stateful_estimate_s(campaign: Campaign, cores: Mapping[str, list[int]]) -> float:
    """Time of every RFC 9693 procedure of the campaign, s (scripts.stateful.procedures.procedure_time_s)."""
    if campaign.stateful is None:
        return 0.0
    searches = dict(campaign.searches)
    cps = expected_cps(campaign.stateful)
    return sum(stateful_time_s(spec, point, searches, cps)[0]
               for _, _, point in stateful_points(campaign, cores) for spec in campaign.stateful.procedures)


@dataclass
class ConfigResult:
    """One configuration's repeated search and the summary record written (or that would be) for it."""

    key: ConfigKey
    repeated: RepeatedSearch
    summary: SummaryEntry


class SetupSession:
    """One setup's environment during a campaign: brought up by the first trial really measured (a resumed
    campaign replays stored trials without it), set to the current core count and tester sessions, always
    taken down (close).

    runner: the TrialRunner of every search of this setup; its measurer is built lazily by measurer().
    dut_cpus: what set_cores applied for the current core count (None while the environment is down).
    sessions: the sweep's current session count (None without a sweep); tester: its tester options.
    """

    def __init__(self, spec: SetupSpec, env: Environment, replay: Mapping[tuple[str, int], TrialRecord],
                 tester: TesterOptions | None = None,
                 before_measuring: Callable[[SetupSession], None] | None = None,
                 after_tester_set: Callable[[SetupSession], None] | None = None):
        self.spec, self.env = spec, env
        self.before_measuring = before_measuring
        self.after_tester_set = after_tester_set
        self.cores = 0
        self.dut_cpus: dict[str, Any] | None = None
        self.sessions: int | None = None
        self.tester = tester or TesterOptions()
        self._up = False
        self._applied_cores: int | None = None
        self._applied_tester: TesterOptions | None = None
        self.runner = TrialRunner(None, clock=env.clock, replay=replay, before_real_trial=self.measurer)

    def select_cores(self, cores: int) -> None:
        """Following trials run with this many DUT cores (applied when one is really measured)."""
        self.cores = cores
        self.runner.measurer = None

    def select_sessions(self, sessions: int | None, tester: TesterOptions) -> None:
        """Following trials use these tester options, `sessions` flows (applied when one is measured)."""
        self.sessions, self.tester = sessions, tester
        self.runner.measurer = None

    def measurer(self) -> Measurer:
        self._ready()
        return self.env.measurer()

    def stateful_measurer(self) -> StatefulMeasurer:
        """The environment's stateful DUT, up and set to the current cores (RFC 9693's procedures)."""
        self._ready()
        return self.env.stateful_measurer()

    def _ready(self) -> None:
        if self.before_measuring is not None:
            self.before_measuring(self)  # e.g. refuse a resume that would mix code, testers or hosts
        if not self._up:
            self.env.up()
            self._up = True
        if self._applied_tester != self.tester:
            self.env.set_tester(self.tester)
            self._applied_tester = self.tester
            if self.after_tester_set is not None:
                self.after_tester_set(self)  # e.g. the NAT44 port rule with the CE's own conntrack timeout
        if self._applied_cores != self.cores:
            self.dut_cpus = self.env.set_cores(self.cores)
            self._applied_cores = self.cores

    def close(self) -> None:
        if self._up:
            self._up = False
            self.env.down()


class Progress:
    """The tqdm bar over trial time (s) and the campaign's messages. out: where they go; show: draw it.
    Setups in `counted` (their per-trial overhead is known and in the estimates) count each trial's rest and
    wall time, the others its rest and duration."""

    def __init__(self, out: TextIO, show: bool) -> None:
        self.out, self.show = out, show
        self.estimates: list[float] = []
        self.idle_left_s = self.remaining_s = 0.0
        self.finished = 0
        self.counted: set[str] = set()
        self.bar = tqdm(disable=True)

    def trial_time_s(self, setup: str, duration_s: float, rest_s: float, wall_s: float) -> float:
        """What one measured trial (or idle run) moves the bar by, s."""
        return rest_s + (wall_s if setup in self.counted else duration_s)

    def start(self, name: str, estimates: list[float], idle_s: float, done_s: float) -> None:
        """estimates: of each planned search, s; idle_s: of the idle capture, s; done_s: trial time stored."""
        self.estimates, self.idle_left_s = estimates, idle_s
        self.remaining_s = sum(estimates) + idle_s
        what = "s of trials and their overhead" if self.counted else "s of trials"
        self.bar = tqdm(total=max(self.remaining_s, done_s), initial=done_s, unit="s", disable=not self.show,
                        file=self.out, desc=name, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} " + what +
                                   " [{elapsed}<{remaining}]{postfix}")

    def advance(self, seconds: float) -> None:
        """Move the bar by trial time; an underestimated total grows instead of overflowing."""
        if self.bar.total is not None and self.bar.n + seconds > self.bar.total:
            self.bar.total = self.bar.n + seconds + self.remaining_s
        self.bar.update(seconds)

    def search_finished(self) -> None:
        """After each planned search: total = trial time so far + estimate of what is left."""
        self.finished += 1
        self.remaining_s = sum(self.estimates[self.finished:]) + self.idle_left_s
        self.bar.total = self.bar.n + self.remaining_s
        self.bar.refresh()

    def idle_run_planned(self, seconds: float) -> None:
        self.idle_left_s = max(0.0, self.idle_left_s - seconds)

    def status(self, text: str) -> None:
        self.bar.set_postfix_str(text, refresh=True)

    def say(self, text: str) -> None:
        if self.show:
            tqdm.write(text, file=self.out)
        else:
            print(text, file=self.out)


def warning_lines_of(setup: str, cores: int, result: TrialResult) -> list[str]:
    """The console's lines for xlatperf's warnings of one trial (none when it gave none)."""
    return [f"{setup}, {cores} core(s), trial at {result.rate_qps:.0f} queries/s: xlatperf warns: {warning}"
            for warning in result.warnings]


# Records of something measured (their context is the run's): what a resume's provenance check guards.
MEASURED = (TrialEntry, IdleRun, ProcedureTrial, StatefulTrial)


class Recorder:
    """Builds the campaign's records and appends each new one to the store once (keys already stored are
    skipped). new_trials: trials measured (not replayed) and stored by this run."""

    def __init__(self, campaign: Campaign, store: ResultStore, stored: list[Record],
                 progress: Progress, guard: Callable[[Record], None] | None = None) -> None:
        self.campaign, self.store, self.progress = campaign, store, progress
        self.guard = guard  # called with each newly measured record before it is stored
        self.keys = {r.key for r in stored}
        # The context of every trial and idle run, stored or new: what a summary of them takes.
        self.contexts: dict[str, Context] = {r.key: r.context for r in stored if isinstance(r, MEASURED)}
        self.new_trials = 0

    def context(self, session: SetupSession) -> Context:
        c, env = self.campaign, session.env
        dut = env.describe()
        tester = {"tool": "xlatperf", "version": env.tester_version(), "options": _tester(session.tester)}
        return Context(CampaignRef(c.name, c.file, c.sha256), session.spec.record(), session.cores,
                       session.dut_cpus, dut, implementation_label(dut), tester, host_info(),
                       flows(session.tester), session.sessions is not None, suite_build())

    def context_of(self, keys: list[str], session: SetupSession) -> Context:
        """The context of the last of these records in the store (a summary or idle mean written on resume
        takes the context of what it summarizes, not of an environment that never came up), else now's."""
        found = [self.contexts[key] for key in keys if key in self.contexts]
        return found[-1] if found else self.context(session)

    def append(self, record: Record) -> None:
        if record.key not in self.keys:
            if self.guard is not None and isinstance(record, MEASURED):
                self.guard(record)
            self.store.append(record)
            self.keys.add(record.key)
            if isinstance(record, MEASURED):
                self.contexts[record.key] = record.context

    def trial(self, record: TrialRecord, config: ConfigKey, session: SetupSession) -> None:
        settings = self.campaign.settings(config.search)
        position = TrialPosition(record.search_id, config.search, config.method, config.method == RFC8219,
                                 _repetition(record.search_id), record.step, record.phase, record.lower_qps,
                                 record.upper_qps, asdict(settings))
        self.append(TrialEntry(key=trial_key(record.search_id, record.step), context=self.context(session),
                               search=position, result=record.result.to_dict(with_raw=False),
                               verdict=record.verdict, rest_before_s=record.rest_before_s,
                               wall_s=record.wall_s, raw=record.result.raw))
        self.new_trials += 1
        note = steal_note(record.result.host_steal_pct)
        if note:
            self.progress.say(f"{config.setup}, {config.cores} core(s), trial at "
                              f"{record.result.rate_qps:.0f} queries/s: {note}; its figure may be low for a "
                              "reason that is neither the DUT nor the tester")
        for line in warning_lines_of(config.setup, config.cores, record.result):
            self.progress.say(line)
        self.progress.advance(self.progress.trial_time_s(config.setup, record.result.duration_s,
                                                         record.rest_before_s, record.wall_s))

    def outcome(self, outcome: SearchOutcome, config: ConfigKey, session: SetupSession) -> None:
        key = search_key(outcome.search_id)
        if key not in self.keys:
            context = self.context_of(_trial_keys([outcome]), session)
            self.append(SearchEntry(key=key, context=context, outcome=outcome.to_dict(),
                                    settings_name=config.search,
                                    settings=asdict(self.campaign.settings(config.search)),
                                    describe=outcome.describe()))

    def failure(self, err: Exception, config: ConfigKey, session: SetupSession) -> None:
        """A trial voided by a dead component or a failed tester: stored as a failure with its reason, never
        as a result (a resumed campaign measures that trial again)."""
        failure: dict[str, Any] = {"kind": type(err).__name__, "reason": str(err)}
        if session.runner.current is not None:
            failure["trial"] = session.runner.current
        self.append(TrialFailed(key=trial_failed_key(config.prefix, config.method, utc_now()),
                                context=self.context(session), failure=failure))

    def summary(self, repeated: RepeatedSearch, config: ConfigKey, session: SetupSession) -> SummaryEntry:
        data = repeated.to_dict()
        entry = SummaryEntry(
            key=config.summary_key, context=self.context_of(_trial_keys(repeated.outcomes), session),
            method=repeated.method,
            rfc8219_exact=repeated.rfc8219_exact, status=repeated.status,
            stats=None if data["summary"] is None else Stats.from_json(data["summary"], config.summary_key),
            tester_limit_qps=repeated.tester_limit_qps, throughputs_qps=data["throughputs_qps"],
            trials=repeated.trials, elapsed_s=repeated.elapsed_s, settings_name=config.search,
            settings=asdict(self.campaign.settings(config.search)), describe=repeated.describe())
        self.append(entry)
        return entry


@dataclass
class ConfigWriter:
    """What the searches of one configuration hand their trials and outcomes to (the store's side)."""

    recorder: Recorder
    config: ConfigKey
    session: SetupSession

    def trial(self, record: TrialRecord) -> None:
        self.recorder.trial(record, self.config, self.session)

    def outcome(self, outcome: SearchOutcome) -> None:
        self.recorder.outcome(outcome, self.config, self.session)


@dataclass
class CampaignRun:
    """Runs one Campaign. out: where progress and results are printed; progress: show the tqdm bar."""

    campaign: Campaign
    out: TextIO = field(default_factory=lambda: sys.stderr)  # the stderr of when it runs, not of import
    progress: bool = True
    results: list[ConfigResult] = field(default_factory=list)
    recorder: Recorder | None = None
    stateful_results: list[StatefulResult] = field(default_factory=list)
    _calls: dict[str, list[Any]] = field(default_factory=dict)  # stored RFC 9693 calls by scope
    completed: dict[str, SearchOutcome] = field(default_factory=dict)  # searches a resumed store finished
    allow_mixed: bool = False  # let a resume add records of another suite commit, tester build or host
    stored_provenance: set[Provenance] = field(default_factory=set)

    @property
    def new_trials(self) -> int:
        return self.recorder.new_trials if self.recorder is not None else 0

    def run(self) -> list[ConfigResult]:
        c = self.campaign
        progress = Progress(self.out, self.progress)
        store = ResultStore(c.store)
        store.check_writable()
        torn = store.repair_torn_tail()
        if torn:
            progress.say(f"store {c.store}: an unfinished last record ({torn} bytes, cut by a kill) "
                         "was moved aside")
        stored = list(store.records())
        self._check_campaign(stored)
        self.stored_provenance = {provenance(r.context) for r in stored}
        self.recorder = Recorder(c, store, stored, progress, guard=self._check_record)
        trials = [r for r in stored if isinstance(r, TrialEntry)]
        envs = {s.name: make_environment(s, c.tester) for s in c.setups}
        plan = planned_searches(c, {name: env.max_cores() for name, env in envs.items()})
        self._report_capped(envs)
        # The ETA counts each setup's per-trial overhead as `campaign plan` measures it (a testbed without
        # stored trials is probed, read-only); only where the bar is shown.
        overheads = setup_overheads(c.store, envs) if self.progress else {}
        progress.counted = {name for name, found in overheads.items() if found is not None}
        searches, idle_s = eta_estimates(c, plan, overheads)
        progress.start(c.name, searches, idle_s, sum(progress.trial_time_s(
            str(t.context.setup.get("name")), float(t.result["duration_s"]), t.rest_before_s, t.wall_s)
            for t in trials))
        if stored:
            calls = sum(isinstance(r, StatefulTrial) for r in stored)
            progress.say(f"resuming {c.name}: {len(trials)} trials already in {c.store} are replayed, "
                         "not measured again"
                         + (f" (and {calls} calls of RFC 9693 procedures)" if calls else ""))
        replay = {(t.search.id, t.search.step): _trial_record(t) for t in trials}
        self.completed = completed_searches(stored, replay)
        idle_stored = {r.key: r for r in stored if isinstance(r, IdleRun | ProcedureTrial | StatefulResult)}
        self._calls = stored_calls(stored)
        try:
            for setup in c.setups:
                self._run_setup(SetupSession(setup, envs[setup.name], replay, c.tester, self._check_mixing,
                                             self._check_ports), idle_stored)
        finally:
            progress.bar.close()
        self._print_tables()
        return self.results

    # -- one setup --------------------------------------------------------------------------------
    def _run_setup(self, session: SetupSession, idle_stored: dict[str, Record]) -> None:
        try:
            for cores in capped_cores(self.campaign.cores, session.env.max_cores()):
                session.select_cores(cores)
                for sessions in self.campaign.session_counts():
                    session.select_sessions(sessions, self.campaign.tester_for(sessions))
                    for name, _ in self.campaign.searches:
                        for method in self.campaign.methods:
                            config = ConfigKey(session.spec.name, cores, name, method, sessions)
                            self._run_config(session, config)
                    if self.campaign.idle.runs:
                        IdleCapture(self._recorder(), self.results, session, idle_stored).run()
                    ProcedureRun(self._recorder(), self.results, session, idle_stored).run()
                if self.campaign.stateful is not None:
                    self.stateful_results += StatefulRun(
                        self._recorder(), session, self.campaign.stateful, dict(self.campaign.searches),
                        idle_stored, self._calls).run()
        finally:
            session.close()

    def _run_config(self, session: SetupSession, config: ConfigKey) -> None:
        recorder = self._recorder()
        writer = ConfigWriter(recorder, config, session)
        session.runner.on_trial = writer.trial
        recorder.progress.status(f"{config.setup} cores={config.cores}{sessions_text(config.sessions)} "
                                 f"{config.search} {config.method}")
        try:
            repeated = repeat_search(session.runner, self.campaign.settings(config.search), config.method,
                                     config.prefix, on_outcome=writer.outcome, completed=self.completed)
        except (ComponentFailure, TesterError) as err:
            recorder.failure(err, config, session)
            raise
        summary = recorder.summary(repeated, config, session)
        recorder.progress.search_finished()
        self.results.append(ConfigResult(config, repeated, summary))
        recorder.progress.say(f"{config.setup}, {config.cores} DUT core(s){sessions_text(config.sessions)}, "
                              f"search {config.search!r}: "
                              f"{repeated.describe()} [{summary.context.tag}]")

    def _recorder(self) -> Recorder:
        assert self.recorder is not None, "run() makes the recorder"
        return self.recorder

    # -- checks and output ------------------------------------------------------------------------
    def _check_campaign(self, stored: list[Record]) -> None:
        for record in stored:
            sha = record.context.campaign.sha256
            if sha != self.campaign.sha256:
                raise CampaignMismatch(
                    f"{self.campaign.store} holds records of another campaign file (sha256 {sha[:12]}…, "
                    f"this file {self.campaign.sha256[:12]}…): a changed campaign cannot resume an old "
                    "store; "
                    "use --store NEW.jsonl or restore the original file")

    def _check_mixing(self, session: SetupSession) -> None:
        """Before a trial is really measured: refuse (unless allow_mixed) when the store holds records of
        another suite commit or host than this run would add. The tester's build is known only from its
        first trial's JSON: _check_record checks it before that trial is stored."""
        self._refuse_mixing(provenance(self._recorder().context(session)))

    def _check_ports(self, session: SetupSession) -> None:
        """Once the chain is up with these tester options: the NAT44 port rule with the conntrack timeout
        the MAP-T CE's NAT44 namespace really has (the campaign file's check could only assume one)."""
        refusal = session.env.nat44_port_refusal(trial_cycles(self.campaign))
        if refusal:
            raise PortSetTooSmall(f"setup {session.spec.name!r}: {refusal}")

    def _check_record(self, record: Record) -> None:
        """Before a newly measured record is stored: the same check, tester build included."""
        self._refuse_mixing(provenance(record.context))

    def _refuse_mixing(self, current: Provenance) -> None:
        if self.allow_mixed:
            return
        others = sorted((p for p in self.stored_provenance if _differs(p, current)), key=str)
        if others:
            raise MixedResume(
                f"{self.campaign.store} holds records measured by {others[0].text()}; this run would add "
                f"records of {current.text()}: a resume never mixes them in one median. Use --store "
                "NEW.jsonl, or --allow-mixed to accept it (the report marks the mixed cells)")

    def _report_capped(self, envs: dict[str, Environment]) -> None:
        for setup in self.campaign.setups:
            available = envs[setup.name].max_cores()
            dropped = [n for n in self.campaign.cores if n > available]
            if dropped:
                self._recorder().progress.say(f"{setup.name}: core counts {dropped} skipped, its DUTs have "
                                              f"only {available} core(s)")
            envs[setup.name].refuse_cores(capped_cores(self.campaign.cores, available))

    def _print_tables(self) -> None:
        """The report's throughput table of each setup, search settings and method, with trials and time."""
        for name, _ in self.campaign.searches:
            summaries = [r.summary for r in self.results if r.key.search == name]
            for series in series_of(summaries):
                table = throughput_table(series, effort=True)
                self._recorder().progress.say(f"\nsearch {name!r}: {table.title}\n{table.text()}")


class IdleCapture:
    """The paper's CPU-idle capture at one (setup, cores): runs full-length trials at the median rate of the
    [idle] method's search with per-second CPU samples, then stores their per-second mean."""

    def __init__(self, recorder: Recorder, results: list[ConfigResult], session: SetupSession,
                 stored: dict[str, Record]) -> None:
        self.campaign, self.recorder, self.session, self.stored = recorder.campaign, recorder, session, stored
        name, _ = self.campaign.idle_search()
        wanted = ConfigKey(session.spec.name, session.cores, name, self.campaign.idle.method,
                           session.sessions)
        self.source = next((r for r in results if r.key == wanted), None)

    def run(self) -> None:
        c, setup, cores = self.campaign, self.session.spec.name, self.session.cores
        rate = self._rate()
        if rate is None:
            self.recorder.progress.say(f"{setup}, {cores} core(s): no idle capture, the {c.idle.method} "
                                       "search gave no median rate")
            return
        done = {run: self._one_run(run, rate) for run in range(1, c.idle.runs + 1)}
        excluded = [{"run": run, "why": why} for run, (_, _, why) in done.items() if why is not None]
        runs = [(samples, hosts) for samples, hosts, why in done.values() if why is None]
        hosts = per_host_means([host_samples for _, host_samples in runs])
        keys = [idle_run_key(setup, cores, run, self.session.sessions) for run in range(1, c.idle.runs + 1)]
        mean = IdleMean(key=idle_mean_key(setup, cores, self.session.sessions),
                        context=self.recorder.context_of(keys, self.session),
                        rate_qps=rate, runs=len(runs), interval_s=c.idle.interval_s,
                        per_second=mean_per_second([samples for samples, _ in runs]), hosts=hosts,
                        excluded=excluded, rate_of=self._rate_of())
        self.recorder.append(mean)
        left_out = "".join(f"; run {e['run']} left out ({e['why']})" for e in excluded)
        source = mean.rate_of
        shown = rate_text(rate, source.lower_bound, source.partial) if source else f"{rate:,.0f}"
        self.recorder.progress.say(f"{setup}, {cores} core(s): idle capture done, {len(runs)} of "
                                   f"{len(done)} runs averaged at {shown} queries/s{left_out}")
        # The report's verdict, from the store as the report reads it (one rule: analysis.bottleneck), of
        # this capture's own join key (analysis.joinkey).
        key = (setup, cores, mean.context.sessions, source.search if source else "",
               source.method if source else "")
        found = [e for e in evidence_from(list(self.recorder.store.records()))
                 if (e.setup, e.cores, e.sessions, e.search, e.method) == key and e.topology != "loopback"]
        if found and not self.session.env.simulated:
            self.recorder.progress.say(verdict(found[-1]).text())

    def _rate(self) -> float | None:
        # A search that never failed still gives a rate the chain carried; the paper's idle capture needs
        # only that (its record says the rate is a lower bound of the throughput).
        source = self.source
        if source is None or source.repeated.summary is None or \
                source.repeated.status not in (OK, UPPER_NOT_FAILED):
            return None
        return float(round(source.repeated.summary.median))

    def _one_run(self, run: int, rate: float) -> tuple[list[dict[str, Any]], HostSamples, str | None]:
        """One idle run's CPU samples, per-host samples and why it stays out of the mean (None: it counts):
        from the store, or measured now and stored."""
        c, session, runner = self.campaign, self.session, self.session.runner
        duration, rest = c.idle_timing()
        key = idle_run_key(session.spec.name, session.cores, run, session.sessions)
        self.recorder.progress.idle_run_planned(duration + rest)
        stored = self.stored.get(key)
        if isinstance(stored, IdleRun):
            runner.owe_rest(rest)
            return stored.samples, stored.hosts, idle_run_exclusion(stored.result)
        self.recorder.progress.status(f"{session.spec.name} cores={session.cores} idle capture "
                                      f"{run}/{c.idle.runs}")
        measurer = runner.ensure_measurer()
        rest_taken = runner.take_rest()
        started = runner.clock.now()
        try:
            result, samples, hosts = self._measure(measurer, duration, rate)
        except (ComponentFailure, TesterError) as err:  # a void idle run: stored as such, with its cause
            self.recorder.append(TrialFailed(
                key=trial_failed_key(key, "idle", utc_now()), context=self.recorder.context(session),
                failure={"kind": type(err).__name__, "reason": str(err), "idle_run": run}))
            raise
        wall = runner.clock.now() - started
        runner.owe_rest(rest)
        self.recorder.append(IdleRun(
            key=key, context=self.recorder.context(session), run=run, rate_qps=rate,
            interval_s=c.idle.interval_s, rate_source=self._rate_source(),
            result={**result.to_dict(with_raw=False), "rest_before_s": rest_taken}, samples=samples,
            raw=result.raw, note="simulated time: no CPU samples" if session.env.simulated else None,
            hosts=hosts, rate_of=self._rate_of()))
        self.recorder.progress.advance(self.recorder.progress.trial_time_s(session.spec.name, duration,
                                                                          rest_taken, wall))
        return samples, hosts, idle_run_exclusion(result.to_dict(with_raw=False))

    def _measure(self, measurer: Measurer, duration: float, rate: float
                 ) -> tuple[TrialResult, list[dict[str, Any]], HostSamples]:
        """The trial with this machine's CPU sampled, and each host's where the environment has hosts of
        its own (a real testbed's DUTs: started before, collected after). This machine's samples are cut to
        the tester's send schedule, as the hosts' are: the sampler also spans the tester's start-up, its
        drain and the counter reads around the trial, which are not the load being measured."""
        env = self.session.env
        sampler = CpuSampler(self.campaign.idle.interval_s)
        if not env.simulated:
            sampler.start()
            env.start_host_idle()
        hosts: HostSamples = None
        result: TrialResult | None = None
        try:
            result = measurer.measure(duration, rate)
        finally:
            samples = [] if env.simulated else sampler.stop()
            if not env.simulated:
                hosts = env.collect_host_idle(result)
        assert result is not None
        window = trial_window(result.raw, result.duration_s)
        if window is not None:
            samples = samples_within(samples, window, "t_wall", self.campaign.idle.interval_s)
        return result, samples, hosts

    def _rate_of(self) -> RateOf:
        """The search whose median the runs offer, and whether that median is a lower bound or over fewer
        repetitions than were run (analysis marks the idle and latency rate so)."""
        assert self.source is not None and self.source.repeated.summary is not None
        name, settings = self.campaign.idle_search()
        repeated = self.source.repeated
        return RateOf(search=name, method=repeated.method, lower_bound=repeated.status == UPPER_NOT_FAILED,
                      partial=repeated.summary.n < settings.repetitions)

    def _rate_source(self) -> str:
        assert self.source is not None
        name, _ = self.campaign.idle_search()
        repeated = self.source.repeated
        return f"median of {repeated.method} search {name!r}" + (
            " (a lower bound: the search never failed)" if repeated.status == UPPER_NOT_FAILED else "")


def per_host_means(runs: list[HostSamples]) -> HostSamples:
    """Per host, the per-second mean of its samples over the runs (None when no run has per-host ones)."""
    hosts = sorted({host for run in runs if run for host in run})
    if not hosts:
        return None
    return {host: mean_per_second([run[host] for run in runs if run and host in run]) for host in hosts}


def _tester(tester: TesterOptions) -> dict[str, Any]:
    data = asdict(tester)
    data["extra_args"] = list(tester.extra_args)
    return data


def sessions_text(sessions: int | None) -> str:
    """", S tester sessions" in a sessions sweep, else nothing: how messages name a sweep's point."""
    return "" if sessions is None else f", {sessions} tester sessions"


def _differs(stored: Provenance, current: Provenance) -> bool:
    """Another suite commit, host, MLRsearch library version or tester build. A tester build unknown on
    either side matches any: not yet known before a run's first trial, and never known in a record of a trial
    voided before its tester reported (a trial-failed record)."""
    return (stored.suite, stored.host, stored.library) != (current.suite, current.host, current.library) or \
        (None not in (current.tester, stored.tester) and stored.tester != current.tester)


def _trial_keys(outcomes: tuple[SearchOutcome, ...] | list[SearchOutcome]) -> list[str]:
    return [trial_key(t.search_id, t.step) for o in outcomes for t in o.trials]


def _repetition(search_id: str) -> int:
    return int(search_id.rsplit("/rep", 1)[1])


def completed_searches(stored: list[Record],
                       replay: dict[tuple[str, int], TrialRecord]) -> dict[str, SearchOutcome]:
    """The searches a store holds as finished (a search record and all its trials), by search id; one whose
    trials are not all there is searched again, replaying those it has."""
    by_search: dict[str, list[TrialRecord]] = {}
    for key in sorted(replay):
        by_search.setdefault(key[0], []).append(replay[key])
    out: dict[str, SearchOutcome] = {}
    for record in stored:
        if isinstance(record, SearchEntry):
            sid = record.outcome["search_id"]
            trials = tuple(by_search.get(sid, ()))
            if len(trials) == record.outcome["trials"]:
                out[sid] = SearchOutcome.from_dict(record.outcome, trials)
    return out


def _trial_record(entry: TrialEntry) -> TrialRecord:
    """A stored trial as the search's replay takes it."""
    result = TrialResult.from_dict({**entry.result, "raw": entry.raw})
    return TrialRecord(entry.search.id, entry.search.step, entry.search.phase, entry.search.lower_qps,
                       entry.search.upper_qps, entry.verdict, result, entry.rest_before_s, entry.wall_s)
