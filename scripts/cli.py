"""Subcommands of the measurement part: `campaign run|plan FILE`, `search`, `trial`, `search-bench`."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..analysis.procedures import compliance
from ..cpulist import cpu_list_arg
from ..data.records import implementation_label, steal_note
from .bench import DutStress, print_comparison, real, simulated
from .campaign import (
    CampaignRun,
    estimate_search_s,
    estimate_search_trials,
    idle_configurations,
    idle_estimate_s,
    idle_runs,
    planned_searches,
    procedures_estimate_s,
    sessions_text,
    stateful_points,
)
from .campaignfile import Campaign, check_outstanding, load_campaign, parse_campaign
from .environments import registry
from .environments.registry import make_environment
from .methodbench import PLAN_TESTER_FRACTION, opening_trials, print_seed_sets, print_suite, seed_sets
from .overhead import default_overhead, idle_overhead_s, setup_overheads, trials_overhead_s
from .search import METHODS, MLRSEARCH, RFC8219, SearchSettings, check_method, verdict
from .stateful.procedures import expected_cps
from .stateful.procedures import procedure_time_s as stateful_time_s
from .xlatperf import TESTER_IO, TesterOptions


def register(subparsers: argparse._SubParsersAction) -> None:
    campaign = subparsers.add_parser("campaign", help="run a campaign file unattended (resumable)")
    actions = campaign.add_subparsers(dest="campaign_action", required=True)
    run = actions.add_parser("run", help="run (or resume) a campaign; results go to its JSON Lines store")
    run.add_argument("file", type=Path, help="campaign TOML file (see campaigns/demo.toml)")
    run.add_argument("--store", type=Path, help="results store (default: the file's [campaign] store)")
    run.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")
    run.add_argument("--allow-mixed", action="store_true",
                     help="let a resume add records of another suite commit, tester build or host (the "
                          "report marks the mixed cells)")
    run.set_defaults(func=_campaign_run)
    plan = actions.add_parser("plan", help="print what a campaign would run and roughly how long")
    plan.add_argument("file", type=Path)
    plan.add_argument("--dut-cores", type=int, metavar="N",
                      help="plan as if every setup's DUTs had N cores (e.g. 16 for a real testbed; default: "
                           "what they have here)")
    plan.set_defaults(func=_campaign_plan)

    search = subparsers.add_parser("search", help="one throughput search (repeated), every trial stored")
    _dut_args(search)
    _search_args(search)
    search.add_argument("--method", type=_method, default=RFC8219,
                        metavar="{" + ",".join([*METHODS, "both"]) + "}",
                        help="RFC 8219 binary search, MLRsearch (RFC 9971), or both (default: %(default)s)")
    search.add_argument("--store", type=Path,
                        help="results store (default: results/search-UTCSTAMP.jsonl)")
    search.add_argument("--no-progress", action="store_true")
    search.set_defaults(func=_search)

    trial = subparsers.add_parser("trial", help="one trial at one rate; prints its result as JSON")
    _dut_args(trial)
    trial.add_argument("--rate", type=_positive, required=True, help="query rate, queries/s")
    trial.add_argument("--duration", type=_positive, default=60.0, help="trial duration, s (default: 60)")
    trial.add_argument("--loss-ratio", type=float, default=1e-4, help="pass criterion (default: 1e-4)")
    trial.set_defaults(func=_trial)

    bench = subparsers.add_parser("search-bench",
                                  help="RFC 8219 vs MLRsearch (RFC 9971) side by side (prints only)")
    _dut_args(bench, default_kind="fake")
    _search_args(bench)
    bench.add_argument("--seeds", type=int, default=3, help="simulated runs with different noise seeds")
    bench.add_argument("--suite", action="store_true",
                       help="fake only: RFC 8219 and MLRsearch on the simulated DUT set (noise "
                            "0/1/2 %%, a deep queue, a gradual loss curve; --capacity is their capacity): a "
                            "Markdown table")
    bench.add_argument("--campaign", type=Path, metavar="FILE",
                       help="MLRsearch with the first [search] of this campaign file (its goals) "
                            "instead of the search options above")
    bench.add_argument("--rfc-campaign", type=Path, metavar="FILE",
                       help="the RFC 8219 search with the first [search] of this campaign file "
                            "(also the known answers' trial duration) instead of the search options above")
    bench.add_argument("--seed", type=int, default=1,
                       help="--suite: first noise seed of the simulated DUTs (default: %(default)s)")
    bench.add_argument("--seed-sets", type=int, default=1, metavar="N",
                       help="--suite: run the DUT set N times (first seeds SEED, SEED + 1000, ...): the "
                            "first table in full, then the criteria over all N x 5 rows and each row that "
                            "disagrees (default: %(default)s)")
    bench.set_defaults(func=_bench)


# -- arguments -----------------------------------------------------------------------------------
def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value


def _method(text: str) -> str:
    """--method: a method the suite runs, or "both"; a retired one is refused with its reason."""
    if text == "both":
        return text
    try:
        return check_method(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _cpu_text(text: str) -> str:
    """A CPU list for the tester, checked now in its grammar and passed on as written."""
    cpu_list_arg(text)
    return text


def _dut_args(parser: argparse.ArgumentParser, default_kind: str | None = None) -> None:
    g = parser.add_argument_group("what to measure")
    g.add_argument("--dut", choices=registry.names(), default=default_kind, required=default_kind is None,
                   help=_dut_help())
    g.add_argument("--inventory", help="testbed: the TOML inventory of its four hosts (docs/testbed.md)")
    g.add_argument("--topology", default="baseline", help="chain: baseline | 464xlat | mapt")
    g.add_argument("--chain-option", action="append", default=[], metavar="KEY=VALUE",
                   help="chain: option for the setups factory (repeatable), e.g. prefix=xb1")
    g.add_argument("--chain-factory", help="chain: module:function that yields a Chain")
    g.add_argument("--cores", type=int, default=1, help="DUT cores (default: 1)")
    g.add_argument("--capacity", type=_positive, default=165403.0,
                   help="fake: capacity at one core, queries/s (default: the paper's 464XLAT 1-core median)")
    g.add_argument("--noise", type=float, default=0.005, help="fake: per-trial capacity noise, fraction")
    g.add_argument("--buffer", type=float, default=5000.0, help="fake: queue absorbing bursts, queries")
    g.add_argument("--background-loss", type=float, default=0.00002,
                   help="fake: share of queries lost at random at any rate (default: 0.00002 = 0.002 %%)")
    g.add_argument("--trial-start-loss", type=_count, default=0, metavar="N",
                   help="fake: queries lost at the start of every trial, whatever its rate and duration "
                        "(default: %(default)s)")
    g.add_argument("--tester-limit", type=_positive, metavar="R",
                   help="fake: the most the simulated tester can send, queries/s; trials above it are "
                        "tester-limited (default: unlimited)")
    g.add_argument("--capacity-drop", type=float, default=0.0, metavar="FRACTION",
                   help="fake: the capacity falls by this fraction once a trial has run --drop-after "
                        "seconds (default: %(default)s)")
    g.add_argument("--drop-after", type=_positive, default=30.0, metavar="S",
                   help="fake: seconds into a trial after which --capacity-drop applies "
                        "(default: %(default)s)")
    g.add_argument("--realtime", action="store_true",
                   help="fake: trials really take their duration (default: simulated time, instant)")
    g.add_argument("--knot-cpus", type=cpu_list_arg, help="loopback: CPUs for knotd, e.g. 1")
    t = parser.add_argument_group("tester (xlatperf)")
    d = TesterOptions()
    t.add_argument("--port", type=int, default=d.port, help="DNS server port (default: %(default)s)")
    t.add_argument("--threads", type=int, default=d.threads,
                   help="sender/receiver thread pairs (default: %(default)s; paper: 16)")
    t.add_argument("--ports-per-thread", type=int, default=d.ports_per_thread,
                   help="source ports per sender (default: %(default)s; paper: 100)")
    t.add_argument("--timeout", type=_positive, default=d.timeout_s,
                   help="answer timeout, s (default: %(default)s)")
    t.add_argument("--sender-cpus", type=_cpu_text,
                   help="CPU list for sender threads, e.g. 0 or 0-1 (default: unpinned)")
    t.add_argument("--receiver-cpus", type=_cpu_text,
                   help="CPU list for receiver threads, e.g. 0 or 0-1 (default: unpinned)")
    t.add_argument("--io", choices=TESTER_IO, default=d.io,
                   help="how queries leave and replies arrive: UDP sockets, or AF_XDP on the client's "
                        "interface (chain only; one thread pair, fixed ports; default: %(default)s)")


def _search_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("search")
    g.add_argument("--min-rate", type=float, default=0.0, help="lower bound, queries/s (default: 0)")
    g.add_argument("--max-rate", type=_positive, default=1_000_000.0, help="upper bound, queries/s")
    g.add_argument("--error", type=_positive, help="stop width, queries/s (default 500 w/o --error-ratio)")
    g.add_argument("--error-ratio", type=float, help="stop width as a fraction of the lower bound")
    g.add_argument("--loss-ratio", type=float, default=1e-4, help="highest passing loss (default: 1e-4)")
    g.add_argument("--duration", type=_positive, default=60.0, help="full trial, s (default: 60)")
    g.add_argument("--rest", type=float, default=10.0, help="rest after a full trial, s (default: 10)")
    g.add_argument("--repetitions", type=int, default=10, help="searches to run (default: 10)")
    g.add_argument("--short-duration", type=_positive, default=5.0,
                   help="MLRsearch: initial trial duration of its preceding targets and the 'short' goal's "
                        "trial, s (default: %(default)s)")
    g.add_argument("--short-rest", type=float, default=2.0,
                   help="rest after a trial shorter than --duration, s (default: %(default)s)")


def _setup_table(args: argparse.Namespace) -> dict[str, Any]:
    """The [[setup]] table --dut and its kind's options describe (the kind writes it)."""
    return registry.kind(args.dut, "--dut").command_line_table(args)


