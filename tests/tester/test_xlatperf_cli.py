"""The xlatperf command line: help, version, one-line errors, exit codes, interruption."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest


def run(binary, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60, check=False)


def test_help_lists_every_option_with_its_default(xlatperf):
    out = run(xlatperf, "--help")
    assert out.returncode == 0
    for text in ("--server", "--port PORT:INT in [1 - 65535]=53", "--rate QPS=1000", "--duration S=10",
                 "--timeout S=0.25", "--domain NAME=dns64perf.test", "--qtype TYPE=AAAA",
                 "--subnet CIDR=10.0.0.0/16", "--threads N=1", "--ports-per-thread K=4", "queries/s",
                 "--json FILE", "--quiet"):
        assert text in out.stdout


def test_version(xlatperf):
    out = run(xlatperf, "--version")
    assert out.returncode == 0
    assert out.stdout.startswith("xlatperf 0.")


@pytest.mark.parametrize(("args", "expect"), [
    ((), "--server is required"),
    (("--server", "example.org"), "not an IPv4 or IPv6 address literal"),
    (("--server", "127.0.0.1", "--bogus"), "--bogus"),
    (("--server", "127.0.0.1", "--rate", "fast"), "--rate"),
    (("--server", "127.0.0.1", "--rate", "5", "--threads", "16"), "below --threads"),
    (("--server", "127.0.0.1", "--first-port", "65000", "--threads", "16", "--ports-per-thread", "100"),
     "past port 65535"),
    (("--server", "127.0.0.1", "--rate", "1000000"), "outstanding per socket"),
    (("--server", "127.0.0.1", "--duration", "5", "--queries", "7"), "excludes"),
    (("--server", "127.0.0.1", "--bind", "::1"), "different IP versions"),
    (("--server", "127.0.0.1", "--subnet", "10.0.0.0/40"), "bad subnet"),
    (("--server", "127.0.0.1", "--sender-cpus", "4096"), "--sender-cpus"),
])
def test_bad_options_give_one_line_and_exit_2(xlatperf, args, expect):
    out = run(xlatperf, *args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("xlatperf: ")
    assert expect in out.stderr


@pytest.mark.parametrize("args", [
    ("--bind", "192.0.2.1"),             # not an address of this host
    ("--json", "/nonexistent/dir/x.json"),
])
def test_a_run_that_cannot_start_gives_one_line_and_exit_1(xlatperf, args):
    out = run(xlatperf, "--server", "127.0.0.1", "--port", "9", "--queries", "10", *args)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("xlatperf: ")


def test_interrupt_ends_early_writes_results_and_says_so(xlatperf, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen([str(xlatperf), "--server", "127.0.0.1", "--port", "9", "--rate", "1000",
                             "--duration", "60", "--timeout", "0.1", "--json", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=10)
    assert proc.returncode == 130
    result = json.loads(out.read_text())
    assert result["verdict"]["status"] == "tester-limited"
    assert any("interrupted" in reason for reason in result["verdict"]["reasons"])
    assert 0 < result["totals"]["sent"] < 60_000
    assert "tester-limited" in stdout
