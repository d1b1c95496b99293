"""`xlatbench testbed check`: what each host of an inventory is, and whether a run may start there.

One ssh call per host collects kernel, CPUs, each named interface (addresses, driver, GRO/GSO/LRO),
each translator backend's own facts (setups.backends: e.g. Jool's module and tool versions), knotd, the
tester, and the host's clock; a second short call measures the clock offset against the controller.
`problems` lists what refuses a run (a missing interface, one carrying addresses, a backend's own
refusals such as MAP-T without Jool >= 4.2, a missing knotd or tester, and every object the plan would
create that already exists on the host: namespace, link, the translator's tun, nft table, iptables rule,
address, route); `warnings` what a result should mention (among them the settings the paper fixed: a CPU
frequency governor other than performance or a clock that is not fixed, SMT, a running irqbalance). The
whole dict goes with every result. Every output is parsed defensively (hostout): a reading that is not what
the suite expects is one problem line naming host, command and expectation, never a traceback.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ... import xdp
from ...cpulist import parse_cpu_list
from ...paths import tester_binary
from ..backends import registry
from ..steps import Cmd, Step
from ..transports import StepError
from .hostout import CAPTURE_LIMIT, FACT_LIMIT, HostOutputError, cut_facts, parse_error, shown
from .inventory import DUTS, HostEntry, Inventory
from .ssh import Shell
from .undo import XdpRelease, append_line, pending, with_record

OFFLOADS = ("generic-receive-offload", "generic-segmentation-offload", "large-receive-offload")
RX_OFFLOADS = ("generic-receive-offload", "large-receive-offload")
CLOCK_WARN_S = 0.1
FLOW_PROTOS = ("udp4", "udp6")
# `ethtool -n IF rx-flow-hash udp4` lines -> the letters `ethtool -N` takes (man ethtool).
HASH_FIELDS = {"L2DA": "m", "VLAN tag": "v", "L3 proto": "t", "IP SA": "s", "IP DA": "d",
               "L4 bytes 0 & 1 [TCP/UDP src port]": "f", "L4 bytes 2 & 3 [TCP/UDP dst port]": "n"}
PAPER_HASH = "sdfn"  # the paper set `ethtool -N IF rx-flow-hash udp4 sdfn` (and udp6) on every host
# Drivers with native (driver) XDP in Linux 6.x; any other interface runs XDP in generic (skb) mode, which
# works everywhere at a higher CPU cost per packet (docs/tester.md: what a real NIC needs).
NATIVE_XDP_DRIVERS = frozenset({"veth", "virtio_net", "tun", "i40e", "ice", "ixgbe", "ixgbevf", "igb", "igc",
                                "mlx4_en", "mlx5_core", "bnxt_en", "nfp", "qede", "ena", "sfc", "stmmac",
                                "netsec", "mvneta", "mvpp2", "dpaa2-eth", "enetc", "fec", "hv_netvsc",
                                "gve", "octeontx2-nicpf", "xen-netfront", "netdevsim"})
# AF_XDP and the BPF syscall, from the kernel's configuration (/proc/config.gz or /boot), else its symbols.
XDP_KERNEL_SCRIPT = ("( (zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r) 2>/dev/null) | "
                     "grep -E '^# CONFIG_XDP_SOCKETS is not set|^CONFIG_XDP_SOCKETS=y' | head -n 1; "
                     "grep -qE ' xsk_create$' /proc/kallsyms 2>/dev/null && echo kallsyms:xsk_create) "
                     "| tr '\\n' ';'")


def hash_letters(text: str) -> str | None:
    """The fields a NIC hashes a flow type on, as ethtool letters ("sdfn"); None when it does not say
    (a software device such as veth: one queue, nothing to spread)."""
    lines = [line.strip() for line in text.split(";") if line.strip()]
    letters = "".join(HASH_FIELDS[line] for line in lines if line in HASH_FIELDS)
    return letters or None


def rx_hash_problems(inventory: Inventory, role: str, facts: dict[str, str]) -> tuple[list[str], dict]:
    """Per test interface and UDP flow type, the NIC's hash fields; with rx_flow_hash = "check", one
    problem per interface that leaves the ports out (all flows of one address pair land on one queue)."""
    found: dict[str, dict[str, str | None]] = {}
    problems = []
    for iface in inventory.hosts[role].interfaces.values():
        found[iface] = {proto: hash_letters(facts.get(f"if_{iface}_rxhash_{proto}", ""))
                        for proto in FLOW_PROTOS}
        narrow = [p for p, letters in found[iface].items()
                  if letters is not None and not {"f", "n"} <= set(letters)]
        if narrow and inventory.rx_flow_hash == "check":
            commands = " and ".join(f"`ethtool -N {iface} rx-flow-hash {p} {PAPER_HASH}`" for p in narrow)
            problems.append(f"{role}: {iface} hashes "
                            + ", ".join(f"{p} on '{found[iface][p]}'" for p in narrow)
                            + f" (no ports: one queue per address pair): run {commands} as the paper did, "
                            f"or set rx_flow_hash = \"apply\" in {inventory.path}")
    return problems, found


def rx_hash_script(found: dict[str, dict[str, str | None]], statefile: str) -> str:
    """Snippet setting `sdfn` on every interface whose NIC hashes a UDP flow type without the ports, each
    change journalled with the line that restores the fields it had."""
    lines = []
    for iface, protos in found.items():
        for proto, letters in protos.items():
            if letters is None or {"f", "n"} <= set(letters):
                continue
            undo = f"ethtool -N {shlex.quote(iface)} rx-flow-hash {proto} {letters}"
            step = f"ethtool -N {shlex.quote(iface)} rx-flow-hash {proto} {PAPER_HASH}"
            lines.append(with_record(append_line(statefile, undo), step, statefile))
    return "\n".join(lines)


def probe_script(host: HostEntry, interfaces: list[str]) -> str:
    """One shell snippet printing `key=value` lines about the host."""
    q = shlex.quote
    lines = [
        'echo "kernel=$(uname -r)"',
        'echo "hostname=$(uname -n)"',
        'echo "cpus=$(grep -c ^processor /proc/cpuinfo)"',
        "echo \"cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)\"",
        f"printf cpus_online=; (cd {q(host.sysfs_root)}/devices/system/cpu && for d in cpu[0-9]*; do "
        "if [ ! -f $d/online ] || [ \"$(cat $d/online)\" = 1 ]; then printf '%s ' ${d#cpu}; fi; done); echo",
        f'echo "cpus_present=$(cat {q(host.sysfs_root)}/devices/system/cpu/present)"',
        'echo "knotd=$( (knotd --version 2>/dev/null || echo absent) | head -n 1)"',
        'echo "kdig=$(command -v kdig || echo absent)"',
        # kdig found but not running (a broken install) is its own problem: up waits for Knot with it
        'echo "kdig_runs=$(kdig -V >/dev/null 2>&1 && echo yes || echo no)"',
        f'echo "tester=$( ({q(host.tester)} --version 2>/dev/null || echo absent) | head -n 1)"',
        f'echo "tester_found=$( ([ -f {q(host.tester)} ] || command -v {q(host.tester)}) >/dev/null 2>&1 '
        '&& echo yes || echo no)"',
        # one machine behind two destinations: its machine-id and network namespace are the same
        'echo "machine=$(cat /etc/machine-id 2>/dev/null) $(readlink /proc/self/ns/net 2>/dev/null)"',
        *cpu_settings_script(host.sysfs_root),
    ]
    if host.role in DUTS:  # the idle sampler reads proc_stat, the IRQ placement proc_root
        lines += [f'echo "proc_stat_ok=$(grep -q "^cpu[0-9]" {q(host.proc_stat)} 2>/dev/null && echo yes '
                  '|| echo no)"',
                  f'echo "proc_root_ok=$([ -d {q(host.proc_root)} ] && [ -r {q(host.proc_root)} ] && '
                  '[ -x {q(host.proc_root)} ] && echo yes || echo no)"'.replace("{q(host.proc_root)}",
                                                                             q(host.proc_root)),
                  # the stateful measurements delete and time a conntrack table with it (stateful.py)
                  'echo "conntrack_cli=$(command -v conntrack >/dev/null 2>&1 && echo yes || echo no)"']
    for backend in registry.every():  # each translator's own facts, on every host (the summary shows them)
        lines += backend.preflight_facts(host.binary if backend.name == host.backend.name else None)
    for iface in interfaces:
        i = q(iface)
        lines += [
            f'echo "if_{iface}_addr=$(ip -j address show dev {i} 2>/dev/null || echo absent)"',
            f"echo \"if_{iface}_driver=$(ethtool -i {i} 2>/dev/null | sed -n 's/^driver: //p')\"",
            f"echo \"if_{iface}_offload=$(ethtool -k {i} 2>/dev/null | grep -E '^({'|'.join(OFFLOADS)}):'"
            " | tr '\\n' ';')\"",
            *[f"echo \"if_{iface}_rxhash_{proto}=$(ethtool -n {i} rx-flow-hash {proto} 2>/dev/null "
              "| tail -n +2 | tr '\\n' ';' || true)\"" for proto in FLOW_PROTOS],
        ]
    return "\n".join(lines)


def cpu_settings_script(sysfs_root: str) -> list[str]:
    """Probe lines for the settings the paper fixed on its hosts: each CPU's frequency governor and its
    min/max clock (cpufreq), SMT (on/off and whether it can change), and whether irqbalance runs."""
    cpu = f"{shlex.quote(sysfs_root)}/devices/system/cpu"
    return [
        f"echo \"cpufreq=$(for d in {cpu}/cpu[0-9]*/cpufreq; do [ -d \"$d\" ] && echo \"$(cat \"$d\"/"
        "scaling_governor) $(cat \"$d\"/scaling_min_freq) $(cat \"$d\"/scaling_max_freq)\"; done 2>/dev/null "
        "| sort | uniq -c | tr -s ' ' | tr '\\n' ';')\"",
        f'echo "smt=$(cat {cpu}/smt/active 2>/dev/null) $(cat {cpu}/smt/control 2>/dev/null)"',
        'echo "irqbalance=$( (pgrep -x irqbalance >/dev/null 2>&1 && echo running) || echo no)"',
    ]


def cpu_settings(facts: dict[str, str]) -> dict[str, Any]:
    """The host's CPU settings from the probe: per (governor, min kHz, max kHz) the number of CPUs, whether
    the clock is fixed (every CPU's min = max; None: no cpufreq, e.g. a VM), SMT active and its control,
    irqbalance running."""
    groups = []
    for item in facts.get("cpufreq", "").split(";"):
        parts = item.split()
        if len(parts) == 4 and parts[0].isdigit() and parts[2].isdigit() and parts[3].isdigit():
            groups.append({"cpus": int(parts[0]), "governor": parts[1], "min_khz": int(parts[2]),
                           "max_khz": int(parts[3])})
    smt = facts.get("smt", "").split()
    return {"cpufreq": groups,
            "fixed_clock": all(g["min_khz"] == g["max_khz"] for g in groups) if groups else None,
            "smt_active": smt[0] == "1" if smt and smt[0] in ("0", "1") else None,
            "smt_control": smt[1] if len(smt) > 1 else None,
            "irqbalance": facts.get("irqbalance", "").strip() == "running"}


def cpu_settings_warnings(role: str, found: dict[str, Any]) -> list[str]:
    """One warning per setting that differs from the paper's hosts (a fixed 2.1 GHz clock; irqbalance off).
    A host without cpufreq (most VMs) is recorded as such (fixed_clock None, shown by `clock_text`)."""
    warnings = []
    governors = sorted({g["governor"] for g in found["cpufreq"]})
    if governors and governors != ["performance"]:
        warnings.append(f"{role}: CPU frequency governor {', '.join(governors)} (not performance): the "
                        "clock follows the load, so figures vary with it; the paper fixed it "
                        "(`cpupower frequency-set -g performance`, min = max)")
    if found["fixed_clock"] is False:
        ranges = ", ".join(sorted({f"{g['min_khz'] // 1000}-{g['max_khz'] // 1000} MHz"
                                   for g in found["cpufreq"]}))
        warnings.append(f"{role}: the CPU clock is not fixed ({ranges}): set min = max "
                        "(`cpupower frequency-set -d F -u F`) as the paper did (2.1 GHz)")
    if found["smt_active"]:
        warnings.append(f"{role}: SMT (hyper-threading) is active: sibling threads share a core, so a core "
                        "count is not a count of cores; turn it off (`echo off > "
                        "/sys/devices/system/cpu/smt/control`) or say so with the results")
    if found["irqbalance"]:
        warnings.append(f"{role}: irqbalance runs: it moves the NICs' interrupts during a run; stop it "
                        "(`systemctl stop irqbalance`) as the paper did")
    return warnings


def clock_text(found: dict[str, Any] | None) -> str:
    """The CPU clock settings for the summary line: governor(s) and range, or that the host does not say."""
    if not found or not found.get("cpufreq"):
        return "CPU clock not reported (no cpufreq)"
    groups = sorted({f"{g['governor']} {g['min_khz'] // 1000}-{g['max_khz'] // 1000} MHz"
                     for g in found["cpufreq"]})
    smt = {True: ", SMT on", False: ", SMT off", None: ""}[found.get("smt_active")]
    return "CPU clock " + "; ".join(groups) + smt


def xdp_uses(steps: list[Any]) -> list[XdpRelease]:
    """The XDP programs the plan lets a process attach on the host (knotd in XDP mode, the tester)."""
    return [step for step in steps if isinstance(step, XdpRelease)]


def xdp_script(uses: list[XdpRelease]) -> str:
    """Probe lines for a host where an XDP program will be attached: who we are, the kernel's AF_XDP,
    and what each such interface carries now (`ip -j -d link`)."""
    if not uses:
        return ""
    lines = ['echo "xdp_uid=$(id -u)"', f'echo "xdp_kernel=$({XDP_KERNEL_SCRIPT})"']
    lines += [f'echo "xdp_link_{u.interface}=$(ip -j -d link show dev {shlex.quote(u.interface)} 2>/dev/null '
              '| tr -d "\\n")"' for u in uses]
    return "\n".join(lines)


def xdp_report(uses: list[XdpRelease], facts: dict[str, str],
               interfaces: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What the preflight found for the XDP users of a host: root, the kernel's AF_XDP, per interface the
    program the plan attaches, the program already there, the expected mode (native where the driver has
    it, else generic)."""
    if not uses:
        return None
    kernel = facts.get("xdp_kernel", "")
    if "CONFIG_XDP_SOCKETS=y" in kernel or "kallsyms:xsk_create" in kernel:
        af_xdp: bool | None = True
    elif "CONFIG_XDP_SOCKETS is not set" in kernel:
        af_xdp = False
    else:
        af_xdp = None  # neither the configuration nor the symbols could be read
    report: dict[str, Any] = {"root": facts.get("xdp_uid", "").strip() == "0", "af_xdp": af_xdp,
                              "interfaces": {}}
    for use in uses:
        try:
            present = [p.text() for p in xdp.parse_links(facts.get(f"xdp_link_{use.interface}", "") or "[]")]
        except ValueError:
            present = []
        driver = interfaces.get(use.interface, {}).get("driver")
        report["interfaces"][use.interface] = {
            "program": use.program, "owner": use.owner, "attached_before": present, "driver": driver,
            "expected_mode": "native" if driver in NATIVE_XDP_DRIVERS else "generic"}
    return report


def xdp_problems(role: str, report: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """One line per reason the host cannot run its XDP users, with the fix; a warning for generic mode."""
    if report is None:
        return [], []
    problems, warnings = [], []
    owners = " and ".join(sorted({i["owner"] for i in report["interfaces"].values()}))
    if not report["root"]:
        problems.append(f"{role}: {owners} need root (XDP programs, AF_XDP sockets): connect as root "
                        "(hosts.ROLE.ssh = \"root@...\" or ssh_options = [\"-o\", \"User=root\"])"
                        .replace("ROLE", role))
    if report["af_xdp"] is False:
        problems.append(f"{role}: the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS is not set), which "
                        f"{owners} need: use io = \"socket\" or a kernel built with it")
    elif report["af_xdp"] is None:
        warnings.append(f"{role}: could not read whether the kernel has AF_XDP sockets (no /proc/config.gz, "
                        f"/boot/config-*, or xsk_create in /proc/kallsyms); {owners} will fail if it has not")
    for iface, found in report["interfaces"].items():
        if found["attached_before"]:
            there = found["attached_before"][0]
            problems.append(f"{role}: {iface} already carries an XDP program ({there}), and "
                            f"{found['owner']} attaches its own there: detach it (`ip link set dev {iface} "
                            "xdp off`) if nothing needs it, or run `xlatbench testbed down` if a previous "
                            "run left it")
        if found["driver"] and found["expected_mode"] == "generic":
            warnings.append(f"{role}: {iface} ({found['driver']}) has no native XDP that the suite knows of: "
                            f"{found['owner']} runs in generic (skb) mode there, at a higher CPU cost per "
                            "packet; say so with the results")
    return problems, warnings


def planned_objects(steps: list[Step]) -> list[tuple[str, str, str]]:
    """(kind, name, probe) of every object `steps` create in a host's root namespace; the shell `probe`
    prints something (where it is) when the object already exists, nothing otherwise. What a step makes
    inside a namespace the plan creates goes unprobed: that namespace's own probe covers it."""
    q = shlex.quote
    objects: list[tuple[str, str, str]] = []
    for step in steps:
        if not isinstance(step, Cmd) or not step.check:
            continue
        a = step.argv
        if a[:3] == ("ip", "netns", "add"):
            objects.append(("namespace", a[3], f"ip netns list | cut -d' ' -f1 | grep -xF -- {q(a[3])}"))
        elif a[:3] == ("ip", "link", "add"):
            objects.append(("link", a[3], _link_probe(a[3])))
            if "peer" in a and "netns" not in a:
                peer = a[a.index("peer") + 2]
                objects.append(("link", peer, _link_probe(peer)))
        elif any(b.created_device(a) for b in registry.every()):
            device = next(d for d in (b.created_device(a) for b in registry.every()) if d)
            objects.append(("tun", device, _link_probe(device)))
        elif a[:3] == ("nft", "add", "table"):
            objects.append(("nft table", " ".join(a[3:]),
                            f"nft list table {shlex.join(a[3:])} >/dev/null 2>&1 && echo present"))
        elif a[0] == "iptables" and "-A" in a:
            check = ["-C" if arg == "-A" else arg for arg in a]
            objects.append(("iptables rule", shlex.join(a[1:]),
                            f"{shlex.join(check)} >/dev/null 2>&1 && echo present"))
        elif a[:3] in {("ip", "address", "add"), ("ip", "addr", "add")}:
            address = a[3].split("/")[0]
            where = "awk '{print \"on \" $2}'"
            objects.append(("address", a[3], f"ip -o address show to {q(address)} | {where}"))
        elif a[:3] == ("ip", "route", "add") or a[:4] == ("ip", "-6", "route", "add"):
            dst = a[4] if a[1] == "-6" else a[3]
            family = "-6" if a[1] == "-6" or ":" in dst else "-4"
            objects.append(("route", f"{family} {dst}", f"ip {family} route show exact {q(dst)} | head -n 1"))
    return objects


def _link_probe(name: str) -> str:
    return f"ip -o link show dev {shlex.quote(name)} >/dev/null 2>&1 && echo present"


def collision_script(objects: list[tuple[str, str, str]]) -> str:
    return "\n".join(f'echo "collision_{n}=$( ({probe}) 2>/dev/null | head -n 1)"'
                      for n, (_, _, probe) in enumerate(objects))


def collision_fix(kind: str, name: str, found: str) -> str:
    """How a user clears one collision (the suite never takes over or deletes what it did not make)."""
    if kind == "namespace":
        return f"delete it (`ip netns del {name}`) if nothing needs it, or set napt_netns to another name"
    if kind in ("link", "tun"):
        return f"delete or rename it (`ip link del {name}`) if nothing needs it"
    if kind == "nft table":
        return f"delete it (`nft delete table {name}`) if nothing needs it"
    if kind == "iptables rule":
        return f"delete it (`iptables {name.replace(' -A ', ' -D ', 1)}`) if nothing needs it"
    if kind == "address":
        return f"remove it (`ip address del {name} dev {found.removeprefix('on ')}`) if nothing needs it"
    family, dst = name.split(" ", 1)
    return f"delete it (`ip {family} route del {dst}`) if nothing needs it"


def collision_problems(role: str, objects: list[tuple[str, str, str]], facts: dict[str, str]) -> list[str]:
    """One line per object the plan would create on `role` that is there already."""
    problems = []
    for n, (kind, name, _) in enumerate(objects):
        found = facts.get(f"collision_{n}", "").strip()
        if found:
            where = "" if found == "present" or kind == "namespace" else f" ({found})"
            problems.append(f"{role}: {kind} {name} already exists{where} and the plan creates it: "
                            f"{collision_fix(kind, name, found)}, or run `xlatbench testbed down` if a "
                            "previous run left it")
    return problems


def previous_run_script(statefile: str) -> str:
    """Probe lines: what a previous run left to undo on the host (its state or pending file, a tester's
    pid file), on one line, empty when nothing is left; and whether its state file is there (the testbed
    is up: `testbed up`, or a run killed while up)."""
    return (f'echo "previous_run=$( ({pending(statefile)}) 2>/dev/null | tr \'\\n\' \' \')"\n'
            f'echo "testbed_up=$([ -f {shlex.quote(statefile)} ] && echo yes)"')


def previous_run_problems(inventory: Inventory, role: str, facts: dict[str, str]) -> list[str]:
    """One line when a previous run left state on `role`: `up` would refuse it, so `check` says so too."""
    left = facts.get("previous_run", "").strip()
    if not left:
        return []
    shown = left if len(left) <= 120 else left[:117] + "..."
    return [f"{role}: a previous run left state in {inventory.rundir(role)} ({shown}): run "
            f"`xlatbench testbed down {inventory.path}` first"]


def parse_probe(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


DATE_COMMAND = "date +%s.%N"


def clock_offset(shell: Shell, host: str, exchanges: int = 5) -> dict[str, float]:
    """Host clock minus controller clock, s. One remote shell answers `date` to each line we send: the
    exchange with the shortest round trip gives the offset (uncertainty = half that round trip)."""
    process = subprocess.Popen(shell.argv(host, f"while read -r _; do {DATE_COMMAND}; done"),  # type: ignore[attr-defined]
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert process.stdin is not None and process.stdout is not None
    best: tuple[float, float] | None = None
    try:
        for _ in range(exchanges):
            t0 = time.time()
            process.stdin.write("t\n")
            process.stdin.flush()
            line = process.stdout.readline(256)
            if not line.strip():
                raise StepError(f"{host}: no answer to `date` over ssh while measuring the clock offset")
            try:
                remote = float(line)
            except ValueError:
                raise parse_error(host, DATE_COMMAND, "seconds since the epoch with a fraction (a date with "
                                  "%N, as GNU coreutils has)", line.strip()) from None
            if remote != remote or remote in (float("inf"), float("-inf")):
                raise parse_error(host, DATE_COMMAND, "a finite number of seconds", line.strip())
            t1 = time.time()
            if best is None or t1 - t0 < best[1]:
                best = (remote - (t0 + t1) / 2, t1 - t0)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert best is not None
    return {"offset_s": round(best[0], 4), "uncertainty_s": round(best[1] / 2, 4)}


def link_addresses(raw: str) -> list[tuple[str, int]]:
    """(address, prefix length) of each addr_info entry of `ip -j address show dev IF`; ValueError when the
    output is not a JSON list of links whose addr_info is a list of {local: str, prefixlen: int}."""
    links = json.loads(raw)
    if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
        raise ValueError("not a list of links")
    found = []
    for link in links:
        infos = link.get("addr_info", [])
        if not isinstance(infos, list):
            raise ValueError("addr_info is not a list")
        for info in infos:
            if not isinstance(info, dict) or not isinstance(info.get("local"), str) \
                    or not isinstance(info.get("prefixlen"), int) or isinstance(info.get("prefixlen"), bool):
                raise ValueError("an addr_info entry lacks local or prefixlen")
            found.append((info["local"], info["prefixlen"]))
    return found


def interface_report(facts: dict[str, str], iface: str, host: str = "host") -> dict[str, Any]:
    """One test interface as the probe found it; HostOutputError (one line) when its `ip -j address`
    output is not the JSON that command gives."""
    raw = facts.get(f"if_{iface}_addr", "absent")
    if raw in ("absent", "", "[]"):
        return {"present": False}
    try:
        addresses = [{"local": a, "prefixlen": n} for a, n in link_addresses(raw)]
    except ValueError:  # json.JSONDecodeError is one
        raise parse_error(host, f"ip -j address show dev {iface}", "a JSON list of links with addr_info "
                          "lists of {local, prefixlen}", raw) from None
    offloads = {}
    for item in facts.get(f"if_{iface}_offload", "").split(";"):
        if ":" in item:
            name, state = item.split(":", 1)
            offloads[name.strip()] = state.strip()
    return {
        "present": True,
        "driver": facts.get(f"if_{iface}_driver") or "unknown",
        "offloads": offloads,
        "addresses": [f"{a['local']}/{a['prefixlen']}" for a in addresses],
        "unexpected_addresses": [f"{a['local']}/{a['prefixlen']}" for a in addresses
                                 if not str(a.get("local", "")).startswith("fe80:")],
    }


def host_problems(inventory: Inventory, role: str, facts: dict[str, str],
                  interfaces: dict[str, dict[str, Any]]) -> tuple[list[str], list[str]]:
    problems, warnings = [], []
    for link, iface in inventory.hosts[role].interfaces.items():
        info = interfaces[iface]
        if not info["present"]:
            problems.append(f"{role}: interface {iface} (link {link}) is missing: fix "
                            f"hosts.{role}.interfaces.{link} in {inventory.path}")
        elif info["unexpected_addresses"]:
            problems.append(f"{role}: interface {iface} carries {', '.join(info['unexpected_addresses'])}: "
                            "remove them, or run `xlatbench testbed down` if a run left them")
        elif role in DUTS and any(info["offloads"].get(o, "off").startswith("on") for o in RX_OFFLOADS):
            warnings.append(f"{role}: {iface} aggregates received packets (" + ", ".join(
                f"{o}={info['offloads'][o]}" for o in RX_OFFLOADS if o in info["offloads"])
                + "): translators see fewer, larger packets; say so with the results or turn it off")
    problems += rx_hash_problems(inventory, role, facts)[0]
    if role in DUTS:
        problems += _backend_problems(inventory, role, facts)
        if not facts.get("cpus_present", "").strip():
            root = inventory.hosts[role].sysfs_root
            problems.append(f"{role}: no CPU list at {root}/devices/system/cpu/present (core counts and "
                            f"hotplug need it): fix hosts.{role}.sysfs_root in {inventory.path} "
                            "(or remove it for /sys)")
    if role == "server" and facts.get("knotd", "absent") == "absent":
        problems.append("server: knotd not found: apt-get install knot (Debian package)")
    if role == "server" and facts.get("kdig", "absent") == "absent":
        problems.append("server: kdig not found (up waits for Knot to answer with it): "
                        "apt-get install knot-dnsutils")
    elif role == "server" and facts.get("kdig_runs", "yes") != "yes":
        problems.append(f"server: kdig {shown(facts.get('kdig', ''))} is there but does not run (`kdig -V` "
                        "failed; up waits for Knot to answer with it): reinstall knot-dnsutils")
    if role == "client":
        problems += _tester_problems(inventory, facts.get("tester", "absent"), facts.get("tester_found"))
    if role in DUTS:
        host = inventory.hosts[role]
        if facts.get("proc_stat_ok", "yes") != "yes":
            problems.append(f"{role}: {host.proc_stat} has no per-CPU lines (the idle capture reads it): fix "
                            f"hosts.{role}.proc_stat in {inventory.path} (or remove it for /proc/stat)")
        if facts.get("proc_root_ok", "yes") != "yes":
            problems.append(f"{role}: {host.proc_root} is not a readable directory (the IRQ placement reads "
                            f"it): fix hosts.{role}.proc_root in {inventory.path} (or remove it for /proc)")
    return problems, warnings


def local_tester_version() -> str | None:
    """`xlatperf --version` of the controller's own build (None when it has none)."""
    try:
        binary = tester_binary()
    except FileNotFoundError:
        return None
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def _tester_problems(inventory: Inventory, remote: str, found: str | None = None) -> list[str]:
    path = inventory.hosts["client"].tester
    build = ("build it there from this commit (`make build` in a clone, or copy build/dnsperf/xlatperf) "
             "and set hosts.client.tester to its path")
    if remote == "absent" and found == "yes":
        return [f"client: tester {path} is there but does not run (`{path} --version` failed: a build for "
                f"another system, or missing libraries): {build}"]
    if remote == "absent":
        return [f"client: tester {path} not found: {build}"]
    local = local_tester_version()
    if local is not None and remote != local:
        return [f"client: tester {path} is {remote!r}, the controller's is {local!r}: {build}"]
    return []


def _backend_problems(inventory: Inventory, role: str, facts: dict[str, str]) -> list[str]:
    host = inventory.hosts[role]
    return host.backend.preflight_problems(role, inventory.topology_name, host.binary, facts)


def check(inventory: Inventory, shell: Shell, machine_interfaces: dict[str, list[str]],
          planned: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """Probe every host; `machine_interfaces`: role -> interface names the run will use there; `planned`:
    role -> the setup steps `up` would run there (each object they create must not exist yet; an XDP user
    among them, setups.testbed.undo.XdpRelease, has its host checked for root, AF_XDP and a free
    interface)."""
    result: dict[str, Any] = {"inventory": inventory.path, "topology": inventory.topology_name, "hosts": {},
                              "problems": [], "warnings": []}
    objects = {role: planned_objects((planned or {}).get(role, [])) for role in inventory.hosts}
    uses = {role: xdp_uses((planned or {}).get(role, [])) for role in inventory.hosts}

    def probe(role: str) -> tuple[dict[str, str], dict[str, float], list[str], list[str]] | str:
        """(facts, clock, problems, warnings) of a host, or why SSH could not reach it."""
        host = inventory.hosts[role]
        script = (probe_script(host, machine_interfaces[role]) + "\n" + collision_script(objects[role])
                  + "\n" + previous_run_script(inventory.statefile(role)) + "\n" + xdp_script(uses[role]))
        try:
            done = shell.capture(role, script)
        except HostOutputError as err:
            return {}, {"offset_s": 0.0, "uncertainty_s": 0.0}, [str(err)], []
        except StepError as err:
            return str(err).split(" failed (exit 255): ")[-1]
        facts, cut = cut_facts(parse_probe(done.stdout))
        # A probe cut short has lost the facts after the flood: the host cannot be judged, so it is refused.
        problems = [f"{role}: the probe printed {n} bytes of {stream} past the {CAPTURE_LIMIT} bytes kept "
                    "(dropped): a command there prints far more than it should, so its facts are incomplete"
                    for stream, n in getattr(done, "dropped", {}).items() if stream == "stdout"]
        warnings = [f"{role}: probe fact {shown(key, 40)} cut to {FACT_LIMIT} characters ({n} dropped)"
                    for key, n in cut.items()]
        try:
            return facts, clock_offset(shell, role), problems, warnings
        except HostOutputError as err:
            return facts, {"offset_s": 0.0, "uncertainty_s": 0.0}, [*problems, str(err)], warnings
        except StepError as err:
            return str(err).split(" failed (exit 255): ")[-1]

    with ThreadPoolExecutor(max_workers=len(inventory.hosts)) as pool:
        found = dict(zip(inventory.hosts, pool.map(probe, inventory.hosts), strict=True))
    failed = {role: why for role, why in found.items() if isinstance(why, str)}
    if failed and len(failed) == len(found) and len(set(failed.values())) == 1:
        result["problems"].append(f"every host: ssh failed ({next(iter(failed.values()))}): the same "
                                  f"for all four, so check ssh_options in {inventory.path}")
    else:
        result["problems"] += [f"{role}: cannot reach it over SSH ({why}): check hosts.{role}.ssh and the "
                               "host" for role, why in failed.items()]
    for role, host in inventory.hosts.items():
        probed = found[role]
        if isinstance(probed, str):
            result["hosts"][role] = {"ssh": host.ssh, "unreachable": probed}
            continue
        facts, clock, problems, warnings = probed
        try:
            entry, more_problems, more_warnings = _host_result(inventory, role, facts, clock, objects[role],
                                                               uses[role], machine_interfaces[role])
        except HostOutputError as err:
            entry, more_problems, more_warnings = {"ssh": host.ssh, "unreadable": str(err)}, [str(err)], []
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:  # a reading unforeseen
            why = (f"{role}: the probe's output is not what the suite expects ({type(err).__name__}: "
                   f"{shown(str(err))})")
            entry, more_problems, more_warnings = {"ssh": host.ssh, "unreadable": why}, [why], []
        result["hosts"][role] = entry
        result["problems"] += problems + more_problems
        result["warnings"] += warnings + more_warnings
    result["problems"] += same_machine_problems(inventory, found)
    result["warnings"] += stateful_warnings(inventory, found)
    up_on = [role for role, probed in found.items()
             if not isinstance(probed, str) and probed[0].get("testbed_up", "").strip() == "yes"]
    if up_on:  # its addresses, links and daemons are what those hosts' lines would list: one line instead
        mine = tuple(f"{role}:" for role in up_on)
        result["problems_while_up"] = [p for p in result["problems"] if p.startswith(mine)]
        result["problems"] = [f"{', '.join(up_on)}: the testbed is up (a `testbed up` or a killed run left "
                              f"its state there): run `xlatbench testbed down {inventory.path}` first, or "
                              "let the campaign bring it up itself",
                              *(p for p in result["problems"] if not p.startswith(mine))]
    result["controller_tester"] = local_tester_version()
    result["ok"] = not result["problems"]
    return result


def stateful_warnings(inventory: Inventory, found: dict[str, Any]) -> list[str]:
    """A warning when the host of the topology's stateful NAT keeps a conntrack table but has no conntrack
    CLI: RFC 9693's tear-down (and the phases, which empty the table first) cannot run there."""
    from ..backends.statetable import ConntrackTable
    from .machine import TestbedError
    from .stateful import stateful_dut

    try:
        dut = stateful_dut(inventory)
    except TestbedError:
        return []  # no stateful part in this topology
    probed = found.get(dut.role)
    if not isinstance(dut.table, ConntrackTable) or isinstance(probed, str) or probed is None:
        return []
    if probed[0].get("conntrack_cli", "yes").strip() != "no":
        return []
    return [f"{dut.role}: conntrack (conntrack-tools) is not installed: the stateful measurements (RFC 9693) "
            "cannot empty and time its table there: apt-get install conntrack"]


def offline_cpu_warnings(inventory: Inventory, role: str, facts: dict[str, str]) -> list[str]:
    """A warning when CPUs of a DUT's offline_cpus are offline already: `down` brings every one of them
    online (its journal does not know which were offline before `up`)."""
    if role not in DUTS:
        return []
    online = {int(c) for c in facts.get("cpus_online", "").split() if c.isdigit()}
    try:
        present = set(parse_cpu_list(facts.get("cpus_present", "").strip()))
    except ValueError:
        return []
    offline = sorted(c for c in inventory.hosts[role].offline_cpus if c in present and c not in online)
    if not offline:
        return []
    cpus = ", ".join(map(str, offline))
    return [f"{role}: CPU(s) {cpus} of offline_cpus are offline now, and `down` brings every CPU of "
            f"offline_cpus back online: take {cpus} out of hosts.{role}.offline_cpus in {inventory.path} to "
            "leave them offline"]


def same_machine_problems(inventory: Inventory, found: dict[str, Any]) -> list[str]:
    """One line per pair of roles whose destinations reach one machine (same machine-id and network
    namespace): the four roles need four machines."""
    seen: dict[str, str] = {}
    problems = []
    for role, probed in found.items():
        if isinstance(probed, str):
            continue
        machine = probed[0].get("machine", "").strip()
        if len(machine.split()) != 2:  # no machine-id or no namespace link: nothing to compare
            continue
        if machine in seen:
            other = seen[machine]
            problems.append(f"{role}: hosts.{role}.ssh ({inventory.hosts[role].ssh}) reaches the same "
                            f"machine as hosts.{other}.ssh ({inventory.hosts[other].ssh}) (machine-id "
                            f"{shown(machine.split()[0], 40)}): give each role its own host")
        else:
            seen[machine] = role
    return problems


def _host_result(inventory: Inventory, role: str, facts: dict[str, str], clock: dict[str, float],
                 objects: list[tuple[str, str, str]], uses: list[XdpRelease],
                 names: list[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(the host's preflight entry, its problems, its warnings) from its probe."""
    host = inventory.hosts[role]
    interfaces = {i: interface_report(facts, i, role) for i in names}
    problems, warnings = host_problems(inventory, role, facts, interfaces)
    problems += collision_problems(role, objects, facts)
    problems += previous_run_problems(inventory, role, facts)
    xdp_found = xdp_report(uses, facts, interfaces)
    more_problems, more_warnings = xdp_problems(role, xdp_found)
    problems += more_problems
    warnings += more_warnings
    settings = cpu_settings(facts)
    warnings += cpu_settings_warnings(role, settings)
    warnings += offline_cpu_warnings(inventory, role, facts)
    if abs(clock["offset_s"]) > CLOCK_WARN_S:
        warnings.append(f"{role}: clock differs by {clock['offset_s']:+.3f} s: run NTP or chrony")
    cpus = facts.get("cpus", "").strip()
    entry = {
        "ssh": host.ssh, "kernel": facts.get("kernel"), "hostname": facts.get("hostname"),
        "cpu_model": facts.get("cpu_model"), "cpus": int(cpus) if cpus.isdigit() else 0,
        "cpus_online": facts.get("cpus_online"), "cpus_present": facts.get("cpus_present"),
        "interfaces": interfaces, "clock": clock,
        "rx_flow_hash": rx_hash_problems(inventory, role, facts)[1],
        **{b.name: b.preflight_report(facts) for b in registry.every() if b.preflight_facts()},
        "knotd": facts.get("knotd"), "kdig": facts.get("kdig"),
        "tester": facts.get("tester"), "cpu_settings": settings,
        **({"backend": host.backend.name, "binary": host.binary} if role in DUTS else {}),
        **({"xdp": xdp_found} if xdp_found else {}),
    }
    return entry, problems, warnings


def _translator_text(role: str, host: dict[str, Any]) -> str:
    """What will translate on a DUT: its backend's own build (the inventory's binary) or what the host has;
    on another host, every translator found there."""
    mine = [b for b in registry.every() if b.name == host.get("backend")]
    if mine and host.get("binary"):
        own = f"{mine[0].name} {host['binary']} (hosts.{role}.{mine[0].name}_binary)"
        report = host.get(mine[0].name)
        # a report of the file itself (the bpf object's hash) stays; a package's version (not what runs) not
        facts = mine[0].preflight_summary(report) if isinstance(report, dict) else ""
        return f"{own}: {facts}" if facts else own
    found = [b.preflight_summary(host.get(b.name)) for b in (mine or registry.every())]
    return "; ".join(line for line in found if line)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The preflight for a reader: one line per host (role, kernel, CPUs, translator or daemon and its
    version, verdict), then each problem and warning; the JSON has the rest."""
    lines = []
    for role, host in result["hosts"].items():
        mine = [p for p in result["problems"] if p.startswith(f"{role}:")]
        if "unreachable" in host:
            lines.append(f"{role:<7} UNREACHABLE: not reached over SSH ({host['unreachable']})")
            continue
        if "unreadable" in host:
            lines.append(f"{role:<7} REFUSED: {host['unreadable']}")
            continue
        verdict = f"REFUSED ({len(mine)} problem(s))" if mine else "ok"
        what = {"client": f"tester {host.get('tester')} (controller: {result.get('controller_tester')})",
                "server": f"{host.get('knotd')}, kdig {host.get('kdig')}"}
        translator = _translator_text(role, host)
        detail = what.get(role, translator or "no translator found")
        clock = host.get("clock") or {}
        lines.append(f"{role:<7} {verdict}: kernel {host.get('kernel')}, {host.get('cpus')} CPUs "
                     f"({host.get('cpu_model')}), present {host.get('cpus_present') or '?'}, "
                     f"{clock_text(host.get('cpu_settings'))}, {detail}, "
                     f"clock {clock.get('offset_s', 0):+.4f} s")
    lines += [f"problem: {p}" for p in result["problems"]]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return lines
