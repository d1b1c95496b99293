"""What a testbed inventory or a host can make the controller do, without hosts (issue 30): no value reaches a
shell as code, a host's output is bounded, escaped and parsed into one line when it is not what the suite
expects. The same against the suite's sshd hosts: test_hardening_ssh.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_inventory import edited, good

from xlatbench.procs import TESTER_JSON_PREFIX
from xlatbench.setups.backends import registry
from xlatbench.setups.testbed.hostout import (
    HostOutputError,
    cut_facts,
    printable,
    run_bounded,
)
from xlatbench.setups.testbed.inventory import VARIANT_KEYS, InventoryError, parse_inventory
from xlatbench.setups.testbed.preflight import (
    clock_offset,
    clock_text,
    cpu_settings,
    cpu_settings_warnings,
    interface_report,
)
from xlatbench.setups.testbed.remote_idle import IdleSampler, samples_from
from xlatbench.setups.testbed.ssh import LocalShell


def payloads(canary: Path) -> list[str]:
    """Shell metacharacters, each of which would create `canary` (or glob) if a shell read it as code."""
    return [f"/x$(touch {canary})", f"/x`touch {canary}`", f"/x;touch {canary}", f"/x'$(touch {canary})'",
            f'/x"$(touch {canary})"', "/x*", f"/x\ntouch {canary}"]


# Every string an inventory has (the path of its value in the TOML), and what makes the key apply.
STRING_KEYS: list[tuple[str, dict[str, Any]]] = [
    ("name", {}), ("napt_netns", {}), ("nat64_prefix", {}), ("rundir", {}), ("rx_flow_hash", {}),
    ("hosts.client.ssh", {}), ("hosts.client.tester", {}), ("hosts.client.sysfs_root", {}),
    ("hosts.client.interfaces.client-dut1", {}), ("hosts.dut1.backend", {}),
    ("hosts.dut1.offline_cpus", {}), ("hosts.dut1.management", {}), ("hosts.dut1.proc_stat", {}),
    ("hosts.dut1.proc_root", {}), ("hosts.dut1.sysfs_root", {}),
    ("hosts.dut1.interfaces.dut1-dut2", {}),
    *[(f"hosts.dut2.{b.name}_binary", {"hosts.dut2.backend": b.name, **{
        f"hosts.dut2.{other.name}_binary": None for other in registry.every() if other.own_build}})
      for b in registry.every() if b.own_build],
    *[(key, {}) for key in VARIANT_KEYS],
]


def set_key(data: dict[str, Any], path: str, setting: Any) -> None:
    """Set the dotted `path` of an inventory's data to `setting` (None: remove it)."""
    node = data
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    if setting is None:
        node.pop(last, None)
    else:
        node[last] = setting


def inventory_with(key: str, value: str, also: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(good())
    for path, setting in also.items():
        set_key(data, path, setting)
    set_key(data, key, value)
    return data


@pytest.mark.parametrize(("key", "also"), STRING_KEYS, ids=[k for k, _ in STRING_KEYS])
def test_every_inventory_string_with_shell_characters_is_refused_naming_its_key(
        key: str, also: dict[str, Any], tmp_path: Path) -> None:
    for value in payloads(tmp_path / "canary"):
        with pytest.raises(InventoryError) as err:
            parse_inventory(inventory_with(key, value, also), "inv.toml")
        text = str(err.value)
        assert text.startswith(f"inv.toml: {key}") and "\n" not in text and "\x1b" not in text, text


@pytest.mark.parametrize("name", ["-h", "--help", ".", "..", "-"])
def test_interface_names_that_read_as_options_or_paths_are_refused(name: str) -> None:
    with pytest.raises(InventoryError, match="is not an interface name"):
        parse_inventory(edited("hosts.dut1.interfaces.dut1-dut2", name), "inv.toml")


def test_safe_paths_and_odd_but_valid_names_pass() -> None:
    data = inventory_with("hosts.client.tester", "/opt/xlat-bench_1.2+x/xlatperf",
                          {"rundir": "/run/x.b", "hosts.dut1.interfaces.dut1-dut2": "enp5s0f1.100"})
    inv = parse_inventory(data)
    assert inv.hosts["client"].tester == "/opt/xlat-bench_1.2+x/xlatperf"
    assert inv.hosts["dut1"].interfaces["dut1-dut2"] == "enp5s0f1.100"


UNUSED = [
    ("hosts.dut1.tester", "/x", "hosts.dut1.tester: only client uses it"),
    ("hosts.server.proc_stat", "/proc/stat", "hosts.server.proc_stat: only dut1 and dut2 use it"),
    ("hosts.client.tayga_binary", "/x", "hosts.client.tayga_binary: only dut1 and dut2 use it"),
    ("hosts.dut2.bpf_binary", "/x", "hosts.dut2.bpf_binary: dut2 runs the tayga backend, which would ignore"),
]


@pytest.mark.parametrize(("key", "value", "message"), UNUSED, ids=[k for k, _, _ in UNUSED])
def test_a_key_its_role_does_not_use_is_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory(edited(key, value), "inv.toml")
    assert message in str(err.value)


def test_bpf_object_path_reaches_the_shell_as_one_word(tmp_path: Path) -> None:
    """The backend's probe lines with a path a shell would run (before: the quoted path sat inside double
    quotes, so `$(...)` ran): nothing runs, the path comes back as it was."""
    canary = tmp_path / "canary"
    path = f"/x$(touch {canary})`touch {canary}`"
    script = "\n".join(registry.make("bpf").preflight_facts(path))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False).stdout
    assert not canary.exists()
    assert f"bpf_object_path={path}" in out.splitlines()


