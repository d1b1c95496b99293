"""Bad input, table-driven (docs/bad-input.md): each bad campaign file, store or command line gives one line
on stderr naming the file, the key and the fix, a non-zero exit status, no traceback, and changes nothing
(no store written, no server or directory left)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from xlatbench.cli import main
from xlatbench.zones.knot import loopback_root

PAPER_MAPT = Path(__file__).resolve().parents[2] / "docs" / "examples" / "paper-mapt.toml"
BASE = {
    "campaign": 'name = "bad"\ncores = [1]',
    "search": "max_rate_qps = 20000\nerror_qps = 500\nduration_s = 1\nrest_s = 0\nrepetitions = 1",
    "setup": 'name = "sim"\nkind = "fake"\ncapacity_qps = 5000',
}


STATEFUL = "[stateful]\n[[stateful.point]]\nconnections = 1000\n"
FAKE_NAT = 'name = "nat"\nkind = "fake-stateful"\ntable_size = 5000\nmax_cps = 1000'


def render(**sections: str | None) -> str:
    """A campaign file: BASE with some sections replaced (None drops one); `extra` is appended as is."""
    parts = []
    for name in ("campaign", "search", "tester", "idle", "setup"):
        body = sections.get(name, BASE.get(name))
        if body is not None:
            parts.append(f"{'[[setup]]' if name == 'setup' else f'[{name}]'}\n{body}\n")
    return "\n".join(parts) + (sections.get("extra") or "")


@dataclass(frozen=True)
class Bad:
    """One bad input: a campaign file's text (or None: no file), extra arguments, what the line must say."""

    name: str
    toml: str | None
    says: tuple[str, ...]
    argv: tuple[str, ...] = ()

    def command(self, file: Path, store: Path) -> list[str]:
        if self.toml is None:
            return [a.replace("STORE", str(store)) for a in self.argv]
        return [
            "campaign",
            *(self.argv or ("run",)),
            str(file),
            *(("--store", str(store)) if not self.argv else ()),
        ]


