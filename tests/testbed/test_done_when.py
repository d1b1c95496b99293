"""Issue 22's "Done when", end to end on four sshd hosts (namespaces of this machine running Debian's sshd,
tests/testbed/sshnet.py) that carry state of their own, as real hosts do:

1. objects with every name the MAP-T and 464XLAT plans create (namespace, link, the translator's tun, nft
   table, address, route, an IPv4 default route where the plan routes IPv4 by default) and a stale tester
   pid file naming an unrelated process: `testbed check` refuses each in one line naming host and object;
2. with those removed (the stale pid file by `testbed down`, which spares the stranger), a snapshot of every
   host, then a MAP-T campaign (cores 1 and 2, idle capture) during whose first trial dut2's sshd is killed:
   the trial is void (a trial-failed record, neither a result nor DUT loss), the campaign stops with one line
   naming dut2; with dut2 back, `testbed down` and the same command again resume and measure that trial; the
   campaign's own teardown then leaves every host identical to its snapshot (diff printed otherwise),
   down to the affinity of each DUT's NIC IRQs (fake /proc and sysfs trees, as the inventory's proc_root and
   sysfs_root name them), which every trial's record shows spread over that core count's online CPUs.

What stays on the hosts throughout (and must come back exactly): IPv4 default routes on client, dut2 and
server, non-default per-interface sysctls (forwarding=1 on an unrelated interface, rp_filter/accept_ra/
hop_limit of the NIC MAP-T moves into its NAT44 namespace), a copy of the CE's SNAT rule in dut1's own
iptables (the plan makes its rule inside its own namespace: not a collision, must survive), and the
unrelated process. The report of the campaign's store plots each DUT host's own idle samples. The verdict
half of "Done when" (a store whose DUT hosts idle 20 % and 0.5 % names the second and plots both hosts, 70 %
and 75 % is "not determined") needs known idle figures, so it is the unit test on hand-built stores in
tests/analysis/test_testbed_verdict.py.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sshnet import ROLES, SshHosts, fake_irqs, fake_sysfs, irq_affinities, sh
from test_testbed_ssh import RUN_CLI, write_campaign

from xlatbench.analysis.report import write_report
from xlatbench.cli import main
from xlatbench.paths import build_dir
from xlatbench.setups.testbed.bringup import plan
from xlatbench.setups.testbed.inventory import load_inventory
from xlatbench.setups.testbed.preflight import planned_objects

pytestmark = [pytest.mark.root, pytest.mark.slow]

CPUS = 4  # each DUT host's fake sysfs; offline_cpus = [1, 2, 3]
# Each DUT's NIC IRQs (fake trees: msi_irqs under the fake sysfs, smp_affinity_list under a fake /proc) and
# the affinity each has before the campaign: not all the same, as an operator or irqbalance leaves them, so
# that `down` must put back each one's own value, not a common one.
NIC_IRQS = {"eth1": [40, 41], "eth2": [42]}
IRQ_AFFINITY = {"40": "0-3", "41": "2", "42": "1,3"}
UPLINK_GW = "198.51.100.254"  # the hosts' own IPv4 default gateway, on a veth pair inside each host
CE_SNAT = ["-t", "nat", "-A", "POSTROUTING", "-s", "192.168.0.0/24", "-o", "to_global", "-p", "udp",
           "-j", "SNAT", "--to-source", "192.0.2.8:55296-57343"]
@pytest.fixture
def inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    build = Path(os.environ.get("XLATBENCH_BUILD") or build_dir())
    for dut in ("dut1", "dut2"):
        fake_sysfs(tmp_path / "sys" / dut, CPUS)
        fake_irqs(tmp_path / "sys" / dut, tmp_path / "proc" / dut, NIC_IRQS)
        for irq, cpus in IRQ_AFFINITY.items():
            (tmp_path / "proc" / dut / "irq" / irq / "smp_affinity_list").write_text(f"{cpus}\n")
    return hosts.inventory(tmp_path / "testbed.toml", build, tmp_path / "sys", tmp_path / "run",
                           topology="mapt")


def in_ns(hosts: SshHosts, role: str, *argv: str) -> str:
    return sh("ip", "netns", "exec", hosts.netns(role), *argv)


# --- the hosts' own state ---------------------------------------------------------------------------------

def give_hosts_their_own_state(hosts: SshHosts) -> None:
    """What every real host has and the suite must leave alone: an uplink with an IPv4 default route, and on
    the DUTs per-interface sysctls the kernel's propagation or a NIC's move between namespaces would lose."""
    for n, role in enumerate(ROLES, 1):
        ns = hosts.netns(role)
        sh("ip", "-n", ns, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink1")
        sh("ip", "-n", ns, "address", "add", f"198.51.100.{n}/24", "dev", "uplink0")
        sh("ip", "-n", ns, "link", "set", "uplink0", "up")
        sh("ip", "-n", ns, "link", "set", "uplink1", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", UPLINK_GW, "dev", "uplink0")
    for key in ("net.ipv4.conf.uplink0.forwarding=1", "net.ipv6.conf.uplink0.forwarding=1"):
        in_ns(hosts, "dut2", "sysctl", "-qw", key)
        in_ns(hosts, "dut1", "sysctl", "-qw", key)
    for key in ("net.ipv4.conf.eth1.rp_filter=2", "net.ipv6.conf.eth1.accept_ra=0",
                "net.ipv6.conf.eth1.hop_limit=33", "net.ipv4.conf.eth1.arp_ignore=1"):
        in_ns(hosts, "dut1", "sysctl", "-qw", key)  # eth1: the NIC MAP-T moves into the CE's napt namespace
    in_ns(hosts, "dut1", "iptables", *CE_SNAT)


def run_in(ns: str | None, argv: list[str]) -> None:
    """`argv` in namespace `ns` (None: this machine's root namespace, where `ip netns add` works)."""
    if ns is None:
        sh(*argv)
    else:
        sh("ip", "netns", "exec", ns, *argv)


def add_collisions(hosts: SshHosts, napt: str) -> list[tuple[str | None, list[str]]]:
    """Objects named as the plans name theirs; returns how to remove each: (namespace, argv)."""
    dut1, dut2, client, server = (hosts.netns(r) for r in ("dut1", "dut2", "client", "server"))
    made = [
        (None, ["ip", "netns", "add", napt], ["ip", "netns", "del", napt]),
        (dut1, ["ip", "link", "add", "to_napt", "type", "veth", "peer", "name", "theirs"],
         ["ip", "link", "del", "to_napt"]),
        (dut2, ["ip", "tuntap", "add", "dev", "xlatbench64", "mode", "tun"],
         ["ip", "link", "del", "xlatbench64"]),
        (dut2, ["nft", "add", "table", "ip", "xlatbench_plat"],
         ["nft", "delete", "table", "ip", "xlatbench_plat"]),
        (dut2, ["ip", "route", "add", "192.0.2.0/24", "dev", "lo"],
         ["ip", "route", "del", "192.0.2.0/24", "dev", "lo"]),
        (server, ["ip", "address", "add", "203.0.113.56/32", "dev", "lo"],
         ["ip", "address", "del", "203.0.113.56/32", "dev", "lo"]),
        (client, ["ip", "route", "add", "203.0.113.0/24", "via", UPLINK_GW],
         ["ip", "route", "del", "203.0.113.0/24", "via", UPLINK_GW]),
    ]
    for ns, argv, _ in made:
        run_in(ns, argv)
    return [(ns, reverse) for ns, _, reverse in made]


def set_topology(inventory: Path, topology: str) -> None:
    inventory.write_text(re.sub(r'topology = "[^"]*"', f'topology = "{topology}"', inventory.read_text()))


def plans_default_route(inventory: Path, role: str) -> bool:
    """Whether the plan itself adds an IPv4 default route on `role` (then the host's own one collides; a
    plan that routes only the test networks to the translator leaves it alone)."""
    return any(kind == "route" and name == "-4 default"
               for kind, name, _ in planned_objects(plan(load_inventory(inventory))[role]))


def stale_tester_pid_file(inventory: Path, pid: int) -> Path:
    """The client's rundir as a controller killed mid-trial leaves it, but the tester has ended since and
    its pid now belongs to an unrelated process (the identity beside it does not match that process)."""
    inv = load_inventory(inventory)
    pidfile = Path(inv.rundir("client")) / "trial-7.pid"
    pidfile.parent.mkdir(parents=True)
    pidfile.write_text(f"{pid}\n")
    Path(f"{pidfile}.id").write_text("xlatperf 12345\n")
    return pidfile


# --- snapshots ---------------------------------------------------------------------------------------------

def _processes(hosts: SshHosts, role: str) -> str:
    """pid, name and command line of every process of the host but sshd and its sessions (the test's own
    instrument, restarted after it kills dut2's)."""
    rows = []
    for pid in sh("ip", "netns", "pids", hosts.netns(role), check=False).split():
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if not comm.startswith("sshd"):
            rows.append(f"{pid} {comm} {argv}")
    return "\n".join(sorted(rows))


def _tree(root: Path) -> str:
    """Every path under `root` with its file's size and sha256 (what the suite may write)."""
    if not root.exists():
        return "(absent)"
    rows = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            rows.append(f"{path.relative_to(root)} {len(data)} {hashlib.sha256(data).hexdigest()[:16]}")
        else:
            rows.append(f"{path.relative_to(root)}/")
    return "\n".join(rows) or "(empty)"


def _irq_affinity(tmp_path: Path, dut: str) -> str:
    """The DUT's NIC IRQs as the suite finds and manages them: `IRQ affinity-list` per line, read from the
    fake /proc the inventory's proc_root names (the machine's own /proc/irq is never the test's)."""
    return "\n".join(f"{irq} {cpus}" for irq, cpus in irq_affinities(tmp_path / "proc" / dut).items())


HOST_SECTIONS = {
    "addresses": "ip -o address | sed 's/ valid_lft.*//'",
    "routes": "ip -4 route show table all; ip -6 route show table all | grep -v ' proto kernel metric 256 '"
              " | grep -v '^local fe80'",
    # Without the qdisc: a link never up shows `noop`, the kernel attaches its default qdisc (`noqueue` on a
    # veth) at the first `up` and keeps it after `down`; no command puts `noop` back and nothing reads it.
    "links": "ip -o link | sed -e 's/link-netns[a-z]* [^ ]*//' -e 's/@[^:]*:/:/' -e 's/ qdisc [^ ]*//'",
    "nft": "nft list ruleset",
    "iptables": "iptables-save | grep -v '^#' | sed 's/\\[[0-9]*:[0-9]*\\]//'; "
                "ip6tables-save | grep -v '^#' | sed 's/\\[[0-9]*:[0-9]*\\]//'",
    "sysctls": "sysctl -a -r '^net[.]ipv[46][.](conf[.]|ip_forward)' 2>/dev/null",
}


def snapshot(hosts: SshHosts, tmp_path: Path) -> dict[str, dict[str, str]]:
    """Per host: addresses, routes, links, nft, iptables, every net.ipv4/ipv6.conf sysctl of every interface,
    processes; for this machine: the suite's namespaces, the files under the rundir (every host's files live
    there), each DUT's fake sysfs (CPU online states) and the affinity of its NIC IRQs (fake /proc)."""
    state = {role: {name: in_ns(hosts, role, "sh", "-c", script) for name, script in HOST_SECTIONS.items()}
             for role in ROLES}
    for role in ROLES:
        state[role]["processes"] = _processes(hosts, role)
    names = sh("ip", "netns", "list").split()
    state["machine"] = {
        "namespaces": " ".join(sorted(n for n in names if n.startswith(hosts.prefix))),
        "files under the rundir": _tree(tmp_path / "run"),
        "fake sysfs dut1": _tree(tmp_path / "sys" / "dut1") + "\n" + _online(tmp_path, "dut1"),
        "fake sysfs dut2": _tree(tmp_path / "sys" / "dut2") + "\n" + _online(tmp_path, "dut2"),
        "irq affinity dut1": _irq_affinity(tmp_path, "dut1"),
        "irq affinity dut2": _irq_affinity(tmp_path, "dut2"),
    }  # The controller's own SSH directories: test_testbed_ssh.py (other sessions make them meanwhile).
    return state


def _online(tmp_path: Path, dut: str) -> str:
    base = tmp_path / "sys" / dut / "devices" / "system" / "cpu"
    return " ".join(f"cpu{n}={(base / f'cpu{n}' / 'online').read_text().strip()}" for n in range(1, CPUS))


def differences(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> str:
    """A unified diff per host and section that changed (empty: identical)."""
    out = []
    for host in before:
        for section, text in before[host].items():
            new = after.get(host, {}).get(section, "(missing)")
            if new != text:
                out += difflib.unified_diff(text.splitlines(), new.splitlines(), f"{host} {section} before",
                                            f"{host} {section} after", lineterm="")
    return "\n".join(out)


def comparison(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> str:
    """The before/after comparison for a reader: per host and section, lines and verdict."""
    rows = []
    for host in before:
        parts = []
        for section, text in before[host].items():
            same = after[host][section] == text
            parts.append(f"{section} {len(text.splitlines())} line(s) {'identical' if same else 'DIFFERENT'}")
        rows.append(f"{host}: " + "; ".join(parts))
    return "\n".join(rows)


# --- the test ----------------------------------------------------------------------------------------------

def check_irqs_spread(trials: list[dict]) -> None:
    """Each trial's record says how each DUT's NIC IRQs were spread over its online CPUs at that core count
    (the changeable ones in turn, interface by interface) and what each had before the sweep."""
    spread = {1: {"eth1": {"40": "0", "41": "0"}, "eth2": {"42": "0"}},
              2: {"eth1": {"40": "0", "41": "1"}, "eth2": {"42": "0"}}}
    found = {"eth1": {"40": "0-3", "41": "2"}, "eth2": {"42": "1,3"}}
    for record in trials:
        cores = record["dut_cpus"]["cores"]
        for dut in ("dut1", "dut2"):
            irqs = record["dut_cpus"]["applied"][dut]["irqs"]
            assert irqs["online"] == list(range(cores)) and irqs["kernel_managed"] == [], irqs
            assert irqs["affinity"] == spread[cores] and irqs["before_sweep"] == found, (cores, dut, irqs)


def check_lines(inventory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["testbed", "check", str(inventory)])
    out, err = capsys.readouterr()
    return code, (out + err).splitlines()


def test_done_when(hosts: SshHosts, inventory: Path, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    """Collisions refused one line each; a campaign losing a DUT, resumed; every host as found (see above)."""
    napt = f"{hosts.prefix}-napt"
    give_hosts_their_own_state(hosts)
    stranger = subprocess.Popen(["ip", "netns", "exec", hosts.netns("client"), "sleep", "600"],
                                start_new_session=True)
    evidence: list[str] = []
    try:
        undo = add_collisions(hosts, napt)
        pidfile = stale_tester_pid_file(inventory, stranger.pid)
        refused_defaults: set[str] = set()
        # 1. check refuses each collision in one line naming host and object (MAP-T, then 464XLAT).
        expected = {
            "mapt": [f"dut1: namespace {napt} already exists", "dut1: link to_napt already exists",
                     "dut2: tun xlatbench64 already exists", "dut2: route -4 192.0.2.0/24 already exists",
                     "server: address 203.0.113.56/24 already exists (on lo)",
                     "client: route -4 203.0.113.0/24 already exists",
                     f"client: a previous run left state in {tmp_path}/run/{hosts.prefix}/client ("],
            "464xlat": ["dut2: tun xlatbench64 already exists",
                        "dut2: nft table ip xlatbench_plat already exists",
                        "server: address 203.0.113.56/24 already exists (on lo)",
                        "client: route -4 203.0.113.0/24 already exists",
                        f"client: a previous run left state in {tmp_path}/run/{hosts.prefix}/client ("],
        }
        for topology, wanted in expected.items():
            set_topology(inventory, topology)
            # A plan adding its own IPv4 default route meets the host's (today: tayga's CE/CLAT on dut1).
            defaults = [r for r in ROLES if plans_default_route(inventory, r)]
            refused_defaults.update(defaults)
            wanted = wanted + [f"{r}: route -4 default already exists" for r in defaults]
            code, lines = check_lines(inventory, capsys)
            problems = [line.removeprefix("problem: ") for line in lines if line.startswith("problem: ")]
            assert code == 1
            for start in wanted:
                assert sum(p.startswith(start) for p in problems) == 1, (start, problems)
            assert len(problems) == len(wanted), problems  # the hosts' own state is not refused
            assert "iptables" not in "\n".join(problems)  # the CE's rule lives in the plan's own namespace
            if topology == "mapt":
                evidence += ["== `xlatbench testbed check` on a MAP-T inventory, colliding host state ==",
                             *lines, ""]
        set_topology(inventory, "mapt")
        # 2. The collisions removed: the user's own objects by hand, the stale run by `testbed down`.
        for ns, argv in undo:
            run_in(ns, argv)
        for role in refused_defaults:
            sh("ip", "-n", hosts.netns(role), "route", "del", "default")
        assert main(["testbed", "down", str(inventory)]) == 0
        capsys.readouterr()
        assert not pidfile.exists() and stranger.poll() is None, "down ended a process it did not start"
        code, lines = check_lines(inventory, capsys)
        assert code == 0, lines
        evidence += ["== the same check with the collisions removed ==", *lines, ""]
        before = snapshot(hosts, tmp_path)
        assert f"{stranger.pid} sleep sleep 600" in before["client"]["processes"]
        assert "net.ipv4.conf.uplink0.forwarding = 1" in before["dut2"]["sysctls"]
        assert "net.ipv4.conf.eth1.rp_filter = 2" in before["dut1"]["sysctls"]
        assert "default via 198.51.100.254" in before["server"]["routes"]
        irqs_found = "\n".join(f"{irq} {cpus}" for irq, cpus in IRQ_AFFINITY.items())
        assert before["machine"]["irq affinity dut1"] == before["machine"]["irq affinity dut2"] == irqs_found
        # 3. A campaign at 1 and 2 cores with an idle capture; dut2 lost inside its first trial.
        setup = f'kind = "testbed"\ninventory = "{inventory}"\ntopology = "mapt"'
        campaign, store = write_campaign(tmp_path, "donewhen", setup, cores=(1, 2), max_rate=2000, idle_s=2,
                                         setup_name="mapt-testbed")
        argv = [sys.executable, "-c", RUN_CLI, "campaign", "run", "--no-progress", str(campaign)]
        started = time.monotonic()
        controller = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while not list((tmp_path / "run").rglob("trial-*.pid")):
            assert controller.poll() is None and time.monotonic() < started + 120, "no trial started"
            time.sleep(0.1)
        time.sleep(0.3)  # inside the trial
        hosts.kill_sshd("dut2")
        _, err = controller.communicate(timeout=120)
        assert controller.returncode == 1, err[-2000:]
        lost = [x for x in err.splitlines() if "the trial is void" in x]
        assert len(lost) == 1 and lost[0].startswith("xlatbench donewhen: dut2 (root@"), err[-2000:]
        evidence += ["== the campaign, dut2's sshd killed inside its first trial (its stderr) ==",
                     *err.strip().splitlines(), ""]
        stored = [json.loads(x) for x in store.read_text().splitlines()]
        assert not [r for r in stored if r["type"] in ("trial", "search", "summary")], "void trial stored"
        (failed,) = [r for r in stored if r["type"] == "trial-failed"]
        assert "dut2" in failed["failure"]["reason"], failed
        assert f"run `xlatbench testbed down {inventory}`" in lost[0]
        # The snapshot sees what the lost campaign left on dut2 (its teardown could not reach it).
        mid = differences(before, snapshot(hosts, tmp_path))
        for section in ("dut2 addresses", "dut2 routes", "dut2 links", "dut2 sysctls", "dut2 processes",
                        "machine files under the rundir", "machine fake sysfs dut2",
                        "machine irq affinity dut2"):
            assert f"--- {section} before" in mid, (section, mid)
        # reachable hosts were taken down by the campaign itself, their NIC IRQs' affinity restored too
        assert "--- dut1 " not in mid and "--- machine irq affinity dut1 " not in mid, mid
        # dut2's as the lost campaign's 1-core sweep spread them (CPU 0 the only one online)
        assert irq_affinities(tmp_path / "proc" / "dut2") == {"40": "0", "41": "0", "42": "0"}
        evidence += ["== sections differing while dut2 still carries the lost campaign ==",
                     ", ".join(re.findall(r"^--- (.*) before$", mid, re.MULTILINE)), ""]
        # 4. dut2 back: the same command refuses in one line until `testbed down` cleans dut2, then it
        # resumes and completes.
        hosts.restart_sshd("dut2")
        refused = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "dut2: the testbed is up" in refused.stderr and "testbed down" in refused.stderr
        assert main(["testbed", "down", str(inventory)]) == 0
        capsys.readouterr()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        stored = [json.loads(x) for x in store.read_text().splitlines()]
        trials = [r for r in stored if r["type"] == "trial"]
        assert {r["dut_cpus"]["cores"] for r in trials} == {1, 2}
        check_irqs_spread(trials)
        void = failed["failure"]["trial"]  # the trial under way when dut2 went: measured by the resume
        (again,) = [r for r in trials if r["search"]["id"] == void["search_id"]
                    and r["search"]["step"] == void["step"]]
        assert again["trial"]["rate_qps"] == void["rate_qps"] and again["written_utc"] > failed["written_utc"]
        assert again["trial"]["sent"] == void["rate_qps"] * void["duration_s"]
        means = [r for r in stored if r["type"] == "idle-mean"]
        assert len(means) == 2 and all(set(m["hosts"]) == {"dut1", "dut2"} for m in means)
        # The report reads the DUT hosts' own idle samples: one figure per DUT host and core count.
        _, text = write_report(store, tmp_path / "report")
        for cores in (1, 2):
            for dut in ("dut1", "dut2"):
                figure = tmp_path / "report" / f"idle-mapt-testbed-cores{cores}-{dut}.png"
                assert figure.stat().st_size > 1000
        # Both "hosts" are this machine's CPUs and each search ended at its upper bound: nothing is named.
        assert "bottleneck not determined" in text and "bottleneck dut" not in text
        # 5. Every host exactly as found.
        after = snapshot(hosts, tmp_path)
        diff = differences(before, after)
        took = time.monotonic() - started
        evidence += ["== every host before the campaign vs after (dut2 lost, resume refused, down, resume) =",
                     comparison(before, after), f"campaign, down and resumes took {took:.0f} s",
                     "diff: " + (diff or "none")]
        print("\n".join(evidence))
        assert not diff, "hosts differ from their snapshot:\n" + diff
    finally:
        stranger.kill()
        stranger.wait()
