"""Issue 30 against the suite's sshd hosts (sshnet): shell metacharacters in every inventory string and in the
campaign values that reach a host are refused in one line naming the key or used literally (no canary file
appears, the tester gets the value as one argument); hosts whose commands answer with the wrong JSON, 50 MB,
a `date` without %N, terminal escape sequences or binary junk give one line each naming host, command and
expectation, never a traceback, an unbounded capture or a raw escape sequence. docs/testbed.md says how to
run these."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from sshnet import SshHosts
from test_hardening import STRING_KEYS, payloads, set_key
from test_testbed_ssh import RUN_CLI, assert_as_before, tayga_inventory, write_campaign

from xlatbench.cli import main
from xlatbench.setups.testbed.hostout import CAPTURE_LIMIT

pytestmark = [pytest.mark.root, pytest.mark.slow]


def toml_text(data: dict[str, Any]) -> str:
    """A small TOML writer for inventories (strings, numbers, lists, one level of host tables)."""
    def value(v: Any) -> str:
        if isinstance(v, str):
            return json.dumps(v)  # JSON's escapes are TOML's basic-string escapes
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)

    lines = [f"{k} = {value(v)}" for k, v in data.items() if k != "hosts"]
    for role, host in data["hosts"].items():
        lines += [f"\n[hosts.{role}]", *(f"{k} = {value(v)}" for k, v in host.items())]
    return "\n".join(lines) + "\n"


def run_cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, as a user runs it (a traceback would show on its stderr)."""
    return subprocess.run([sys.executable, "-c", RUN_CLI, *argv], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_shell_characters_in_every_value_are_refused_or_used_literally(
        hosts: SshHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # a relative `touch canary` would land here
    canary = tmp_path / "canary"
    good_path = tayga_inventory(hosts, tmp_path)
    good = tomllib.loads(good_path.read_text())
    before = hosts.snapshot()
    # 1. Every inventory string, every payload: check, dry-run, up and down each refuse in one line naming
    #    the key (the values are refused when the inventory is read, so this takes no SSH at all).
    refused = 0
    for key, also in STRING_KEYS:
        for n, payload in enumerate(payloads(canary)):
            data = json.loads(json.dumps(good))
            for path, setting in also.items():
                set_key(data, path, setting)
            set_key(data, key, payload)
            bad = tmp_path / f"bad-{n}.toml"
            bad.write_text(toml_text(data))
            for action in ("check", "dry-run", "up", "down"):
                assert main(["testbed", action, str(bad)]) != 0, (key, payload, action)
                err = capsys.readouterr().err.strip()
                assert f"{bad}: {key}" in err and "\n" not in err, (key, payload, action, err)
                refused += 1
            assert not canary.exists(), (key, payload)
    # 2. What is accepted is used literally: an ssh option (one argv word, never a shell's) and the campaign's
    #    tester arguments (quoted once on the client), through check, dry-run, up, down and a campaign with an
    #    idle capture; the client's tester is a wrapper that writes down the arguments it was given.
    literal = f"x$(touch {canary})`touch {canary}`;'\"*\ntouch {canary}"
    real = Path(good["hosts"]["client"]["tester"])
    wrapper = tmp_path / "tester-wrapper"
    argv_log = tmp_path / "tester-argv"
    wrapper.write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done >> {argv_log}\n"
                       f"exec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    data = json.loads(json.dumps(good))
    data["ssh_options"] += ["-o", f"SetEnv=XLB=$(touch${{IFS}}{canary})`touch${{IFS}}{canary}`;*"]
    data["hosts"]["client"]["tester"] = str(wrapper)
    inventory = tmp_path / "inventory-literal.toml"
    inventory.write_text(toml_text(data))
    for action in ("check", "dry-run", "up", "down"):
        done = run_cli("testbed", action, str(inventory))
        assert done.returncode == 0 and "Traceback" not in done.stderr, (action, done.stderr[-2000:])
    setup = f'kind = "testbed"\ninventory = "{inventory}"\ntopology = "464xlat"'
    extra_args = json.dumps(["--xdp-interface", literal])
    campaign, store = write_campaign(tmp_path, "literal", setup, max_rate=2000, idle_s=2,
                                     tester=f"extra_args = {extra_args}")
    done = run_cli("campaign", "run", "--no-progress", str(campaign), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    stored = [json.loads(line) for line in store.read_text().splitlines()]
    assert {"trial", "idle-run", "idle-mean"} <= {r["type"] for r in stored}
    # issue 31 item 6: every record's conditions carry each host's CPU clock, SMT and irqbalance settings
    for record in (r for r in stored if r["type"] in ("trial", "idle-run")):
        hosts_found = record["dut"]["preflight"]["hosts"]
        assert all({"cpufreq", "fixed_clock", "smt_active", "irqbalance"} <= set(h["cpu_settings"])
                   for h in hosts_found.values()), record["key"]
    assert not canary.exists()
    calls = [c.split("\0") for c in argv_log.read_text().split("\0--xdp-interface\0")[1:]]
    assert calls and all(c[0] == literal for c in calls), calls[:1]  # one argument, as written
    assert_as_before(hosts, before, tmp_path)
    print(f"{refused} refusals (one line each), {len(calls)} tester runs with the payload as one argument")


FAKES = {
    # dut1: `ip -j address` of the wrong JSON type; 50 MB on one line from `ethtool -i`
    "dut1": {"ip": 'case "$*" in "-j address show dev eth1") echo \'[{"addr_info": 5}]\';; '
                   '*) exec /usr/sbin/ip "$@";; esac',
             "ethtool": 'case "$1" in -i) printf "driver: "; head -c 50000000 /dev/zero | tr "\\0" A; echo;; '
                        '*) exec /usr/sbin/ethtool "$@";; esac'},
    # dut2: a BusyBox-style date (no %N)
    "dut2": {"date": 'case "$1" in +%s.%N) echo "$(/bin/date +%s).%N";; *) exec /bin/date "$@";; esac'},
    # server: a kernel name with terminal escape sequences, kdig present but broken, binary junk
    "server": {"uname": 'printf "evil\\033]0;owned\\007\\033[2J\\377\\376\\000x\\n"',
               "kdig": 'echo "kdig: error while loading shared libraries" >&2; exit 127'},
}


def fake_commands(hosts: SshHosts, role: str, bindir: Path, fakes: dict[str, str]) -> None:
    """The host's sshd runs every session with `bindir` first on PATH (its commands replaced by `fakes`)."""
    bindir.mkdir(parents=True)
    for name, body in fakes.items():
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    config = hosts.workdir / role / "sshd_config"
    config.write_text(config.read_text() + f'ForceCommand PATH={bindir}:$PATH; export PATH; '
                                           'eval "$SSH_ORIGINAL_COMMAND"\n')
    hosts.kill_sshd(role)
    hosts.restart_sshd(role)


def test_hosts_whose_commands_lie_give_one_line_each(hosts: SshHosts, tmp_path: Path) -> None:
    inventory = tayga_inventory(hosts, tmp_path)
    for role, fakes in FAKES.items():
        fake_commands(hosts, role, tmp_path / "fakebin" / role, fakes)
    before = hosts.snapshot()
    done = run_cli("testbed", "check", "--json", str(inventory))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(done.stdout) < 4 * CAPTURE_LIMIT, len(done.stdout)  # the preflight JSON stays bounded
    for text in (done.stdout, done.stderr):
        assert not any(c in text for c in "\x1b\x07\x00"), "a host's escape sequence reached the terminal"
    problems = json.loads(done.stdout)["problems"]
    expected = [
        "dut1: `ip -j address show dev eth1` answered '[{\"addr_info\": 5}]', not a JSON list of links",
        "dut1: the probe printed",  # 50 MB: counted, dropped, the host refused (its facts are incomplete)
        "dut2: `date +%s.%N` answered '",
        "server: kdig ",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert all("\n" not in p and len(p) < 600 for p in problems), problems
    server = json.loads(done.stdout)["hosts"]["server"]
    assert server["kernel"].startswith("evil\\x1b]0;owned\\x07\\x1b[2J")  # escaped, as stored
    print("\n".join(["check's problems:", *problems, "check's stderr:", done.stderr]))
    up = run_cli("testbed", "up", str(inventory))
    assert up.returncode != 0 and "Traceback" not in up.stderr and up.stderr.strip().count("\n") == 0, \
        up.stderr[-3000:]
    assert hosts.snapshot() == before