def test_idle_sampler_undo_line_quotes_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """remote_idle's undo line (before: its `.id` path unquoted) with a run directory a shell would run or
    glob: the sampler starts and stops, nothing runs, a file matching the glob survives."""
    monkeypatch.chdir(tmp_path)
    canary = tmp_path / "canary"
    rundir = tmp_path / "r$(touch canary)*"
    rundir.mkdir()
    bystander = tmp_path / "r$(touch x)-other"
    bystander.mkdir()
    (bystander / "idle.pid.id").write_text("keep\n")
    sampler = IdleSampler("dut1", str(rundir), str(rundir / "undo.sh"), "/proc/stat", 0.2)
    shell = LocalShell()
    shell.capture("dut1", sampler.start_script())
    state = (rundir / "undo.sh").read_text()
    assert shell.capture("dut1", sampler.stop_script()).returncode == 0
    subprocess.run(["sh", "-c", state], check=False, capture_output=True)  # what `down` runs
    assert not canary.exists()
    assert (bystander / "idle.pid.id").exists()


def test_output_past_the_bound_is_counted_not_held() -> None:
    done = run_bounded([sys.executable, "-c", "import sys; sys.stdout.write('x' * 50_000_000)"], None, 60,
                       limit=1_000_000)
    assert len(done.stdout) == 1_000_000
    assert done.dropped == {"stdout": 49_000_000}


def test_binary_junk_and_escape_sequences_are_escaped() -> None:
    script = "import sys; sys.stdout.buffer.write(b'ok \\x1b[2J\\x1b]0;owned\\x07 \\xff\\xfe\\x00 end\\n')"
    done = run_bounded([sys.executable, "-c", script], None, 10)
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\x00" not in done.stdout
    assert done.stdout.startswith("ok \\x1b[2J\\x1b]0;owned\\x07 ")
    assert printable("a\tb\nc\rd\x9b") == "a\tb\nc\\x0dd\\x9b"


def test_a_fact_past_its_bound_is_cut_and_counted() -> None:
    facts, cut = cut_facts({"small": "x", "big": "y" * 20000}, limit=16384)
    assert len(facts["big"]) == 16384 and cut == {"big": 20000 - 16384}


@pytest.mark.parametrize("raw", ['[{"addr_info": 5}]', '{"a": 1}', '[{"addr_info": [{"local": 1}]}]',
                                 '[5]', "\x00\xff junk"])
def test_ip_address_json_of_the_wrong_shape_is_one_line(raw: str) -> None:
    with pytest.raises(HostOutputError) as err:
        interface_report({"if_eth1_addr": raw}, "eth1", "dut1")
    text = str(err.value)
    assert text.startswith("dut1: `ip -j address show dev eth1` answered ") and "\n" not in text
    assert "not a JSON list of links" in text and "\x00" not in text


class DateShell(LocalShell):
    """A host whose `date` is the given script (a BusyBox date prints %N as it is)."""

    def __init__(self, bindir: Path) -> None:
        super().__init__()
        self.bindir = bindir

    def argv(self, host: str, script: str) -> list[str]:
        return ["env", f"PATH={self.bindir}:/usr/bin:/bin", "sh", "-c", script]