def _dut_help() -> str:
    """--dut's help: every registered kind with what it is."""
    said = [f"{name} ({registry.kind(name).summary})" for name in registry.names()]
    return f"{', '.join(said[:-1])} or {said[-1]}"


def _tester_table(args: argparse.Namespace) -> dict[str, Any]:
    table = {"port": args.port, "threads": args.threads, "ports_per_thread": args.ports_per_thread,
             "timeout_s": args.timeout}
    if args.sender_cpus:
        table["sender_cpus"] = args.sender_cpus
    if args.receiver_cpus:
        table["receiver_cpus"] = args.receiver_cpus
    if args.io != TesterOptions.io:
        table["io"] = args.io
    return table


def _search_table(args: argparse.Namespace) -> dict[str, Any]:
    table: dict[str, Any] = {"min_rate_qps": args.min_rate, "max_rate_qps": args.max_rate,
                             "loss_ratio": args.loss_ratio, "duration_s": args.duration, "rest_s": args.rest,
                             "repetitions": args.repetitions, "short_duration_s": args.short_duration,
                             "short_rest_s": args.short_rest}
    if args.error is None and args.error_ratio is None:
        args.error = 500.0
    if args.error is not None:
        table["error_qps"] = args.error
    if args.error_ratio is not None:
        table["error_ratio"] = args.error_ratio
    return table


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGINT tear down like Ctrl-C (environments are left in `finally` blocks).

    A SIGINT that is ignored (a background job of a non-interactive shell) stays ignored: SIGTERM is enough.
    After the first signal, further ones are ignored so they cannot cut the teardown short.
    """
    def handler(signum: int, frame: object) -> None:
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is handler:
                signal.signal(sig, signal.SIG_IGN)
        print(f"\n{signal.Signals(signum).name}: stopping the trial and tearing the environment down",
              file=sys.stderr, flush=True)
        raise KeyboardInterrupt

    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        if previous[sig] is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action if action is not None else signal.SIG_DFL)


def run_campaign(run: CampaignRun) -> int:
    """Run (or resume) a campaign; Ctrl-C and errors end it cleanly with a word on how to resume."""
    with _sigterm_as_interrupt():
        try:
            results = run.run()
        except KeyboardInterrupt:
            print(f"\ninterrupted: {run.new_trials} new trial(s) stored in {run.campaign.store}, the "
                  "environment was torn down; run the same command again to resume", file=sys.stderr)
            return 130
        except (OSError, RuntimeError, ValueError) as err:
            print(f"xlatbench {run.campaign.name}: {err} ({run.new_trials} new trial(s) stored in "
                  f"{run.campaign.store}; fix the cause and run the same command again to resume)",
                  file=sys.stderr)
            return 1
    if not results and not run.stateful_results:
        print(f"xlatbench {run.campaign.name}: measured nothing: no core count of "
              f"{list(run.campaign.cores)} could run on any setup (see the skipped core counts above)",
              file=sys.stderr)
        return 1
    print(f"results: {run.campaign.store} ({run.new_trials} new trials)", file=sys.stderr)
    return 0


# -- commands ------------------------------------------------------------------------------------
def _campaign_run(args: argparse.Namespace) -> int:
    campaign = load_campaign(args.file, args.store)
    return run_campaign(CampaignRun(campaign, progress=not args.no_progress, allow_mixed=args.allow_mixed))


def _campaign_plan(args: argparse.Namespace) -> int:
    campaign = load_campaign(args.file)
    envs = {s.name: make_environment(s, campaign.tester) for s in campaign.setups}
    if args.dut_cores is not None and args.dut_cores < 1:
        raise ValueError(f"--dut-cores must be at least 1, got {args.dut_cores}")
    planned = {name: (args.dut_cores, None) if args.dut_cores else env.plan_cores()
               for name, env in envs.items()}
    cores_of = {name: count for name, (count, _) in planned.items()}
    plan = planned_searches(campaign, cores_of)
    measured = setup_overheads(campaign.store, envs)
    overheads = {name: found or default_overhead(campaign.setup(name).kind, campaign.tester.timeout_s)
                 for name, found in measured.items()}
    total = extra_total = opening_total = 0.0
    print(f"campaign {campaign.name!r} -> {campaign.store}")
    for note in (note for _, note in planned.values() if note):
        print(f"  {note}")
    for key in plan:
        settings = campaign.settings(key.search)
        estimate = estimate_search_s(settings, key.method)
        opening = opening_trials(settings, key.method)
        extra = trials_overhead_s(overheads[key.setup],
                                  estimate_search_trials(settings, key.method) + opening[1])
        total += estimate + opening[0] + (extra or 0.0)
        extra_total += extra or 0.0
        opening_total += opening[0]
        print(f"  {key.setup} ({campaign.setup(key.setup).kind}), {key.cores} core(s)"
              f"{sessions_text(key.sessions)}, "
              f"search {key.search!r}, {key.method}: {settings.repetitions} repetitions, "
              f"~{_hours(estimate)} of trials" + _opening_text(opening[0]) + _overhead_text(extra))
    if campaign.idle.runs:
        idle = idle_estimate_s(campaign, plan)
        runs = idle_runs(campaign, plan)
        extra_idle = sum(idle_overhead_s(overheads[name], runs.get(name, 0)) or 0.0 for name in envs)
        total += idle + extra_idle
        extra_total += extra_idle
        print(f"  idle capture: {campaign.idle.runs} runs x {idle_configurations(plan)} configurations, "
              f"~{_hours(idle)}" + _overhead_text(extra_idle))
    procedures = procedures_estimate_s(campaign, plan)
    per_point = sum(spec.trials() for spec in campaign.procedures)
    extra_procedures = sum(trials_overhead_s(overheads[name], per_point * points) or 0.0
                           for name, points in _points(plan).items())
    total += procedures + extra_procedures
    extra_total += extra_procedures
    for spec in campaign.procedures:
        print(f"  {spec.kind} procedure: {spec.repetitions} repetitions x {len(spec.fractions)} step(s) of "
              f"{spec.duration_s:g} s x {idle_configurations(plan)} configurations"
              + (f" ({note})" if (note := compliance(spec.kind, spec.repetitions, spec.duration_s)) else ""))
    stateful = _stateful_plan(campaign, cores_of)
    total += stateful
    for name, found in overheads.items():
        print(f"  per-trial overhead of {name}: {found.per_trial_s:.2f} s ({found.source})")
    searches = sum(estimate_search_s(campaign.settings(k.search), k.method) for k in plan)
    idle_total = idle_estimate_s(campaign, plan) if campaign.idle.runs else 0.0
    print(f"searches: ~{_hours(searches)} of trials; opening trials above the tester's reach: "
          f"~{_hours(opening_total)}; idle capture: ~{_hours(idle_total)}; RFC 8219 procedures: "
          f"~{_hours(procedures)}; RFC 9693 procedures: ~{_hours(stateful)}; overhead beyond the trials: "
          f"~{_hours(extra_total)}; total: ~{_hours(total)} (all of them; simulated setups take no real "
          "time; every search estimated by simulating it on a DUT at a quarter of max_rate_qps, 1 % "
          f"per-trial noise; opening trials: with a tester that sends at most "
          f"{100 * PLAN_TESTER_FRACTION:.0f} % of max_rate_qps)"
          + (f"; as if the DUTs had {args.dut_cores} cores" if args.dut_cores else ""))
    return 0


def _stateful_plan(campaign: Campaign, cores_of: dict[str, int]) -> float:
    """Print each RFC 9693 procedure's time at each (setup, cores, point) and return their sum, s."""
    if campaign.stateful is None:
        return 0.0
    counts = {s.name: [c for c in campaign.cores if c <= cores_of[s.name]] for s in campaign.setups}
    searches = dict(campaign.searches)
    total = 0.0
    for setup, cores, point in stateful_points(campaign, counts):
        for spec in (s for s in campaign.stateful.procedures if point.runs(s)):
            seconds, how = stateful_time_s(spec, point, searches, expected_cps(campaign.stateful))
            total += seconds
            table, hashes = point.table.max_connections, point.table.hash_size
            print(f"  {setup}, {cores} core(s), {point.connections:,} connections (table "
                  f"{table or 'as found'}, hash {hashes or 'as found'}): {spec.kind}, "
                  f"{point.repetitions_of(spec)} repetitions: ~{_hours(seconds)} ({how})")
    return total


