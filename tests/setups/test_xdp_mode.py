"""XDP on the suite's interfaces, end to end. Needs root.

Knot in XDP mode as the echo server: a campaign with `[server] io = "xdp"` measures the emulated baseline,
with the tester on sockets and on AF_XDP (`[tester] io = "xdp"`: both ends in XDP); every trial up to a
modest rate answers every query, and the known answer that XDP (not the kernel's UDP stack) answered is the
server namespace's UDP counter: it stays at zero while thousands of queries are answered. Every record says
which io each end used. Then: a program left attached by a process killed with SIGKILL (knotd's, the
tester's reply filter through xdp_probe on a plain veth and through xlatperf `--io xdp` on an emulated
chain's client veth, and the one kxdpgun leaves even when it ends normally) is detached by `xlatbench setup
down`, the kernel frees it (bpftool no longer finds its id) and nothing of the prefix is left.

Through a translator: Knot's XDP mode sends its IPv4 replies with UDP checksum 0; with bpf as the PLAT
(464XLAT) or the BR (MAP-T) they come through, `setup check` passes and a trial gets every reply valid, the
known answer being bpf's own count of checksums it computed: exactly the replies it translated, each one
received by the tester. (Which chains refuse it: tests/setups/test_backends.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trials import explain_loss
from xdplink import SERVER_V4, TESTER_V4, attached_program, xdp_link

from xlatbench import xdp
from xlatbench.data.records import SearchEntry, TrialEntry
from xlatbench.data.store import ResultStore
from xlatbench.paths import build_dir
from xlatbench.paths import tester_binary as xlatperf_binary  # not "test*": pytest would collect it
from xlatbench.scripts.xlatperf import TesterOptions, flows, source_first_port, xlatperf_argv
from xlatbench.setups.chain import client_interface
from xlatbench.setups.counters import udp_counters
from xlatbench.setups.emulation import leftovers
from xlatbench.setups.emulation.check import check
from xlatbench.setups.emulation.cleanup import down
from xlatbench.setups.emulation.names import read_pid
from xlatbench.zones import KnotConfig, KnotServer, query_name

pytestmark = [pytest.mark.root]

CAMPAIGN = """
[campaign]
name = "knotxdp"
methods = ["rfc8219-binary"]
cores = [1]

[search]
max_rate_qps = 4000
error_qps = 1000
duration_s = 1
rest_s = 0.2
repetitions = 1

[tester]
sender_cpus = "0"
receiver_cpus = "0"
io = "TESTER_IO"

[server]
io = "xdp"