def test_a_date_without_nanoseconds_is_one_line_naming_host_and_command(tmp_path: Path) -> None:
    (tmp_path / "date").write_text("#!/bin/sh\necho 1700000000.%N\n")
    (tmp_path / "date").chmod(0o755)
    with pytest.raises(HostOutputError) as err:
        clock_offset(DateShell(tmp_path), "dut2", exchanges=1)  # type: ignore[arg-type]
    assert str(err.value).startswith("dut2: `date +%s.%N` answered '1700000000.%N")
    assert "a date with %N" in str(err.value)


def test_idle_samples_of_the_wrong_shape_are_one_line() -> None:
    with pytest.raises(HostOutputError, match="^dut1: `date .*answered 't 17.%N', not seconds"):
        samples_from("t 17.%N\ncpu 1 2 3\n", 0.0, "dut1")
    with pytest.raises(HostOutputError, match=r"^dut1: `grep \^cpu.*not a /proc/stat cpu line"):
        samples_from("t 17.1\ncpu 1 x 3\n", 0.0, "dut1")


def cpu_tree(root: Path, governors: list[tuple[str, int, int]], smt: str | None) -> Path:
    base = root / "devices" / "system" / "cpu"
    for n, (governor, low, high) in enumerate(governors):
        d = base / f"cpu{n}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_min_freq").write_text(f"{low}\n")
        (d / "scaling_max_freq").write_text(f"{high}\n")
    if smt is not None:
        (base / "smt").mkdir(parents=True)
        (base / "smt" / "active").write_text(smt.split()[0] + "\n")
        (base / "smt" / "control").write_text(smt.split()[1] + "\n")
    return root


def probe_cpu_settings(sysfs: Path) -> dict[str, Any]:
    from xlatbench.setups.testbed.preflight import cpu_settings_script, parse_probe

    out = LocalShell().capture("dut1", "\n".join(cpu_settings_script(str(sysfs)))).stdout
    return cpu_settings(parse_probe(out))


def test_cpu_settings_the_paper_fixed_are_recorded_and_warned(tmp_path: Path) -> None:
    """Issue 31 item 6: governor and clock range, SMT, irqbalance per host, each a warning when it differs
    from the paper's hosts (performance governor at a fixed 2.1 GHz, no irqbalance)."""
    loose = probe_cpu_settings(cpu_tree(tmp_path / "a", [("powersave", 800000, 3000000)] * 2 +
                                        [("performance", 800000, 3000000)], "1 on"))
    assert loose["cpufreq"] == [{"cpus": 1, "governor": "performance", "min_khz": 800000, "max_khz": 3000000},
                                {"cpus": 2, "governor": "powersave", "min_khz": 800000, "max_khz": 3000000}]
    assert loose["fixed_clock"] is False and loose["smt_active"] is True and loose["smt_control"] == "on"
    warnings = cpu_settings_warnings("dut1", {**loose, "irqbalance": True})
    assert [w.split(":")[1].strip().split()[0] for w in warnings] == ["CPU", "the", "SMT", "irqbalance"]
    assert "performance, powersave (not performance)" in warnings[0]
    assert "800-3000 MHz" in warnings[1]
    fixed = probe_cpu_settings(cpu_tree(tmp_path / "b", [("performance", 2100000, 2100000)] * 4, "0 off"))
    assert fixed["fixed_clock"] is True and fixed["smt_active"] is False
    assert cpu_settings_warnings("dut1", fixed) == []
    none = probe_cpu_settings(tmp_path / "c")
    assert none["fixed_clock"] is None and none["smt_active"] is None
    assert cpu_settings_warnings("dut1", none) == []  # a VM's: recorded as unknown, shown in the summary
    assert clock_text(none) == "CPU clock not reported (no cpufreq)"
    assert clock_text(loose) == "CPU clock performance 800-3000 MHz; powersave 800-3000 MHz, SMT on"


def test_lost_ssh_to_the_client_is_named_not_the_testers_exit_code(tmp_path: Path) -> None:
    """The trial wrapper whose ssh fails (exit 255 on the trial and on the fetch after it) says the
    connection to the client was lost; before, the trial read `xlatperf exited with code 255`."""
    from xlatbench.scripts.xlatperf import TesterError, TesterOptions, run_trial

    ssh = tmp_path / "ssh"
    ssh.write_text("#!/bin/sh\necho 'ssh: connect to host client port 22: Connection refused' >&2\n"
                   "exit 255\n")
    ssh.chmod(0o755)
    wrap = [sys.executable, "-m", "xlatbench.setups.testbed.remote_run", json.dumps([str(ssh)]), "xlatperf",
            "/run/x/client", "--"]
    with pytest.raises(TesterError) as err:
        run_trial(wrap, "xlatperf", "192.0.2.1", 100, 1.0, TesterOptions())
    assert str(err.value).startswith("lost the SSH connection to the client (ssh: connect to host client "
                                     "port 22: Connection refused)"), err.value
    assert "exited with code" not in str(err.value)


