"""One CPU-list grammar: Python accepts exactly what the tester (dnsperf/src/cpulist.cpp) accepts."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from xlatbench.cli import build_parser
from xlatbench.cpulist import format_cpu_list, parse_cpu_list, parse_user_cpu_list
from xlatbench.scripts.xlatperf import find_tester

ALLOWED = sorted(os.sched_getaffinity(0))
LOW, HIGH = ALLOWED[0], ALLOWED[-1]
TEXTS = [f"{LOW}", f"{HIGH},{LOW}", f"{LOW}-{HIGH}", f"0{LOW}", f"0000{LOW}", f"00000{LOW}", f" {LOW}",
         f"{LOW},", f",{LOW}", f"{HIGH}-{LOW}" if HIGH > LOW else "1-0", f"{LOW},{LOW}", f"{LOW}-{LOW}",
         f"{LOW}-", f"-{LOW}", f"+{LOW}", "0x1", "1023", "1024", "99999", "1-2-3", "a", "0;1", "0 1"]


def read_by_xlatperf(text: str, tmp_path) -> tuple[bool, list[int] | None]:
    """(grammar accepted, CPUs as the tester read them or None) from a one-query xlatperf run."""
    out = tmp_path / "r.json"
    out.unlink(missing_ok=True)
    run = subprocess.run([str(find_tester()), "--server", "127.0.0.1", "--port", "9", "--queries", "1",
                          "--timeout", "0.01", "--sender-cpus", text, "--json", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=30, check=False)
    if "bad CPU list" in run.stderr:
        return False, None
    cpus = json.loads(out.read_text())["config"]["sender_cpus"] if run.returncode == 0 else None
    return True, cpus


@pytest.mark.parametrize("text", TEXTS)
def test_python_and_the_tester_read_a_cpu_list_alike(text: str, tmp_path) -> None:
    accepted, tester_cpus = read_by_xlatperf(text, tmp_path)
    try:
        cpus = parse_cpu_list(text)
    except ValueError as err:
        assert not accepted, f"xlatperf accepts {text!r}, Python says: {err}"
        assert str(err).startswith(f"bad CPU list {text!r}: ")
        return
    assert accepted, f"Python reads {text!r} as {cpus}, xlatperf refuses it"
    if tester_cpus is not None:  # the tester ran: every CPU was available to it
        assert list(cpus) == tester_cpus


@pytest.mark.parametrize("argv", [["knot", "start", "--cpus", "1-0"], ["setup", "up", "--knot-cpus", "0,0"],
                                  ["trial", "--dut", "loopback", "--rate", "1", "--knot-cpus", "x"],
                                  ["trial", "--dut", "loopback", "--rate", "1", "--sender-cpus", "0-"]])
def test_every_command_line_uses_that_grammar(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert "bad CPU list" in capsys.readouterr().err


def test_ranges_expand_in_the_order_written() -> None:
    assert parse_cpu_list("6,1-3") == (6, 1, 2, 3)


@pytest.mark.parametrize(("text", "cpus"), [("0,1", (0, 1)), ("[0, 1]", (0, 1)), (" [1-3] ", (1, 2, 3)),
                                            ("[0]", (0,)), ("6, 1-2", (6, 1, 2))])
def test_users_may_write_brackets_and_spaces(text: str, cpus: tuple[int, ...]) -> None:
    # Options and campaign files take TOML-like "[0, 1]"; the tester's grammar (and output) has neither.
    assert parse_user_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@pytest.mark.parametrize("text", ["[0", "[]", "[0,,1]", "0 1", "[1-0]", "[0, 0]", "(0)"])
def test_a_bad_user_cpu_list_is_named_as_written(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_user_cpu_list(text)
    assert str(err.value).startswith(f"bad CPU list {text!r}: ")
