"""What the store holds beyond the throughput summaries, in the shapes the verdict, the latency table and the
per-DUT idle figures need: per configuration, the idle capture at the median rate (CPU samples, the DUTs'
translator CPU time, the tester's latency of each run), where each DUT ran, and the failing trial just above
the throughput rate (its drop counters show where the chain overflowed).

Built from the store's typed records (xlatbench.data.records, read by analysis.series.load_records):
`idle-mean`, `idle-run` and `trial`, and their Context envelope.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from ..data.records import Context, IdleMean, IdleRun, Record, TrialEntry, idle_run_exclusion
from ..setups.backends import USER_SPACE_SINGLE_THREAD, recorded_execution_model, recorded_queue_device
from ..setups.placement import OWN_HOSTS
from .drops import losses
from .joinkey import JoinKey, idle_key, rate_of, trial_key

# Columns of a CPU sample counted as kernel work (in-kernel NAT and forwarding run in softirq), %.
KERNEL_COLUMNS = ("sys", "irq", "softirq")


@dataclass(frozen=True)
class FailingTrial:
    """The failing trial with the lowest rate above the throughput rate.

    rate_qps: its offered rate, queries/s. loss_ratio: its loss, fraction. duration_s: its length, s.
    drops: per counter ("host:interface:counter"), increase during the trial, packets.
    translator_share: per DUT, its translator processes' CPU time over the trial, % of one CPU.
    """

    rate_qps: float
    loss_ratio: float
    duration_s: float
    drops: dict[str, float]
    translator_share: dict[str, float]


@dataclass(frozen=True)
class Evidence:
    """Everything recorded about one configuration while it carried its median rate.

    rate_qps: the median throughput rate the idle runs offered, queries/s. runs: idle runs, count.
    translator_share: per DUT, user-space translator CPU time, mean over the counted runs, % of one CPU.
    dut_cpus: per DUT, the CPUs it was confined to. test_cpus: CPUs the tester and Knot were pinned to
        (empty when not pinned or unknown).
    cpu_use: per CPU, mean over the runs and seconds of each /proc/stat column, %.
    per_second: the idle-mean record's per-second averages (xlatbench.cpuload.mean_per_second).
    failing: the failing trial just above rate_qps, or None when the store has none.
    single_threaded: a translator's recorded execution_model is one user-space thread per instance: one of
        them can use at most one CPU (None: a store from before execution_model was recorded, not known).
    queue_devices: per DUT, the device its translator's queue drops show on (tx_dropped), as its backend
        declares it (setups.backends.Declared, recorded in the translator's description).
    dut_cpu_use: per DUT, per CPU it was active on, mean over the runs and seconds of each /proc/stat
        column, % -- the one shape the verdict reads, from the DUT's own host on a testbed (the idle-mean
        record's `hosts`, cores online per hotplug) or from the shared machine's CPU sets in emulation.
    dut_per_second: per DUT, the per-second means of its CPUs (its host's, or the shared machine's).
    separate_hosts: each DUT's CPU figures are its own host's (a real testbed), not a shared machine's.
    share_runs: the idle runs translator_share averages, count (the counted runs that timed a translator).
    excluded: the idle runs left out of every figure here (idle mean, shares, latency), one "run N: why" each
        (IdleMean.excluded, or the one rule data.records.idle_run_exclusion for a record without it).
    roles: per DUT, the device its translator plays as the paper names it ("CLAT", "PLAT", "CE", "BR"), from
        the record's translators (`role`); a DUT without one is left out.
    unpinned: the parts of the test system ("tester", "Knot") that ran on this machine without a CPU pin
        (emulation): their threads may have run on a DUT's CPUs, so idle time there is not the DUT's alone.
    """

    setup: str
    topology: str
    cores: int
    rate_qps: float
    interval_s: float
    runs: int
    implementation: str
    emulated: bool
    translator_share: dict[str, float]
    dut_cpus: dict[str, tuple[int, ...]]
    test_cpus: tuple[int, ...]
    cpu_use: dict[str, dict[str, float]]
    per_second: list[dict[str, Any]] = field(default_factory=list)
    failing: FailingTrial | None = None
    single_threaded: bool | None = False
    queue_devices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sessions: int = 0
    search: str = ""
    method: str = ""
    rate_lower_bound: bool = False
    rate_partial: bool = False
    dut_cpu_use: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    dut_per_second: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    separate_hosts: bool = False
    unpinned: tuple[str, ...] = ()
    share_runs: int = 0
    excluded: tuple[str, ...] = ()
    roles: dict[str, str] = field(default_factory=dict)

    def dut_seconds(self, dut: str) -> list[tuple[int, dict[str, dict[str, float]]]]:
        """The DUT's active CPUs second by second: [(second, {cpu: {column: mean %}})], the seconds of the
        run in order (empty when no per-second samples were recorded)."""
        return _seconds(self.dut_per_second.get(dut) or [], self.dut_cpus.get(dut, ()))

    def test_seconds(self) -> list[tuple[int, dict[str, dict[str, float]]]]:
        """The tester's and Knot's pinned CPUs second by second, on this machine (emulation); empty on a
        real testbed (its client host is not sampled) or when they were not pinned."""
        return [] if self.separate_hosts else _seconds(self.per_second, self.test_cpus)


def _seconds(per_second: list[dict[str, Any]], cpus: tuple[int, ...]
             ) -> list[tuple[int, dict[str, dict[str, float]]]]:
    wanted = {str(c) for c in cpus}
    out = []
    for index, second in enumerate(per_second):
        rows = {cpu: values for cpu, values in (second.get("cpus") or {}).items() if cpu in wanted}
        if rows:
            out.append((int(second.get("second", index + 1)), rows))
    return out


@dataclass(frozen=True)
class Latency:
    """Latency at the median throughput rate, over the idle runs, each run's percentiles taken over all the
    queries it sent with late and lost ones counted as infinitely late (all_queries_percentile).

    typical_s: median of the per-trial medians, s. worst_s: median of the per-trial 99.9th percentiles, s;
    either is math.inf when more queries went unanswered in time than the percentile leaves out.
    typical_bound / worst_bound: the figure is a lower bound (the tester's histogram of valid replies gives
    the all-queries percentile only between two of its quantiles). unanswered_ratio: median over the trials
    of the queries without a valid reply in time, fraction. timeout_s: the tester's reply timeout, s.
    trials: trials with latency figures, count. resolution_s / relative_resolution: the tester histogram's
    resolution (absolute, s; relative, fraction of the value). measured: what the tester timed.
    """

    setup: str
    cores: int
    rate_qps: float
    implementation: str
    trials: int
    typical_s: float | None
    worst_s: float | None
    resolution_s: float | None
    relative_resolution: float | None
    measured: str
    sessions: int = 0
    search: str = ""
    method: str = ""
    rate_lower_bound: bool = False
    rate_partial: bool = False
    typical_bound: bool = False
    worst_bound: bool = False
    unanswered_ratio: float | None = None
    timeout_s: float | None = None


def evidence_from(records: list[Record]) -> list[Evidence]:
    """One Evidence per idle capture (`idle-mean` record) in the store, in store order; its runs and its
    failing trial are those of the same join key (analysis.joinkey)."""
    runs = [r for r in records if isinstance(r, IdleRun)]
    trials = [r for r in records if isinstance(r, TrialEntry)]
    out = []
    for mean in records:
        if isinstance(mean, IdleMean):
            key = _mean_key(mean, runs)
            out.append(_evidence(mean, key, [r for r in runs if idle_key(r).matches(key)],
                                 [t for t in trials if trial_key(t).matches(key)]))
    return out


def left_out(mean: IdleMean | None, runs: list[IdleRun]) -> dict[int, str]:
    """The idle runs left out of the idle mean and why, {run: why}: the ones the mean's record lists
    (`excluded`), or for a mean written before it listed them (or no mean) those the one rule
    (data.records.idle_run_exclusion) excludes. Every figure of a capture -- idle mean, translator
    shares, latency, the run count a verdict prints -- uses the runs not in it."""
    if mean is not None and mean.excluded is not None:
        return {int(e["run"]): str(e.get("why", "")) for e in mean.excluded if "run" in e}
    found = {run.run: idle_run_exclusion(run.result) for run in runs}
    return {run: why for run, why in found.items() if why is not None}


def counted_runs(mean: IdleMean | None, runs: list[IdleRun]) -> list[IdleRun]:
    """The runs `left_out` does not name."""
    out = left_out(mean, runs)
    return [run for run in runs if run.run not in out]


def _mean_key(mean: IdleMean, runs: list[IdleRun]) -> JoinKey:
    """An idle mean's key; one written before idle records named their search takes its runs'."""
    key = idle_key(mean)
    if key.search or key.method:
        return key
    return next((idle_key(r) for r in runs if idle_key(r).point == key.point), key)


def _evidence(mean: IdleMean, key: JoinKey, runs: list[IdleRun], trials: list[TrialEntry]) -> Evidence:
    context = mean.context
    translators = context.dut.get("translators") or {}
    rate = float(mean.rate_qps)
    source = rate_of(mean) if mean.rate_of is not None or not runs else rate_of(runs[0])
    dut_cpus, cpu_use = dut_cpu_sets(context), _cpu_use(mean.per_second)
    dropped = left_out(mean, runs)
    counted = [run for run in runs if run.run not in dropped]
    shares = [run.result for run in counted if _share(run.result)]
    if mean.hosts:  # a real testbed: each DUT's own host, its cores online for the capture
        per_second = {dut: list(mean.hosts.get(dut) or []) for dut in dut_cpus}
        use = {dut: {c: v for c, v in _cpu_use(per_second[dut]).items() if c in {str(n) for n in cpus}}
               for dut, cpus in dut_cpus.items()}
    else:
        per_second = {dut: mean.per_second for dut in dut_cpus}
        use = {dut: {str(c): cpu_use[str(c)] for c in cpus if str(c) in cpu_use}
               for dut, cpus in dut_cpus.items()}
    return Evidence(
        sessions=key.sessions, search=key.search, method=key.method,
        rate_lower_bound=source.lower_bound, rate_partial=source.partial,
        setup=context.setup_name, topology=context.setup.get("topology", context.setup.get("kind", "?")),
        cores=context.cores, rate_qps=rate, interval_s=float(mean.interval_s or 1.0),
        runs=mean.runs, implementation=context.tag, emulated="namespaces" in context.dut,
        translator_share=_mean_share(shares), share_runs=len(shares),
        excluded=tuple(f"run {run}: {why}" for run, why in sorted(dropped.items())),
        dut_cpus=dut_cpus, test_cpus=tester_cpus(context),
        cpu_use=cpu_use, per_second=mean.per_second,
        failing=failing_trial_above(trials, rate),
        single_threaded=single_threaded(translators),
        queue_devices={host: (device,) for host, info in translators.items()
                     if isinstance(info, dict) and (device := recorded_queue_device(info))},
        dut_cpu_use=use, dut_per_second=per_second, separate_hosts=bool(mean.hosts),
        roles={host: device_name(str(info["role"])) for host, info in translators.items()
               if isinstance(info, dict) and info.get("role")},
        unpinned=() if mean.hosts else unpinned_test_system(context),
    )


# A translator role (the topology's class name, as records carry it) as the paper names the device.
DEVICE_NAMES = {"Clat": "CLAT", "Plat": "PLAT", "MapCe": "CE", "MapBr": "BR"}


def device_name(role: str) -> str:
    name = role.removesuffix("Role")
    return DEVICE_NAMES.get(name, name)


def single_threaded(translators: dict[str, Any]) -> bool | None:
    """Whether a translator of the record runs one user-space thread per instance, from the
    `execution_model` each translator's description carries; None when a translator has none (a store
    written before it was recorded): not known, and the verdict says so."""
    models = [recorded_execution_model(t) for t in translators.values() if isinstance(t, dict)]
    if USER_SPACE_SINGLE_THREAD in models:
        return True
    return None if None in models else False


def _share(result: dict[str, Any]) -> dict[str, float]:
    duration = float(result.get("duration_s") or 0)
    cpu = (result.get("dut_stats") or {}).get("cpu_s") or {}
    return {dut: 100.0 * float(s) / duration for dut, s in cpu.items()} if duration > 0 else {}


def _mean_share(results: list[dict[str, Any]]) -> dict[str, float]:
    shares: dict[str, list[float]] = {}
    for result in results:
        for dut, share in _share(result).items():
            shares.setdefault(dut, []).append(share)
    return {dut: sum(v) / len(v) for dut, v in shares.items()}


def _drops(result: dict[str, Any]) -> dict[str, float]:
    """Per `hop:counter`, the increase of every loss counter (analysis.drops) that rose during the trial."""
    found = losses((result.get("dut_stats") or {}).get("counters") or {})
    return {f"{hop}:{name}": float(value)
            for hop, changes in found.items() for name, value in changes.items()}


def failing_trial_above(trials: list[TrialEntry], rate_qps: float) -> FailingTrial | None:
    """The failed (DUT-loss) trial with the lowest rate above `rate_qps`; full-length RFC 8219 trials are
    preferred to shorter ones (MLRsearch's, the retired fast search's). None when no trial above the rate
    failed."""
    failed = [t for t in trials if t.verdict == "fail" and float(t.result["rate_qps"]) > rate_qps]
    exact = [t for t in failed if t.search.rfc8219_exact]
    chosen = min(exact or failed, key=lambda t: float(t.result["rate_qps"]), default=None)
    if chosen is None:
        return None
    result = chosen.result
    return FailingTrial(rate_qps=float(result["rate_qps"]), loss_ratio=float(result.get("loss_ratio", 0.0)),
                        duration_s=float(result.get("duration_s") or 0), drops=_drops(result),
                        translator_share=_share(result))


def dut_cpu_sets(context: Context) -> dict[str, tuple[int, ...]]:
    """Per DUT, the CPUs its cpuset allowed (emulation: `applied.<dut>.cpus`) or that hotplug left online on
    its own host (testbed: `applied.<dut>.online`); {} when the record has no placement."""
    placement = context.dut_cpus or {}
    applied = placement.get("applied") if isinstance(placement, dict) else None
    if not isinstance(applied, dict):
        return {}
    return {dut: tuple(sorted(int(c) for c in (info.get("cpus") or info.get("online"))))
            for dut, info in sorted(applied.items())
            if isinstance(info, dict) and (info.get("cpus") or info.get("online"))}


def _cpus(text: Any) -> set[int]:
    if isinstance(text, int):
        return {text}
    if isinstance(text, list | tuple):
        return {int(c) for c in text}
    cpus: set[int] = set()
    for part in str(text or "").replace(" ", "").strip("[]").split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part.isdigit():
            cpus.add(int(part))
    return cpus


def tester_cpus(context: Context) -> tuple[int, ...]:
    """CPUs the tester's threads and Knot were pinned to, as recorded (empty when not pinned)."""
    options = context.tester.get("options") or {}
    setup = context.setup
    setup_options = setup.get("options") if isinstance(setup.get("options"), dict) else setup
    cpus = _cpus(options.get("sender_cpus")) | _cpus(options.get("receiver_cpus"))
    cpus |= _cpus(setup_options.get("knot_cpus"))
    return tuple(sorted(cpus))