FILES = [
    Bad("no [campaign] table", render(campaign=None), ("missing [campaign] table",)),
    Bad("no campaign name", render(campaign="cores = [1]"), ("[campaign] name", "non-empty string")),
    Bad(
        "cores not a list",
        render(campaign='name = "bad"\ncores = "2"'),
        ("[campaign] cores", "a list such as"),
    ),
    Bad(
        "zero cores", render(campaign='name = "bad"\ncores = [0]'), ("[campaign] cores", "positive integers")
    ),
    Bad("negative cores", render(campaign='name = "bad"\ncores = [-2]'), ("[campaign] cores", "positive")),
    Bad(
        "methods not a list",
        render(campaign='name = "bad"\nmethods = "mlrsearch"'),
        ("[campaign] methods", "a list such as"),
    ),
    Bad(
        "bad MLRsearch goal",
        render(campaign='name = "bad"\nmethods = ["mlrsearch"]\ncores = [1]',
               idle='runs = 0\nmethod = "mlrsearch"',
               extra='[[search.goals]]\nname = "g"\nexceed_ratio = 1.5\n'),
        ("[[search]] #1", "goal 'g'", "exceed_ratio must be a number in [0, 1), got 1.5"),
    ),
    Bad(
        "unknown method",
        render(campaign='name = "bad"\nmethods = ["golden"]'),
        ("[campaign] methods", "golden", "use ['rfc8219-binary', 'mlrsearch']"),
    ),
    Bad(
        "retired method",
        render(campaign='name = "bad"\nmethods = ["fast"]'),
        ("[campaign] methods 'fast'", "retired on 2026-11-25 in favour of MLRsearch",
         "write 'mlrsearch' instead"),
    ),
    Bad(
        "unknown key in [campaign]",
        render(campaign='name = "bad"\ncolour = "red"'),
        ("[campaign]", "colour", "allowed:"),
    ),
    Bad("unknown top-level table", render(extra="[colour]\nx = 1\n"), ("top level", "colour", "allowed:")),
    Bad("no [search] table", render(search=None), ("no [search] table", "max_rate_qps")),
    Bad(
        "search without max_rate_qps",
        render(search="error_qps = 500"),
        ("[[search]] #1", "missing max_rate_qps", "add it"),
    ),
    Bad(
        "max_rate_qps not a number",
        render(search='max_rate_qps = "fast"\nerror_qps = 500'),
        ("[[search]] #1", "max_rate_qps must be a number", "'fast'"),
    ),
    Bad(
        "zero duration",
        render(search="max_rate_qps = 20000\nerror_qps = 500\nduration_s = 0"),
        ("duration_s must be > 0",),
    ),
    Bad(
        "negative rest",
        render(search="max_rate_qps = 20000\nerror_qps = 500\nrest_s = -1"),
        ("rest_s must be >= 0",),
    ),
    Bad(
        "zero repetitions",
        render(search="max_rate_qps = 20000\nerror_qps = 500\nrepetitions = 0"),
        ("repetitions must be > 0",),
    ),
    Bad(
        "loss ratio above 1",
        render(search="max_rate_qps = 20000\nerror_qps = 500\nloss_ratio = 2"),
        ("loss_ratio must be in [0, 1)",),
    ),
    Bad("no stop width", render(search="max_rate_qps = 20000"), ("set error_qps", "or error_ratio")),
    Bad(
        "misspelt search key",
        render(search="max_rate_qps = 20000\nerror_qps = 500\nduraton_s = 5"),
        ("[[search]] #1", "duraton_s", "allowed:"),
    ),
    Bad("no [[setup]]", render(setup=None),
        ("no [[setup]] tables", "kind = fake | loopback | chain | testbed")),
    Bad("unknown setup kind", render(setup='kind = "vm"'), ("[[setup]] #1", "kind must be one of", "'vm'")),
    Bad("fake without capacity", render(setup='kind = "fake"'), ("[[setup]] #1", "needs capacity_qps")),
    Bad(
        "negative capacity",
        render(setup='kind = "fake"\ncapacity_qps = -1'),
        ("[[setup]] #1 capacity_qps", "a number > 0", "-1"),
    ),
    Bad(
        "capacity as text",
        render(setup='kind = "fake"\ncapacity_qps = "lots"'),
        ("[[setup]] #1 capacity_qps", "a number > 0", "'lots'"),
    ),
    Bad(
        "knot on a CPU that does not exist",
        render(setup='kind = "loopback"\nknot_cpus = [99]'),
        ("[[setup]] #1 knot_cpus", "this machine's CPUs", "[99]"),
    ),
    Bad(
        "knot CPU list as garbage",
        render(setup='kind = "loopback"\nknot_cpus = "1-x"'),
        ("[[setup]] #1 knot_cpus", "such as [0, 1]"),
    ),
    Bad(
        "zero Knot workers",
        render(setup='kind = "loopback"\nudp_workers = 0'),
        ("[[setup]] #1 udp_workers", "an integer >= 1"),
    ),
    Bad(
        "unknown topology",
        render(setup='kind = "chain"\ntopology = "foo"'),
        ("[[setup]] #1 topology",
         "one of ['baseline', '464xlat', 'mapt', 'mape', 'lw4o6', 'plat', 'clat', 'ce', "
         "'br', 'nat44', 'mape-br', 'mape-ce', 'lwaftr', 'lwb4']", "'foo'"),
    ),
    Bad("chain without topology", render(setup='kind = "chain"'), ("[[setup]] #1", "needs topology")),
    Bad(
        "DUT on a CPU that does not exist",
        render(setup='kind = "chain"\ntopology = "baseline"\noptions = { dut_cpus = [99] }'),
        ("[[setup]] #1 options dut_cpus", "this machine's CPUs"),
    ),
    Bad(
        "unknown chain option",
        render(setup='kind = "chain"\ntopology = "baseline"\noptions = { colour = 1 }'),
        ("[[setup]] #1 options", "colour", "allowed:"),
    ),
    Bad(
        "bad chain prefix",
        render(setup='kind = "chain"\ntopology = "baseline"\noptions = { prefix = "XB!" }'),
        ("[[setup]] #1 options", "prefix 'XB!'", "lower-case letters"),
    ),
    Bad(
        "cpu_map to a missing CPU",
        render(setup='kind = "chain"\ntopology = "baseline"\ncpu_map = { 1 = [99] }'),
        ("[[setup]] #1 cpu_map 1", "this machine's CPUs"),
    ),
    Bad("testbed without inventory", render(setup='kind = "testbed"'),
        ("[[setup]] #1", "needs inventory = \"PATH\"")),
    Bad("testbed inventory missing", render(setup='kind = "testbed"\ninventory = "lab.toml"'),
        ("[[setup]] #1 inventory", "lab.toml: no such inventory file")),
    Bad("testbed inventory not an inventory", render(setup='kind = "testbed"\ninventory = "bad.toml"'),
        ("[[setup]] #1 inventory", "bad.toml", "unknown key")),
    Bad("testbed topology not the inventory's",
        render(setup=f'kind = "testbed"\ninventory = "{PAPER_MAPT}"\ntopology = "464xlat"'),
        ("[[setup]] #1 topology", "'464xlat'", "describes 'mapt'", "make them agree")),
    Bad("zero tester threads", render(tester="threads = 0"), ("[tester]", "threads must be > 0")),
    Bad("tester port out of range", render(tester="port = 70000"), ("[tester]", "port must be 1-65535")),
    Bad("fractional threads", render(tester="threads = 1.5"), ("[tester]", "threads must be an integer")),
    Bad("unknown tester key", render(tester="bogus = 1"), ("[tester]", "bogus", "allowed:")),
    Bad(
        "sender CPU list as garbage",
        render(tester='sender_cpus = "0-x"'),
        ("[tester] sender_cpus", "such as"),
    ),
    Bad("negative idle runs", render(idle="runs = -1"), ("[idle]", "runs must be >= 0")),
    Bad(
        "idle names no search",
        render(idle='runs = 1\nsearch = "nope"'),
        ("[idle] search 'nope'", "[[search]]"),
    ),
    Bad(
        "too many queries in flight",
        render(
            search="max_rate_qps = 900000\nerror_qps = 500",
            tester="ports_per_thread = 1",
            setup='kind = "loopback"',
        ),
        ("max_rate_qps", "set [tester] threads x ports_per_thread >= 7"),
    ),
    Bad("not TOML", "[campaign\nname =", ("not valid TOML",)),
    Bad(
        "plan of a bad file",
        render(campaign='name = "bad"\ncolour = 1'),
        ("[campaign]", "colour", "allowed:"),
        argv=("plan",),
    ),
]

