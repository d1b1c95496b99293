"""One xlatperf trial through an emulated chain for the emulation tests, and what a failure message says
about a trial that lost queries (the tester's counts and every hop's drops during it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from xlatbench.analysis.drops import losses
from xlatbench.scripts.measurers import counter_deltas
from xlatbench.scripts.xlatperf import TesterOptions, flows, source_first_port, xlatperf_argv
from xlatbench.setups.emulation import EmulatedChain
from xlatbench.setups.emulation.names import rundir

# These trials test paths and counts, not latency: a reply may wait for a CPU of this shared 2-vCPU VM for
# a few hundred ms now and then (a CI run once counted one reply of 10 000 missing at 0.25 s), so a reply
# has a second to come back before it counts as late.
REPLY_TIMEOUT_S = 1.0


def run_trial(
    chain: EmulatedChain,
    tester: Path,
    rate: int,
    duration: float,
    threads: int = 1,
    ports_per_thread: int = 10,
    extra: tuple[str, ...] = (),
    io: str = "socket",
) -> dict:
    """One xlatperf trial from the client namespace; returns its JSON document, with the chain's counter
    changes over the trial (every hop's counters, the translators' own included) under `chain_deltas`.
    io: the tester's --io; its command line comes from the suite's own rule (xlatperf_argv with the chain's
    tester_place), as a campaign's would."""
    before = chain.counters()
    out = rundir(chain.prefix) / f"trial-{rate}-{duration}.json"
    options = TesterOptions(threads=threads, ports_per_thread=ports_per_thread, timeout_s=REPLY_TIMEOUT_S,
                            io=io, extra_args=extra)
    place = chain.tester_place(io, flows(options), source_first_port(options))
    argv = xlatperf_argv(tester, chain.server_address, rate, duration, options, out, place)
    done = subprocess.run(
        chain.client_argv(argv), capture_output=True, text=True, timeout=duration + 60, check=False
    )
    assert done.returncode == 0, f"tester failed: {done.stderr.strip()}"
    result = json.loads(out.read_text())
    assert result["io"]["mode"] == io, result["io"]
    result["chain_deltas"] = counter_deltas(before, chain.counters())
    return result


def explain_loss(result: dict) -> str:
    """What a failure message says about a trial that lost queries: the tester's non-zero counts and the
    chain's drop and error counters that moved during it."""
    counts = {key: value for key, value in result["totals"].items() if value and not isinstance(value, dict)}
    details = {key: {k: v for k, v in value.items() if v} for key, value in result["totals"].items()
               if isinstance(value, dict) and any(value.values())}
    hops = losses(result.get("chain_deltas") or {})
    return f"tester counts {counts | details}; chain drops/errors during the trial {hops}"