def unpinned_test_system(context: Context) -> tuple[str, ...]:
    """"tester" when neither its sender nor its receiver CPUs were pinned, "Knot" when its CPUs were not,
    for a chain on this machine (a loopback or fake setup has no DUT CPUs to protect; a real testbed runs
    them on hosts of their own)."""
    if context.setup.get("kind") != "chain" or (context.dut_cpus or {}).get("placement") == OWN_HOSTS:
        return ()
    options = context.tester.get("options") or {}
    setup_options = context.setup.get("options") if isinstance(context.setup.get("options"), dict) else {}
    missing = []
    if not (_cpus(options.get("sender_cpus")) or _cpus(options.get("receiver_cpus"))):
        missing.append("tester")
    if not _cpus(setup_options.get("knot_cpus")):
        missing.append("Knot")
    return tuple(missing)


def shared_with_test_system(context: Context) -> tuple[int, ...]:
    """DUT CPUs of this record that the tester or Knot also ran on (emulation on a small machine): those
    pinned to both, and those the placement itself recorded as shared (it also counts an unpinned tester or
    Knot on the lowest CPU)."""
    placement = context.dut_cpus or {}
    if placement.get("placement") == OWN_HOSTS:
        return ()  # each DUT on its own host: the tester and Knot run elsewhere
    dut = set(placement.get("cpus") or [])
    for cpus in dut_cpu_sets(context).values():
        dut |= set(cpus)
    recorded = {int(c) for c in placement.get("shared_with_test_system") or []}
    return tuple(sorted(dut & set(tester_cpus(context)) | recorded))


