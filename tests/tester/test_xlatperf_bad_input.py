"""Bad xlatperf invocations, table-driven: exit 2 (or 1 for run-time failures), one line naming the input.

The table is documented in docs/tester-bad-input.md; a test keeps the two in step.
"""

from __future__ import annotations

import shlex
import subprocess

import pytest

from xlatbench.paths import REPO_ROOT

SERVER = "--server 127.0.0.1"
DOC = REPO_ROOT / "docs" / "tester-bad-input.md"

# --encap (xlatperf --io xdp plays MAP-E CEs or lw4o6 subscribers): the reference document's rule and BR.
RULE = "2001:db8:ce::/51,192.0.2.0/24,13,0"
BR = "--encap-br 2001:db8:6::1"
MAPE = "S --io xdp --encap map-e --encap-rule "

# (arguments, "S" standing for --server 127.0.0.1; expected exit code; text the error line must contain)
CASES = [
    ('--rate 1000', 2, '--server'),
    ('S --rate 0', 2, '--rate'),
    ('S --rate -5', 2, '--rate'),
    ('S --rate nan', 2, '--rate'),
    ('S --rate inf', 2, '--rate'),
    ('S --rate abc', 2, '--rate'),
    ('S --rate 1e400', 2, '--rate'),
    ('S --duration 0', 2, '--duration'),
    ('S --duration -1', 2, '--duration'),
    ('S --duration nan', 2, '--duration'),
    ('S --duration 1e12', 2, '--duration'),
    ('S --queries -3', 2, '--queries'),
    ('S --queries 1.5', 2, '--queries'),
    ('S --queries 1e20', 2, '--queries'),
    ('S --queries 100000000000000', 2, '--queries'),
    ('S --rate 1 --queries 1000000', 2, '--queries'),
    ('S --duration 1 --queries 5', 2, '--duration'),
    ('S --threads 0', 2, '--threads'),
    ('S --threads 5000', 2, '--threads'),
    ('S --threads 4 --rate 2', 2, '--rate'),
    ('S --ports-per-thread 0', 2, '--ports-per-thread'),
    ('S --ports-per-thread 70000', 2, '--ports-per-thread'),
    ('S --first-port 65530 --ports-per-thread 10', 2, '--ports-per-thread'),
    ('S --port 0', 2, '--port'),
    ('S --port 70000', 2, '--port'),
    ('S --port http', 2, '--port'),
    ('--server 999.1.1.1', 2, '--server'),
    ('--server example.com', 2, '--server'),
    ('S --bind ::1', 2, '--bind'),
    ('S --bind 10.255.255.1', 1, '--bind or --source must be an address of this host'),
    ('S --source 10.255.255.1,40000-40100', 1, '--source must be an address of this host'),
    ('S --source foo', 2, "--source 'foo'"),
    ('S --source ::1', 2, '--source ::1'),
    ('S --source 127.0.0.1 --source ::1', 2, '--source ::1'),
    ('S --source 127.0.0.1,0-3', 2, '--source'),
    ('S --source 127.0.0.1,70000', 2, '--source'),
    ('S --source 127.0.0.1,5-3', 2, "'5-3'"),
    ('S --source 127.0.0.1,40000-40100,40050-40200', 2, "'40050-40200'"),
    ('S --source 127.0.0.1, --queries 5', 2, '--source'),
    ('S --source 127.0.0.1 --source 127.0.0.1', 2, 'given twice'),
    ('S --source 127.0.0.1 --bind 127.0.0.1', 2, '--bind'),
    ('S --source 127.0.0.1 --first-port 40000', 2, '--first-port'),
    ('S --source 127.0.0.1,40000-40001 -T 2 -K 4', 2, '--source 127.0.0.1,40000-40001'),
    ('S --source 127.0.0.1 --source 127.0.0.2 -K 1', 2, 'every source needs one'),
    ('S --timeout 0', 2, '--timeout'),
    ('S --timeout 100', 2, '--timeout'),
    ('S --rate 1000000 --ports-per-thread 1 --timeout 1', 2, '--timeout'),
    ('S --batch 0', 2, '--batch'),
    ('S --batch 5000', 2, '--batch'),
    ('S --gso maybe', 2, '--gso'),
    ('S --send-tick 0.5', 2, '--send-tick'),
    ('S --send-tick 0.005', 2, '--send-tick'),
    ('S --max-lag 0.0001', 2, '--max-lag'),
    ('S --max-lag -1', 2, '--max-lag'),
    ('S --recv-tick -1', 2, '--recv-tick'),
    ('S --send-tolerance 2', 2, '--send-tolerance'),
    ('S --send-tolerance-abs nan', 2, '--send-tolerance-abs'),
    ('S --rcvbuf 2000000000', 2, '--rcvbuf'),
    ('S --sndbuf -1', 2, '--sndbuf'),
    ('S --subnet 10.0.0.0', 2, 'subnet'),
    ('S --subnet 10.0.0.1/16', 2, 'subnet'),
    ('S --subnet 10.0.0.0/33', 2, 'subnet'),
    ('S --subnet 300.0.0.0/8', 2, 'subnet'),
    ('S --qtype BOGUS', 2, 'query type'),
    ('S --domain .bad', 2, 'domain'),
    ('S --domain a..b', 2, 'domain'),
    ('S --domain 64.36 --rate 100000 --duration 1 --ports-per-thread 1', 2, '--domain 64.36 has no letters'),
    ('S --threads 1024 --rate 1000000 --duration 86400 --ports-per-thread 1', 2, 'preallocate'),
    ('S --sender-cpus 999', 2, '--sender-cpus'),
    ('S --sender-cpus 1-0', 2, '--sender-cpus'),
    ('S --receiver-cpus x', 2, '--receiver-cpus'),
    ('S --sender-cpus 0,,1', 2, '--sender-cpus'),
    ('S --run-id bad/id', 2, '--run-id'),
    ('S --json /nonexistent/dir/out.json --queries 10', 1, '--json'),
    ('S --json /proc/version --queries 10', 1, '--json'),
    ('S --json /dev/null --queries 10', 1, '--json /dev/null is a character device'),
    ('S --json /tmp --queries 10', 1, '--json /tmp is a directory'),
    ('S --json /tmp/ --queries 10', 1, '--json /tmp/ names a directory'),
    (f'{MAPE}2001:db8:ce::/51,192.0.2.0/24,20,0 --encap-ces 10 {BR}', 2,
     'longer than the /64'),
    (f'{MAPE}2001:db8:ce::/51,192.0.2.0/24,5,0 --encap-ces 1 {BR}', 2,
     'do not cover'),
    (f'{MAPE}{RULE} --encap-ces 8193 {BR}', 2,
     '--encap-ces 8193 is more CEs than the rule holds'),
    (f'S --io xdp --encap lw4o6 --encap-rule 2001:db8:b4::/64,192.0.2.0/24,5,0 --encap-ces 9000 {BR}', 2,
     'more subscribers than the IPv4 pool'),
    (f'{MAPE}2001:db8::/40,192.0.2.0/24,24,0 --encap-ces 1 {BR}', 2,
     'port 0'),
    (f'{MAPE}{RULE} --encap-ces 1 --encap-ports 4096 {BR}', 2,
     '--encap-ports 4096'),
    (f'{MAPE}2001:db8:ce::/51 --encap-ces 1 {BR}', 2,
     '--encap-rule must be'),
    (f'S --io xdp --encap map-t --encap-rule {RULE} --encap-ces 1 {BR}', 2,
     '--encap must be map-e or lw4o6'),
    (f'{MAPE}{RULE} --encap-ces 1', 2,
     '--encap-br'),
    (f'{MAPE}{RULE} --encap-ces 1 --encap-br 192.0.2.1', 2,
     '--encap-br'),
    (f'{MAPE}{RULE} {BR}', 2,
     '--encap-ces'),
    (f'S --encap map-e --encap-rule {RULE} --encap-ces 1 {BR}', 2,
     'add --io xdp'),
    ('S --io xdp --encap-ces 10', 2,
     'add --encap'),
    (f'--server ::1 --io xdp --encap map-e --encap-rule {RULE} --encap-ces 1 {BR}', 2,
     '--server must be IPv4'),
    (f'{MAPE}{RULE} --encap-ces 1 {BR} --source 127.0.0.1,1000-2000', 2,
     'drop --source'),
    ('S --no-such-option', 2, '--no-such-option'),
    ('S extra-positional', 2, 'extra-positional'),
]


def arguments(args: str) -> list[str]:
    return shlex.split(args.replace("S", SERVER, 1) if args.startswith("S") else args)


@pytest.mark.parametrize(("args", "code", "names"), CASES, ids=[case[0] for case in CASES])
def test_a_bad_invocation_gives_one_line_naming_the_input(xlatperf, args, code, names):
    proc = subprocess.run([str(xlatperf), *arguments(args), "--quiet"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("xlatperf: ")
    assert names in lines[0]
    assert "Traceback" not in proc.stderr and "std::" not in proc.stderr


def test_the_table_has_at_least_forty_cases_and_the_doc_lists_each():
    assert len(CASES) >= 40
    doc = DOC.read_text()
    for args, code, _ in CASES:
        assert f"`{args}`" in doc and f"| {code} |" in doc, args
