"""XDP on a real testbed, proven against the SSH hosts of sshnet (four namespaces running sshd): a campaign
with `[tester] io = "xdp"` (xlatperf's AF_XDP flows and reply filter on the client host's test interface), and
one with Knot in XDP mode on the server host's test interface (`[server] io = "xdp"`) through a bpf chain,
whose PLAT computes the checksum Knot 3.2 leaves at 0 in IPv4.

Each meets a known answer: nftables drops exactly every 50th query on its way to Knot (on the server host's
input; in Knot's XDP mode the queries never reach netfilter there, so on dut2's forward path), so the stored
trials, in the order they ran, lose exactly ceil(S_k / 50) - ceil(S_(k-1) / 50) queries each (S_k: queries
sent up to trial k). Then the campaign's process group is killed with SIGKILL inside a 30 s trial, while
the tester runs on and its program (and Knot's) is attached; `testbed down` ends the tester, detaches both
programs through the journal lines `up` wrote, and every host matches its snapshot: addresses, routes, links,
rules, sysctls, the XDP state of every link, and the kernel's XDP program ids (bpftool).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sshnet import ROLES, SshHosts, sh
from test_testbed_bpf import bpf_inventory, kernel_has
from test_testbed_ssh import RUN_CLI, assert_as_before, setup_on_testbed, tayga_inventory, write_campaign

from xlatbench import xdp
from xlatbench.cli import main
from xlatbench.paths import build_dir

pytestmark = [pytest.mark.root, pytest.mark.slow]
EVERY = 50  # nftables drops every 50th query on its way to Knot (`numgen inc`)
LONG_S = 30  # the trial the campaign is killed in
TESTER_PROGRAM, KNOT_PROGRAM = "xlb_reply_filt", "xdp_redirect_dn"


def drop_rule(prefix: str, hook: str, iface: str) -> str:
    """nftables script: drop every EVERY-th UDP/53 packet on `hook`, arriving on (input) or leaving by
    (forward) `iface`."""
    match = "iifname" if hook == "input" else "oifname"
    return (f"table inet {prefix}drop {{\nchain drop_q {{\n"
            f"type filter hook {hook} priority 0; policy accept;\n"
            f"{match} \"{iface}\" udp dport 53 numgen inc mod {EVERY} == 0 drop\n}}\n}}\n")


def xdp_state(hosts: SshHosts) -> dict[str, list[str]]:
    """Per host, every XDP program on its links (`ip -j -d link`)."""
    return {role: [p.text() for p in xdp.attached(hosts.netns(role))] for role in ROLES}


def xdp_program_ids() -> set[int]:
    """The kernel's XDP programs (this machine's: the hosts share its kernel)."""
    out = sh("bpftool", "-j", "prog", "list")
    return {int(p["id"]) for p in json.loads(out or "[]") if p.get("type") == "xdp"}


def long_trial_running(hosts: SshHosts) -> bool:
    """The client host runs a tester of the long search (its --duration is LONG_S)."""
    for pid in sh("ip", "netns", "pids", hosts.netns("client"), check=False).split():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if "--duration" in args and float(args[args.index("--duration") + 1]) == LONG_S:
            return True
    return False


def attached(hosts: SshHosts, role: str, program: str) -> xdp.Attached | None:
    return next((p for p in xdp.attached(hosts.netns(role)) if p.program == program), None)


def run_until_the_long_trial_then_kill(campaign: Path, hosts: SshHosts,
                                       programs: dict[str, str]) -> dict[str, xdp.Attached]:
    """Run the campaign until its long trial runs with every program of `programs` (role -> name)
    attached, then SIGKILL its process group; -> the programs found attached."""
    controller = subprocess.Popen([sys.executable, "-c", RUN_CLI, "campaign", "run", "--no-progress",
                                   str(campaign)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True)
    found: dict[str, xdp.Attached] = {}
    try:
        deadline = time.monotonic() + 180
        while not (long_trial_running(hosts) and len(found) == len(programs)):
            if controller.poll() is not None:
                pytest.fail(f"the campaign ended before its long trial: {controller.stderr.read()[-2000:]}")
            assert time.monotonic() < deadline, "no long trial with its XDP programs attached"
            found = {role: a for role, name in programs.items() if (a := attached(hosts, role, name))}
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
        controller.stderr.close()
    return found


def check_known_answer(store: Path) -> list[dict]:
    """The stored trials of the first search, in the order they ran, against the drop rule."""
    records = [json.loads(line) for line in store.read_text().splitlines()]
    trials = [r for r in records if r["type"] == "trial"]
    assert trials, "no trial stored before the long one"
    sent_before = 0
    for record in sorted(trials, key=lambda r: r["written_utc"]):
        trial = record["trial"]
        assert trial["sent"] == round(trial["rate_qps"] * trial["duration_s"]), trial
        io, found = record["raw"]["io"], record["dut"]["preflight"]["hosts"]["client"]["xdp"]
        assert (io["mode"], io["interface"], io["xdp_mode"]) == ("xdp", "eth1", "native"), io
        assert io["next_hop"]["mac"] == found["next_hop"]["mac"]  # what up resolved, xlatperf used
        sent_after = sent_before + trial["sent"]
        dropped = math.ceil(sent_after / EVERY) - math.ceil(sent_before / EVERY)
        assert trial["sent"] - trial["valid"] == dropped, (sent_before, trial)
        sent_before = sent_after
    return trials


def down_after_the_kill(hosts: SshHosts, inventory: Path, capsys: pytest.CaptureFixture[str],
                        found: dict[str, xdp.Attached]) -> dict:
    for role, program in found.items():  # the killed campaign's tester runs on; knotd too
        assert attached(hosts, role, program.program) == program, role
    assert main(["testbed", "down", str(inventory)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["client"]["stopped_testers"]) == 1
    for role, program in found.items():
        assert report[role]["failed"] == [], report[role]
        assert any(program.program in line for line in report[role]["undone"]), report[role]
    return report


def assert_xdp_as_before(hosts: SshHosts, xdp_before: dict[str, list[str]], ids_before: set[int],
                         found: dict[str, xdp.Attached]) -> None:
    assert xdp_state(hosts) == xdp_before
    for role, program in found.items():
        assert not kernel_has("prog", program.program_id), f"{role}: {program.text()} still loaded"
    deadline = time.monotonic() + 3
    while xdp_program_ids() != ids_before and time.monotonic() < deadline:
        time.sleep(0.1)  # the kernel frees a detached program after an RCU grace period
    assert xdp_program_ids() == ids_before


def test_xdp_tester_campaign_known_answer_then_down_after_kill(hosts: SshHosts, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """[tester] io = "xdp" on the client host (tayga chain, Knot on sockets): preflight checks the client for
    XDP and refuses an interface that carries another program; trials meet the drop rule exactly."""
    inventory = tayga_inventory(hosts, tmp_path)
    subprocess.run(["ip", "netns", "exec", hosts.netns("server"), "nft", "-f", "-"],
                   input=drop_rule(hosts.prefix, "input", "eth1"), text=True, check=True)
    before, xdp_before, ids_before = hosts.snapshot(), xdp_state(hosts), xdp_program_ids()
    other = Path(os.environ.get("XLATBENCH_BUILD") or build_dir()) / "dnsperf" / "xdp_pass.bpf.o"
    sh("ip", "-n", hosts.netns("client"), "link", "set", "dev", "eth1", "xdpgeneric", "obj", str(other),
       "sec", "xdp")
    assert main(["testbed", "check", "--tester-io", "xdp", str(inventory)]) == 1
    problems = [line for line in capsys.readouterr().out.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1 and "client: eth1 already carries an XDP program (other_pass" in problems[0], \
        problems
    assert "`ip link set dev eth1 xdp off`" in problems[0]
    sh("ip", "-n", hosts.netns("client"), "link", "set", "dev", "eth1", "xdpgeneric", "off")
    assert main(["testbed", "check", "--json", "--tester-io", "xdp", str(inventory)]) == 0
    found_xdp = json.loads(capsys.readouterr().out)["hosts"]["client"]["xdp"]
    assert found_xdp["root"] and found_xdp["af_xdp"], found_xdp
    assert found_xdp["interfaces"]["eth1"]["expected_mode"] == "native"  # veth

    campaign, store = write_campaign(tmp_path, "xdp-tester", setup_on_testbed(inventory), max_rate=2000,
                                     tester='io = "xdp"', long_trial_s=LONG_S)
    found = run_until_the_long_trial_then_kill(campaign, hosts, {"client": TESTER_PROGRAM})
    trials = check_known_answer(store)
    for record in trials:
        assert record["tester"]["options"]["io"] == "xdp"
        assert record["dut"]["server_io"] == "socket"
    down_after_the_kill(hosts, inventory, capsys, found)
    assert_as_before(hosts, before, tmp_path)
    assert_xdp_as_before(hosts, xdp_before, ids_before, found)


def test_knot_xdp_through_a_bpf_chain_known_answer_then_down_after_kill(
        hosts: SshHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[server] io = "xdp" (and the tester's AF_XDP) through the bpf 464XLAT chain: Knot answers on the server
    host's test NIC in XDP mode, the server's kernel UDP sees no query, every record says so."""
    inventory = bpf_inventory(hosts, tmp_path)
    subprocess.run(["ip", "netns", "exec", hosts.netns("dut2"), "nft", "-f", "-"],
                   input=drop_rule(hosts.prefix, "forward", "eth2"), text=True, check=True)
    before, xdp_before, ids_before = hosts.snapshot(), xdp_state(hosts), xdp_program_ids()
    campaign, store = write_campaign(tmp_path, "xdp-knot", setup_on_testbed(inventory), max_rate=2000,
                                     tester='io = "xdp"', extra='[server]\nio = "xdp"\n', long_trial_s=LONG_S)
    found = run_until_the_long_trial_then_kill(campaign, hosts, {"client": TESTER_PROGRAM,
                                                                 "server": KNOT_PROGRAM})
    for record in check_known_answer(store):
        dut = record["dut"]
        assert dut["server_io"] == "xdp" and dut["knot"]["io"] == "xdp", dut["knot"]
        assert dut["knot"]["xdp"]["listen"] == "eth1@53"
        assert dut["knot"]["xdp"]["attached"]["program_id"] == found["server"].program_id
        counters = record["trial"]["dut_stats"]["counters"]
        assert counters["server:udp"]["InDatagrams"] == 0, counters["server:udp"]  # XDP took every query
    down_after_the_kill(hosts, inventory, capsys, found)
    assert_as_before(hosts, before, tmp_path)
    assert_xdp_as_before(hosts, xdp_before, ids_before, found)