class ArgvShell(LocalShell):
    """This machine as every host (reads only: the probe), with the argv the clock measurement needs."""

    def argv(self, host: str, script: str) -> list[str]:
        return ["sh", "-c", script]


def test_a_testbed_that_is_up_is_one_line(tmp_path: Path) -> None:
    """A campaign or check after a manual `testbed up` (before: one line of ~6 000 characters, the state
    file's shell code and every address of the run listed as a collision)."""
    from xlatbench.setups.testbed.chain import machine_interfaces, plan
    from xlatbench.setups.testbed.preflight import check

    inv = parse_inventory(inventory_with("rundir", str(tmp_path), {}), "lab.toml")
    for role in ("dut1", "server"):
        state = Path(inv.statefile(role))
        state.parent.mkdir(parents=True)
        state.write_text("ip address del 192.0.2.1/24 dev eth1\n" * 300)
    result = check(inv, ArgvShell(), machine_interfaces(inv), plan(inv))  # type: ignore[arg-type]
    assert result["problems"][0] == ("dut1, server: the testbed is up (a `testbed up` or a killed run left "
                                     "its state there): run `xlatbench testbed down lab.toml` first, or let "
                                     "the campaign bring it up itself")
    # those hosts' other lines (what the run itself made) are kept aside; the other hosts' stay
    assert not any(p.startswith(("dut1:", "server:")) for p in result["problems"][1:])
    assert any(p.startswith("client:") for p in result["problems"])
    assert result["problems_while_up"] and not result["ok"]


def test_one_machine_behind_two_destinations_is_refused() -> None:
    from xlatbench.setups.testbed.preflight import same_machine_problems

    inv = parse_inventory(good(), "lab.toml")
    same = "0123abcd net:[4026531840]"
    found = {"client": ({"machine": "aaaa net:[1]"},), "dut1": ({"machine": same},),
             "dut2": ({"machine": same},), "server": "unreachable"}
    assert same_machine_problems(inv, found) == [
        "dut2: hosts.dut2.ssh (d2) reaches the same machine as hosts.dut1.ssh (d1) (machine-id 0123abcd): "
        "give each role its own host"]
    # the sshd hosts of the tests: one machine-id, a network namespace each, so four machines
    apart = {role: ({"machine": f"0123abcd net:[{n}]"},) for n, role in enumerate(("client", "dut1", "dut2"))}
    assert same_machine_problems(inv, apart) == []


def test_a_cpu_offline_before_up_is_warned_about() -> None:
    from xlatbench.setups.testbed.preflight import offline_cpu_warnings

    inv = parse_inventory(good(), "lab.toml")  # dut1: offline_cpus 1-3
    facts = {"cpus_online": "0 1 2 ", "cpus_present": "0-3"}
    assert offline_cpu_warnings(inv, "dut1", facts) == [
        "dut1: CPU(s) 3 of offline_cpus are offline now, and `down` brings every CPU of offline_cpus back "
        "online: take 3 out of hosts.dut1.offline_cpus in lab.toml to leave them offline"]
    assert offline_cpu_warnings(inv, "dut1", {**facts, "cpus_online": "0 1 2 3 "}) == []


def test_the_check_line_names_what_will_translate() -> None:
    """A DUT with its own tayga build: the line names that binary, not the bpf object nor Debian's tayga."""
    from xlatbench.setups.testbed.preflight import _translator_text

    host = {"backend": "tayga", "binary": "/opt/tayga/tayga", "tayga": "0.9.2-8",
            "bpf": {"object": "/opt/siit.bpf.o", "sha256": "ab" * 32}}
    assert _translator_text("dut1", host) == "tayga /opt/tayga/tayga (hosts.dut1.tayga_binary)"
    assert _translator_text("dut1", {**host, "binary": None}) == "tayga 0.9.2-8"
    bpf = {**host, "backend": "bpf", "binary": "/opt/siit.bpf.o"}  # the object's own facts stay
    assert _translator_text("dut2", bpf) == ("bpf /opt/siit.bpf.o (hosts.dut2.bpf_binary): bpf siit.bpf.o "
                                             "sha256 abababababab")