def _cpu_use(per_second: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    columns: dict[str, dict[str, list[float]]] = {}
    for second in per_second:
        for cpu, values in (second.get("cpus") or {}).items():
            for column, value in values.items():
                columns.setdefault(cpu, {}).setdefault(column, []).append(float(value))
    return {cpu: {col: sum(v) / len(v) for col, v in cols.items()} for cpu, cols in columns.items()}


def latency_from(records: list[Record]) -> list[Latency]:
    """Latency per idle capture (one join key: analysis.joinkey), from the tester's JSON of each idle run
    (trials at the median rate) the idle mean counted (`counted_runs`); a capture whose runs were all left
    out has none."""
    runs: dict[JoinKey, list[IdleRun]] = {}
    means = [r for r in records if isinstance(r, IdleMean)]
    for record in records:
        if isinstance(record, IdleRun):
            runs.setdefault(idle_key(record), []).append(record)
    out = []
    for key, mine in runs.items():
        mean = next((m for m in means if _mean_key(m, mine).matches(key)), None)
        counted = counted_runs(mean, mine)  # the idle mean's own runs: excluded ones never count
        if counted:
            out.append(_latency(key, counted))
    return out


# The quantiles of valid replies the tester reports, and their keys in its "latency" object.
QUANTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999"), (1.0, "max"))


def all_queries_percentile(latency: dict[str, Any], sent: int, valid: int, q: float) -> tuple[float, bool]:
    """The q-quantile of every query's latency in one trial, queries without a valid reply in time (late,
    lost) counted as infinitely late: (seconds or math.inf, True when only a lower bound is known).

    With u = 1 - valid/sent unanswered, it is infinite when u > 1 - q; else it is the valid replies'
    q/(1 - u)-quantile, exact when the tester reports that quantile and otherwise at least the nearest one it
    reports below it. sent < 0: not recorded: the valid replies' q-quantile, a lower bound."""
    if sent < 0 and latency.get(_name(q)) is not None:
        return float(latency[_name(q)]), True
    if sent <= 0 or valid <= 0:
        return math.inf, False
    unanswered = 1.0 - valid / sent
    if unanswered > 1.0 - q:
        return math.inf, False
    wanted = q / (1.0 - unanswered)
    known = [(level, float(latency[name])) for level, name in QUANTILES if latency.get(name) is not None]
    exact = next((value for level, value in known if math.isclose(level, wanted, rel_tol=1e-9)), None)
    if exact is not None:
        return exact, False
    below = [value for level, value in known if level <= wanted]
    return (max(below) if below else 0.0), True


def _name(q: float) -> str:
    return next((name for level, name in QUANTILES if math.isclose(level, q)), "")


def _counts(run: IdleRun) -> tuple[int, int]:
    """(sent, valid) of an idle run; sent -1 when its record lacks the counts."""
    if "sent" not in run.result:
        return -1, 0
    return int(run.result["sent"]), int(run.result.get("valid", 0))


def _latency(key: JoinKey, runs: list[IdleRun]) -> Latency:
    with_docs = [(run, (run.raw or {}).get("latency") or {}) for run in runs]
    with_docs = [(run, d) for run, d in with_docs if d.get("p50") is not None]
    docs = [d for _, d in with_docs]
    typical = [all_queries_percentile(d, *_counts(run), 0.5) for run, d in with_docs]
    worst = [all_queries_percentile(d, *_counts(run), 0.999) for run, d in with_docs]
    counts = [_counts(run) for run, _ in with_docs]
    unanswered = [1.0 - valid / sent for sent, valid in counts if sent > 0]
    first = docs[0] if docs else {}
    timeout = ((runs[0].raw or {}).get("config") or {}).get("timeout_s") or \
        (runs[0].context.tester.get("options") or {}).get("timeout_s")
    source = rate_of(runs[0])
    return Latency(
        typical_bound=any(bound for _, bound in typical), worst_bound=any(bound for _, bound in worst),
        unanswered_ratio=statistics.median(unanswered) if unanswered else None,
        timeout_s=float(timeout) if timeout is not None else None,
        sessions=key.sessions, search=key.search, method=key.method,
        rate_lower_bound=source.lower_bound, rate_partial=source.partial,
        setup=key.setup, cores=key.cores, rate_qps=float(runs[0].rate_qps),
        implementation=runs[0].context.tag, trials=len(docs),
        typical_s=statistics.median(v for v, _ in typical) if typical else None,
        worst_s=statistics.median(v for v, _ in worst) if worst else None,
        resolution_s=first.get("resolution_s"), relative_resolution=first.get("relative_resolution"),
        measured=str(first.get("of", "")),
    )