[[setup]]
name = "baseline"
kind = "chain"
topology = "baseline"
options = { prefix = "PREFIX", knot_cpus = [1] }
"""


def _xlatbench(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("xlatbench")), *args]


def _setup_down(prefix: str) -> dict:
    done = subprocess.run(_xlatbench("setup", "down", "--prefix", prefix), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _program_exists(program_id: int) -> bool:
    done = subprocess.run(["bpftool", "prog", "show", "id", str(program_id)], capture_output=True,
                          check=False)
    return done.returncode == 0


@pytest.mark.parametrize("tester_io", ["socket", "xdp"])
def test_a_campaign_with_knot_in_xdp_mode_answers_every_query_and_says_so(tester_io, prefix, tmp_path):
    file, store = tmp_path / "c.toml", tmp_path / "c.jsonl"
    file.write_text(CAMPAIGN.replace("PREFIX", prefix).replace("TESTER_IO", tester_io))
    try:
        argv = _xlatbench("campaign", "run", str(file), "--store", str(store), "--no-progress")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    finally:
        down(prefix)
    records = [r.to_json() for r in ResultStore(store).records()]
    assert records
    assert all(r["dut"]["server_io"] == "xdp" and r["dut"]["knot"]["io"] == "xdp" for r in records)
    assert all(r["tester"]["options"]["io"] == tester_io for r in records)
    assert records[0]["dut"]["knot"]["xdp"]["attached"]["mode"] == "native"  # veth: native XDP here
    trials = [r for r in ResultStore(store).records() if isinstance(r, TrialEntry)]
    assert trials
    for trial in trials:
        assert trial.raw is not None and trial.raw["io"]["mode"] == tester_io, trial.raw
        if tester_io == "xdp":  # xlatperf's own io block: its program on the client's veth, no drops
            assert trial.raw["io"]["interface"] == "enp5s0f0" and trial.raw["io"]["tester_drops"] == 0
        result = trial.to_json()["trial"]
        assert result["sent"] >= 0.99 * result["rate_qps"] * result["duration_s"], result
        assert result["valid"] == result["sent"], result
        counters = result["dut_stats"]["counters"]
        # Knot's XDP program took every query before the kernel's UDP stack: its counter did not move.
        assert counters["server:udp"]["InDatagrams"] == 0, counters["server:udp"]
        assert counters["server:udp"]["OutDatagrams"] == 0, counters["server:udp"]
    searches = [r for r in ResultStore(store).records() if isinstance(r, SearchEntry)]
    assert [s.to_json()["search"]["status"] for s in searches] == ["upper-bound-not-failed"]
    assert leftovers(prefix) == []


def test_setup_down_detaches_the_program_of_a_killed_knotd(chain_factory, prefix):
    chain = chain_factory("baseline", knot_io="xdp")
    program = chain.describe()["knot"]["xdp"]["attached"]
    assert program["program"] == "xdp_redirect_dn"
    os.kill(read_pid(chain.emulation.knot.pidfile) or 0, signal.SIGKILL)
    _setup_down(prefix)  # knotd's workdir names the interface: its stale-server sweep detaches the program
    assert not _program_exists(program["program_id"])
    assert leftovers(prefix) == []


def test_knotd_in_xdp_mode_answers_over_the_veth_and_its_program_goes_with_it(prefix, tmp_path):
    with xdp_link(prefix) as link:
        before = _udp_in(link.netns)
        config = KnotConfig(listen=((SERVER_V4, 53),), xdp_interface=link.inner)
        with KnotServer(tmp_path / "knot", config, netns=link.netns) as knot:
            program = knot.xdp_program()
            assert program is not None and program.program == "xdp_redirect_dn" and program.mode == "native"
            ready = _udp_in(link.netns)  # the readiness query went to knotd's socket over loopback
            for i in range(20):
                dig = subprocess.run(["kdig", f"@{SERVER_V4}", "+retry=0", "+timeout=2", "+short",
                                      f"010-000-000-{i:03d}.dns64perf.test", "AAAA"],
                                     capture_output=True, text=True, check=False)
                assert dig.stdout.strip() == f"2001:db8::a00:{i:x}", dig.stdout + dig.stderr
            assert _udp_in(link.netns) == ready > before  # 20 answers, none through the kernel's UDP
        assert xdp.attached(link.netns, link.inner) == []  # stop detached it (knotd leaves it attached)
        assert not _program_exists(program.program_id)


def test_a_killed_knotds_program_is_detached_by_the_next_stop(prefix, tmp_path):
    with xdp_link(prefix) as link:
        knot = KnotServer(tmp_path / "knot", KnotConfig(listen=((SERVER_V4, 53),), xdp_interface=link.inner),
                          netns=link.netns)
        knot.start()
        program = knot.xdp_program()
        assert program is not None
        os.kill(knot.pid or 0, signal.SIGKILL)
        knot.stop()
        assert xdp.attached(link.netns, link.inner) == []
        assert not _program_exists(program.program_id)


def _udp_in(netns: str) -> int:
    return int(udp_counters(netns, "s")["s:udp"]["InDatagrams"])


def test_setup_down_detaches_the_reply_filter_of_a_killed_tester(prefix):
    probe_path = build_dir() / "dnsperf" / "xdp_probe"
    assert probe_path.is_file(), f"{probe_path} is not built: make build"
    with xdp_link(prefix) as link:
        argv = [str(probe_path), "--interface", link.outer, "--server", SERVER_V4, "--source",
                f"{TESTER_V4},20000-20999", "--rate", "100", "--queries", "100000"]
        probe = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert probe.stderr is not None
        line = probe.stderr.readline()
        probe.kill()  # SIGKILL: no destructor detaches the program
        probe.wait()
        assert "attached" in line, line + probe.stderr.read()
        left = attached_program(link.outer)
        assert left is not None and left["prog"]["name"] == "xlb_reply_filt"
        program_id = int(left["prog"]["id"])
        removed = _setup_down(prefix)
    assert f"xlb_reply_filt (id {program_id}, native) on {link.outer} in the root namespace" in \
        removed["xdp_programs"], removed
    assert not _program_exists(program_id)
    links = subprocess.run(["ip", "-d", "link"], capture_output=True, text=True, check=True).stdout
    assert link.outer not in links and "xlb_reply_filt" not in links
    assert leftovers(prefix) == []


def test_setup_down_detaches_the_reply_filter_of_a_killed_xlatperf_in_a_chain(chain_factory, prefix,
                                                                               tmp_path):
    """xlatperf --io xdp in the emulated baseline's client namespace, placed by the suite's own rule (the
    chain's tester_place), killed with SIGKILL mid-trial: `setup down` detaches its reply filter from the
    client's veth and the kernel frees it."""
    chain = chain_factory("baseline")
    options = TesterOptions(io="xdp", ports_per_thread=4)
    place = chain.tester_place(options.io, flows(options), source_first_port(options))
    argv = xlatperf_argv(xlatperf_binary(), chain.server_address, 100, 60, options, tmp_path / "r.json",
                         place)
    netns, interface = chain.emulation.netns_of["client"], client_interface(chain.emulation.topology)
    tester = subprocess.Popen(chain.client_argv(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 20
        while not xdp.attached(netns, interface) and tester.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        left = xdp.attached(netns, interface)
    finally:
        tester.kill()  # SIGKILL: no destructor detaches the program
        _, stderr = tester.communicate()
    assert [p.program for p in left] == ["xlb_reply_filt"], stderr
    assert xdp.attached(netns, interface) == left, "the killed tester's program stays attached"
    removed = _setup_down(prefix)
    assert f"{left[0].text()} in {netns}" in removed["xdp_programs"], removed
    assert not _program_exists(left[0].program_id)
    assert leftovers(prefix) == []


def test_setup_down_detaches_the_program_kxdpgun_leaves(prefix, tmp_path):
    queries = tmp_path / "queries"
    queries.write_text("".join(f"{query_name(i)} AAAA\n" for i in range(100)))
    with xdp_link(prefix) as link:
        argv = ["kxdpgun", "-t", "1", "-Q", "100", "-I", link.outer, "-i", str(queries), SERVER_V4]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        left = attached_program(link.outer)  # kxdpgun ends without detaching its program
        assert left is not None and left["prog"]["name"] == "xdp_redirect_dn", left
        program_id = int(left["prog"]["id"])
        removed = _setup_down(prefix)
    assert any(line.startswith(f"xdp_redirect_dn (id {program_id}, ") and link.outer in line
               for line in removed["xdp_programs"]), removed
    assert not _program_exists(program_id)
    assert leftovers(prefix) == []


@pytest.mark.parametrize(("topology", "backend", "provider"),
                         [("464xlat", "clat=tayga,plat=bpf", "dut2"), ("mapt", "bpf", "dut2")])
def test_bpf_computes_the_checksums_knot_xdp_leaves_out(topology, backend, provider, chain_factory, trial):
    """5 000 queries at 2 000 q/s through the chain with Knot in XDP mode: all valid, and the PLAT's or BR's
    bpf program computed one checksum per reply it translated, as many as the tester received."""
    chain = chain_factory(topology, backend=backend, knot_io="xdp")
    assert chain.describe()["server_io"] == "xdp"
    verdict = check(chain.emulation)
    assert verdict["ok"], verdict["failures"]
    result = trial(chain, 2000, 2.5, extra=("--send-tolerance-abs", "0.05", "--max-lag", "0.2"))
    totals, deltas = result["totals"], result["chain_deltas"]
    assert totals["sent"] == 5000
    assert totals["valid"] == totals["received"] == totals["sent"], explain_loss(result)
    assert deltas["server:udp"]["InDatagrams"] == 0, "Knot's XDP program answered, not the kernel's UDP"
    program = deltas[f"{provider}:translator"]
    assert program["udp_zero_checksum_computed"] == program["translated_4to6"] == totals["received"], program
    assert program["drop_udp_zero_checksum"] == 0
    print(f"{topology} ({backend}), Knot in XDP mode: sent {totals['sent']}, valid {totals['valid']}, "
          f"{provider} bpf computed {program['udp_zero_checksum_computed']} UDP checksums")

