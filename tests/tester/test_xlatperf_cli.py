"""The xlatperf command line: help, version, one-line errors, exit codes, interruption."""

from __future__ import annotations

import json
import os
import signal
import stat
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


def test_json_to_a_device_is_refused_and_the_device_stays(xlatperf):
    """As root the result was once renamed over /dev/null, which became a regular file."""
    before = os.stat("/dev/null")
    out = run(xlatperf, "--server", "127.0.0.1", "--port", "9", "--queries", "10", "--json", "/dev/null")
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "--json /dev/null is a character device" in out.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_json_to_anything_but_a_regular_file_is_refused(xlatperf, tmp_path, kind):
    target = tmp_path / "target"
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        (tmp_path / "real.json").write_text("earlier\n")
        target.symlink_to(tmp_path / "real.json")
    else:
        os.mkfifo(target)
    out = run(xlatperf, "--server", "127.0.0.1", "--port", "9", "--queries", "10", "--json", str(target))
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert f"--json {target} is a" in out.stderr and "not a regular file" in out.stderr
    assert {p.name for p in tmp_path.iterdir()} <= {"target", "real.json"}  # no temporary file left
    if kind == "symlink":
        assert target.is_symlink() and (tmp_path / "real.json").read_text() == "earlier\n"


def test_json_replaces_a_regular_file_and_dash_writes_stdout(xlatperf, tmp_path, validator):
    old = tmp_path / "r.json"
    old.write_text("earlier\n")
    out = run(xlatperf, "--server", "127.0.0.1", "--port", "9", "--queries", "10", "--quiet",
              "--json", str(old))
    assert out.returncode == 0, out.stderr
    validator.validate(json.loads(old.read_text()))
    out = run(xlatperf, "--server", "127.0.0.1", "--port", "9", "--queries", "10", "--quiet", "--json", "-")
    assert out.returncode == 0, out.stderr
    validator.validate(json.loads(out.stdout))  # stdout is the document alone
    assert "verdict" in out.stderr  # the summary went to stderr


@pytest.mark.parametrize(("limit", "code"), [("-n 40", 1), ("-S -n 40", 0)])
def test_too_few_file_descriptors_are_named_as_such(xlatperf, limit, code):
    """48 sockets under an open-file limit of 40: a hard limit is refused naming it (before: "--bind or
    --source must be an address of this host"); a soft one the tester raises itself (before: the same
    error)."""
    argv = [str(xlatperf), "--server", "127.0.0.1", "--port", "9", "--threads", "2",
            "--ports-per-thread", "24", "--queries", "10", "--quiet"]
    out = subprocess.run(["bash", "-c", f'ulimit {limit} && exec "$0" "$@"', *argv], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == code, out.stderr
    if code:
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("xlatperf: too many open files")
        assert "address of this host" not in out.stderr