CLI = [
    Bad(
        "missing campaign file",
        None,
        ("nothere.toml", "no such campaign file"),
        argv=("campaign", "run", "nothere.toml"),
    ),
    Bad(
        "negative --max-rate",
        None,
        ("--max-rate", "positive number", "--help"),
        argv=("search", "--dut", "fake", "--max-rate", "-5", "--store", "STORE"),
    ),
    Bad("zero --rate", None, ("--rate", "positive number"), argv=("trial", "--dut", "fake", "--rate", "0")),
    Bad("unknown --dut", None, ("--dut", "invalid choice: 'vm'"), argv=("search", "--dut", "vm")),
    Bad(
        "zero --cores",
        None,
        ("cores", "positive integers"),
        argv=("search", "--dut", "fake", "--cores", "0", "--store", "STORE"),
    ),
    Bad(
        "more --cores than the DUT has",
        None,
        ("--cores 99", "only 16 core(s)"),
        argv=("trial", "--dut", "fake", "--rate", "100", "--cores", "99"),
    ),
    Bad(
        "zero --repetitions",
        None,
        ("repetitions must be > 0",),
        argv=("search", "--dut", "fake", "--repetitions", "0", "--store", "STORE"),
    ),
    Bad(
        "--knot-cpus not a list",
        None,
        ("--knot-cpus", "bad CPU list 'a'", "ranges like 0,2-3"),
        argv=("trial", "--dut", "loopback", "--rate", "1000", "--knot-cpus", "a"),
    ),
    Bad(
        "--knot-cpus on a missing CPU",
        None,
        ("knot_cpus", "this machine's CPUs"),
        argv=("trial", "--dut", "loopback", "--rate", "1000", "--knot-cpus", "99"),
    ),
    Bad(
        "--chain-option without =",
        None,
        ("--chain-option", "KEY=VALUE", "'foo'"),
        argv=("trial", "--dut", "chain", "--chain-option", "foo", "--rate", "10"),
    ),
    Bad(
        "unknown --topology",
        None,
        ("topology", "one of ['baseline'"),
        argv=("search", "--dut", "chain", "--topology", "foo", "--store", "STORE"),
    ),
    Bad(
        "--error-ratio above 1",
        None,
        ("error_ratio must be in (0, 1)",),
        argv=("search", "--dut", "fake", "--error-ratio", "3", "--store", "STORE"),
    ),
    Bad("[[procedure]] unknown kind", render(extra='[[procedure]]\nkind = "jitter"\n'),
        ("[[procedure]] #1", "kind must be one of ['latency', 'pdv', 'flr'], got 'jitter'")),
    Bad("RFC 9693 procedure on a setup without a stateful DUT",
        render(extra=STATEFUL + '[[procedure]]\nkind = "connection-rate"\nmax_cps = 1000\nerror_cps = 10\n'),
        ("[[setup]] #1 (sim)", "kind 'fake' has no stateful DUT for RFC 9693's procedures")),
    Bad("RFC 9693 capacity search's beta out of range",
        render(setup=FAKE_NAT, extra=STATEFUL + '[[procedure]]\nkind = "table-capacity"\nc0 = 100\n'
               'max_cps = 1000\nerror_cps = 10\nbeta = 1.5\ngamma = 0.4\n'),
        ("[[procedure]] #1 (table-capacity)", "beta must be in (0, 1), got 1.5")),
    Bad("RFC 9693 procedure without [stateful]",
        render(setup=FAKE_NAT, extra='[[procedure]]\nkind = "teardown"\nsetup_rate_cps = 1000\n'),
        ("RFC 9693 procedures need a [stateful] table",)),
    Bad("[[procedure]] zero repetitions", render(extra='[[procedure]]\nkind = "latency"\nrepetitions = 0\n'),
        ("[[procedure]] #1", "repetitions must be an integer >= 1, got 0")),
    Bad("[[procedure]] FLR fraction out of range",
        render(extra='[[procedure]]\nkind = "flr"\nfractions = [1.0, 0]\n'),
        ("[[procedure]] #1", "fractions must be a non-empty list of numbers in (0, 2]")),
    Bad("[server] io not a mode", render(extra='[server]\nio = "dpdk"\n'),
        ("[server] io must be one of ['socket', 'xdp'], got 'dpdk'",)),
    Bad("[server] unknown key", render(extra='[server]\nworkers = 2\n'),
        ("[server]", "unknown key(s) ['workers']")),
    Bad("[server] io xdp on loopback",
        render(setup='name = "lo"\nkind = "loopback"', extra='[server]\nio = "xdp"\n'),
        ("[[setup]] #1 (lo)", "needs a network interface", "use a chain setup")),
    Bad("[server] io xdp on a testbed whose BR drops zero checksums",
        render(setup=f'name = "lab"\nkind = "testbed"\ninventory = "{PAPER_MAPT}"',
               extra='[server]\nio = "xdp"\n'),
        ("[[setup]] #1 (lab)", "[server] io = \"xdp\" cannot serve", "jool drops such a datagram",
         "hosts.dut2.backend = \"bpf\"")),
    Bad("[server] io contradicts knot_io",
        render(setup='name = "b"\nkind = "chain"\ntopology = "baseline"\noptions = { knot_io = "socket" }',
               extra='[server]\nio = "xdp"\n'),
        ("[[setup]] #1 (b)", "knot_io = 'socket' contradicts [server] io = 'xdp'")),
    Bad("[server] io xdp through a translator",
        render(setup='name = "x"\nkind = "chain"\ntopology = "464xlat"', extra='[server]\nio = "xdp"\n'),
        ("[[setup]] #1 (x) options", "cannot serve the 464xlat chain", "UDP checksum 0",
         "use knot_io = 'socket'")),
    Bad("chain knot_io not a mode",
        render(setup='name = "b"\nkind = "chain"\ntopology = "baseline"\noptions = { knot_io = "af_xdp" }'),
        ("[[setup]] #1 options", "knot_io must be one of ['socket', 'xdp'], got 'af_xdp'")),
    Bad("[tester] io not a mode", render(tester='io = "af_xdp"'),
        ("[tester]", "tester io must be one of ['socket', 'xdp'], got 'af_xdp'")),
    Bad("[tester] io xdp with threads", render(tester='io = "xdp"\nthreads = 2'),
        ("[tester]", "io = 'xdp' runs one sender/receiver pair", "set threads = 1")),
    Bad("[tester] io xdp beyond the tester's flows",
        render(tester='io = "xdp"\nports_per_thread = 16777217'),
        ("[tester]", "at most 16777216 flows (xlatperf --io xdp -K)")),
    Bad("[tester] io xdp beyond the chain's client addresses",
        render(setup='name = "x"\nkind = "chain"\ntopology = "464xlat"',
               tester='io = "xdp"\nports_per_thread = 45537'),
        ("[[setup]] #1 (x)", "need 2 source addresses of 45536 ports", "carries 1 client address(es)",
         "use at most 45536 flows or a lower first_port")),
    Bad("[tester] socket ports past 65535",
        render(tester='first_port = 65000\nports_per_thread = 600'),
        ("[tester]", "source ports 65000-65599 run past 65535", "lower first_port")),
    Bad("[tester] io xdp on loopback", render(setup='name = "lo"\nkind = "loopback"', tester='io = "xdp"'),
        ("[[setup]] #1 (lo)", "[tester] io = \"xdp\" needs a network interface", "use a chain setup")),
    Bad("--io not a mode", None, ("--io", "invalid choice: 'dpdk'"),
        argv=("search", "--dut", "chain", "--io", "dpdk", "--store", "STORE")),
    Bad("--io xdp on loopback", None, ("[tester] io = \"xdp\" needs a network interface",),
        argv=("search", "--dut", "loopback", "--io", "xdp", "--max-rate", "5000", "--store", "STORE")),
    Bad("bad --prefix", None, ("--prefix", "lower-case letters"), argv=("setup", "down", "--prefix", "XB")),
    Bad("unknown command", None, ("invalid choice: 'bogus'",), argv=("bogus",)),
]


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    try:
        status = main(argv)
    except SystemExit as done:  # argparse
        status = int(done.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("bad", FILES + CLI, ids=lambda b: b.name)
def test_bad_input_is_one_line_naming_file_key_and_fix(
    bad: Bad, tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    file, store = tmp_path / "bad.toml", tmp_path / "results" / "bad.jsonl"
    if bad.toml is not None:
        file.write_text(bad.toml)
    before = _tree(tmp_path)
    status, err = _run(capsys, bad.command(file, store))
    lines = err.strip().splitlines()
    assert status != 0
    assert len(lines) == 1, err
    assert "Traceback" not in err and "__init__()" not in err, err
    for fragment in bad.says + ((str(file),) if bad.toml is not None else ()):
        assert fragment in lines[0], f"{fragment!r} not in: {lines[0]}"
    assert _tree(tmp_path) == before, "a bad input changed files"
    assert not loopback_root().exists() or not any(loopback_root().iterdir())


def _fake_store(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> tuple[Path, Path]:
    file, store = tmp_path / f"{name}.toml", tmp_path / "store.jsonl"
    file.write_text(render(campaign=f'name = "{name}"\ncores = [1]'))
    return file, store


def test_a_store_of_another_campaign_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, store = _fake_store(capsys, tmp_path, "first")
    status, err = _run(capsys, ["campaign", "run", str(first), "--store", str(store), "--no-progress"])
    assert status == 0, err
    other, _ = _fake_store(capsys, tmp_path, "other")
    before = store.read_bytes()
    status, err = _run(capsys, ["campaign", "run", str(other), "--store", str(store), "--no-progress"])
    assert status != 0 and len(err.strip().splitlines()) == 1, err
    assert str(store) in err and "another campaign file" in err and "--store NEW.jsonl" in err
    assert store.read_bytes() == before


def test_a_store_with_a_damaged_line_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file, store = _fake_store(capsys, tmp_path, "damaged")
    status, err = _run(capsys, ["campaign", "run", str(file), "--store", str(store), "--no-progress"])
    assert status == 0, err
    lines = store.read_bytes().splitlines(keepends=True)
    store.write_bytes(b"".join(lines[:2]) + b'{"key": "x", oops\n' + b"".join(lines[2:]))
    before = store.read_bytes()
    status, err = _run(capsys, ["campaign", "run", str(file), "--store", str(store), "--no-progress"])
    assert status != 0 and len(err.strip().splitlines()) == 1, err
    assert f"{store}:3: not a JSON record" in err and "mend or delete that line" in err
    assert store.read_bytes() == before


def test_a_torn_last_line_is_not_an_error_but_moved_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file, store = _fake_store(capsys, tmp_path, "torn")
    status, err = _run(capsys, ["campaign", "run", str(file), "--store", str(store), "--no-progress"])
    assert status == 0, err
    whole = store.read_bytes()
    store.write_bytes(whole + b'{"key": "cut-by-a-ki')
    status, err = _run(capsys, ["campaign", "run", str(file), "--store", str(store), "--no-progress"])
    assert status == 0 and "moved aside" in err
    assert (
        store.read_bytes() == whole
        and (tmp_path / "store.jsonl.torn-1").read_bytes() == b'{"key": "cut-by-a-ki'
    )


def test_the_table_has_at_least_twenty_cases() -> None:
    assert (
        len(FILES) >= 20
        and len(CLI) >= 10
        and os.path.exists(Path(__file__).parents[2] / "docs/bad-input.md")
    )