def test_down_keeps_directories_it_did_not_make(tmp_path: Path) -> None:
    """Before, `down` removed an operator's empty role directory and its parent; now only what `up` made."""
    from xlatbench.setups.testbed.undo import down_script, note_created_dirs

    shell = LocalShell()

    def up(role_dir: Path) -> None:
        shell.capture("host", note_created_dirs(str(role_dir)))

    def down(role_dir: Path) -> None:
        shell.capture("host", down_script(str(role_dir / "undo.sh")))

    kept = tmp_path / "lab" / "dut1"
    kept.mkdir(parents=True)  # an operator's, before up: it and its parent stay
    up(kept)
    down(kept)
    assert kept.is_dir()
    made = tmp_path / "new"  # made by up, shared by two roles (one file system): gone with the last
    up(made / "dut1")
    up(made / "dut2")
    down(made / "dut1")
    assert not (made / "dut1").exists() and (made / "dut2").is_dir()
    down(made / "dut2")
    assert not made.exists() and kept.is_dir()


def test_cpu_lists_of_the_wrong_shape_are_one_line(tmp_path: Path) -> None:
    from xlatbench.setups.testbed.hotplug import Hotplug, HotplugError

    base = tmp_path / "devices" / "system" / "cpu"
    (base / "cpu1x").mkdir(parents=True)
    (base / "present").write_text("0-3\x1b[2J junk\n")
    plug = Hotplug("dut1", (1,), str(tmp_path), str(tmp_path / "undo.sh"))
    with pytest.raises(HotplugError, match=r"^dut1: `cat .*present` answered '0-3\\x1b\[2J junk', not a CPU"):
        plug.present(LocalShell())
    with pytest.raises(HotplugError, match=r"^dut1: `the online CPUs under .*` answered '1x', not CPU"):
        plug.online(LocalShell())


def test_the_clients_words_reach_the_controller_escaped_and_bounded(tmp_path: Path) -> None:
    """remote_run (the trial on the client): the tester's stderr arrives escaped; a tester JSON past the
    capture bound is refused in one line, not read into memory."""
    ssh = tmp_path / "ssh"
    ssh.write_text("#!/bin/sh\ncase \"$2\" in\n  *cat*) head -c 6000000 /dev/zero | tr '\\0' x;;\n"
                   "  *) printf 'tester says \\033]0;owned\\007\\n' >&2;;\nesac\n")
    ssh.chmod(0o755)
    argv = [sys.executable, "-m", "xlatbench.setups.testbed.remote_run", json.dumps([str(ssh)]), "xlatperf",
            "/run/x/client", "--", "xlatperf", "--json", str(tmp_path / f"{TESTER_JSON_PREFIX}t.json")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert done.stderr.splitlines() == [
        "tester says \\x1b]0;owned\\x07",
        "remote_run: the tester JSON on the client is larger than the 4194304 bytes kept (1805696 more): "
        "not read"]


class CannedShell:
    """Hosts that answer each command containing a key with its canned output (exit 0)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> Any:
        from xlatbench.setups.testbed.ssh import Completed

        out = next((text for key, text in self.answers.items() if key in script), "")
        return Completed(host, script, 0, 0.0, out, "")


def test_chain_readings_of_the_wrong_shape_are_one_line() -> None:
    """A route, a neighbour entry, XDP links and a translator's /proc stat of the wrong JSON types or fields:
    a TestbedError or a void trial (HostLost) naming the host, never an AttributeError."""
    from xlatbench.setups.testbed.chain import HostLost, TestbedChain, TestbedError, attached_xdp

    inv = parse_inventory(inventory_with("hosts.dut1.backend", "tayga", {}), "lab.toml")
    chain = TestbedChain(inv, CannedShell({"route get": "[5]"}), {"hosts": {}})  # type: ignore[arg-type]
    with pytest.raises(TestbedError, match="^client: no route to the server"):
        chain.resolve_next_hop()
    route = json.dumps([{"dev": "eth1", "gateway": "192.0.0.1"}])
    chain = TestbedChain(inv, CannedShell({"route get": route, "neigh show": '{"lladdr": 1}'}),  # type: ignore[arg-type]
                         {"hosts": {}})
    with pytest.raises(TestbedError, match="does not resolve"):
        chain.resolve_next_hop()
    assert attached_xdp(CannedShell({"link show": '[{"ifname": 5, "xdp": 7}]'}), "server", "eth1") == []  # type: ignore[arg-type]
    chain = TestbedChain(inv, CannedShell({"CLK_TCK": "100\n1 (tayga) S x"}), {"hosts": {}})  # type: ignore[arg-type]
    with pytest.raises(HostLost, match=r"^dut\d \(d\d\): unreadable CPU times of its translator "
                                       r"\(1 \(tayga\) S x\)"):
        chain.dut_cpu_times()