def _points(plan: list[Any]) -> dict[str, int]:
    """Per setup, its (cores, sessions) points: where the idle capture and the procedures run."""
    return {setup: len({(k.cores, k.sessions) for k in plan if k.setup == setup})
            for setup in {k.setup for k in plan}}


def _opening_text(extra: float) -> str:
    return "" if extra < 1 else f" + ~{_hours(extra)} opening trials above the tester's reach"


def _overhead_text(extra: float | None) -> str:
    return "" if not extra else f" + ~{_hours(extra)} overhead"


def _hours(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _one_config_campaign(args: argparse.Namespace, methods: list[str], store: Path) -> CampaignRun:
    data = {"campaign": {"name": f"{args.command}", "methods": methods, "cores": [args.cores]},
            "search": {"name": "cli", **_search_table(args)},
            "idle": {"runs": 0, "method": methods[0]},  # no idle capture; its method must be one searched
            "tester": _tester_table(args), "setup": [_setup_table(args)]}
    return CampaignRun(parse_campaign(data, "<command line>", store), progress=not args.no_progress)


def _search(args: argparse.Namespace) -> int:
    methods = [RFC8219, MLRSEARCH] if args.method == "both" else [args.method]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    store = args.store or Path(f"results/search-{stamp}.jsonl")
    return run_campaign(_one_config_campaign(args, methods, store))


def _trial(args: argparse.Namespace) -> int:
    data = {"campaign": {"name": "trial", "cores": [args.cores]},
            "search": {"name": "cli", "max_rate_qps": args.rate + 1, "error_qps": 1},
            "tester": _tester_table(args), "setup": [_setup_table(args)]}
    campaign = parse_campaign(data, "<command line>")
    env = make_environment(campaign.setups[0], campaign.tester)
    if args.cores > env.max_cores():
        raise ValueError(f"--cores {args.cores}: the DUTs have only {env.max_cores()} core(s)")
    with _sigterm_as_interrupt():
        env.up()
        try:
            applied = env.set_cores(args.cores)
            result = env.measurer().measure(args.duration, args.rate)
            judged = verdict(result, args.loss_ratio)
            print(json.dumps({"verdict": judged, "trial": result.to_dict(with_raw=False), "cores": applied,
                              "dut": env.describe(), "tester_version": env.tester_version(),
                              "tester_io": (result.raw or {}).get("io")}, indent=2))  # xlatperf's own block
            notes = [*result.reasons, *filter(None, [steal_note(result.host_steal_pct)])]
            print(f"{result.rate_qps:.0f} queries/s for {result.duration_s:g} s: {judged}, "
                  f"loss {100 * result.loss_ratio:.4f} % ({result.lost} of {result.sent} queries)"
                  f"{'; ' + '; '.join(notes) if notes else ''}", file=sys.stderr)
        finally:
            env.down()
    return 0


def _stress(args: argparse.Namespace) -> DutStress:
    """The simulated DUT's fixed per-trial loss, tester limit and capacity drop from the command line."""
    if not 0 <= args.capacity_drop < 1:
        raise ValueError(f"--capacity-drop must be a fraction in [0, 1), got {args.capacity_drop}")
    return DutStress(args.trial_start_loss, args.tester_limit, args.capacity_drop, args.drop_after)


def _bench(args: argparse.Namespace) -> int:
    settings = SearchSettings(**_search_table(args))
    if args.suite:
        if args.dut != "fake":
            raise ValueError("--suite runs on simulated DUTs only: use --dut fake")
        rfc = load_campaign(args.rfc_campaign).searches[0][1] if args.rfc_campaign else settings
        mlr = load_campaign(args.campaign).searches[0][1] if args.campaign else settings
        if args.seed_sets < 1:
            raise ValueError(f"--seed-sets must be at least 1, got {args.seed_sets}")
        results = seed_sets(args.capacity, rfc, args.seed, args.seed_sets, args.buffer, args.background_loss,
                            mlr, _stress(args))
        print_suite(results[0][1], rfc, sys.stdout, mlr if mlr is not rfc else None)
        if args.seed_sets > 1:
            print(file=sys.stdout)
            print_seed_sets(results, sys.stdout)
        return 0
    if args.seed != 1 or args.seed_sets != 1:
        raise ValueError("--seed and --seed-sets go with --suite")
    rfc = load_campaign(args.rfc_campaign).searches[0][1] if args.rfc_campaign else settings
    mlr = load_campaign(args.campaign).searches[0][1] if args.campaign else None
    if args.dut == "fake":
        for seed in range(1, args.seeds + 1):
            print_comparison(simulated(args.capacity, args.noise, args.buffer, rfc, seed,
                                       args.background_loss, mlr, _stress(args)), sys.stdout)
        return 0
    data = {"campaign": {"name": "bench", "cores": [args.cores]}, "search": {"name": "cli", "max_rate_qps": 2,
                                                                          "error_qps": 1},
            "tester": _tester_table(args), "setup": [_setup_table(args)]}
    campaign = parse_campaign(data, "<command line>")
    for name, searched in (("RFC 8219", rfc), ("MLRsearch", mlr)):
        if searched is not None:  # before hours of trials, not at the first trial above the tester's limit
            check_outstanding(name, searched, campaign.tester,
                              sockets_option="--threads x --ports-per-thread")
    env = make_environment(campaign.setups[0], campaign.tester)
    with _sigterm_as_interrupt():
        env.up()
        try:
            applied = env.set_cores(args.cores)
            label = f"{implementation_label(env.describe())}; DUT cores {json.dumps(applied)}"
            reps = f"{rfc.repetitions} and {(mlr or rfc).repetitions}"
            print(f"{label}: both searches, {reps} repetitions; a line per trial", file=sys.stderr,
                  flush=True)
            print_comparison(real(label, env.measurer(), rfc, progress=sys.stderr, mlr_settings=mlr),
                             sys.stdout, time_kind="real")
        finally:
            env.down()
    return 0
