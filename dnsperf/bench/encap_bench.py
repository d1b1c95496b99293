"""Issue 34 item 6: the encapsulating tester's (xlatperf --io xdp --encap) CPU and memory beside plain AF_XDP.

Prints figures and the target; asserts nothing (docs/benchmarks.md). A veth pair from the root namespace into
a server namespace (dnsperf/bench/xdplink.py); there build/dnsperf/dns_reflector answers every query frame,
plain IPv4/UDP or IPv4 inside IPv6, with one AAAA record (pinned to CPU 1; the namespace's kernel drops the
frames the reflector answers, so nothing else replies). xlatperf runs in the root namespace, both threads
pinned to CPU 0, in turn:
  plain   --source TESTER_V4,20000-20511 (512 flows), pseudorandom order;
  encap   --encap map-e from N CEs (each CE sending from all of its port set but port 0's place), pseudorandom
          order, to the BR 2001:db8:6::1 on the namespace's end;
at each --rates rate for --duration s, --repeat times, alternating, so a drifting load hits both alike.
Figures per trial: the tester's CPU (user + system of the child, os.wait4) per million valid replies, its
peak RSS (ru_maxrss), what the JSON says the flow table and the CEs take. The CE counts (--ces) give the
memory comparison: 1 000 CEs of the reference document's rule (2001:db8:ce::/51, 192.0.2.0/24, 13 EA bits),
1 M (2001:db8::/40, 192.0.2.0/24, 20 EA bits: 15 ports each), 16 M (2001:db8::/40, 100.64.0.0/16, 24 EA bits:
255 ports each; a /24 would leave one port per CE, which PSID offset 0 puts at port 0 for CE 0).

Run as root, under the machine lock (about 2 minutes):
    flock /tmp/xlatbench-machine.lock env XLATBENCH_BUILD=build PYTHONPATH=dnsperf/bench \\
        .venv/bin/python dnsperf/bench/encap_bench.py --out encap-bench.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from xdplink import SERVER_V4, TESTER_V4, XdpLink, xdp_link

from xlatbench.paths import tester_binary

BR = "2001:db8:6::1"
RULES = {  # CEs -> the rule that holds them
    1_000: "2001:db8:ce::/51,192.0.2.0/24,13,0",
    1_000_000: "2001:db8::/40,192.0.2.0/24,20,0",
    16_777_216: "2001:db8::/40,100.64.0.0/16,24,0",
}
TESTER_CPU, SERVER_CPU = "0", "1"


def reflector_binary() -> Path:
    return tester_binary().with_name("dns_reflector")


def prepare(link: XdpLink) -> None:
    run = lambda *argv: subprocess.run(argv, check=True, capture_output=True, text=True)  # noqa: E731
    run(*link.inside("ip", "-6", "addr", "add", f"{BR}/64", "dev", link.inner, "nodad"))
    rules = ("table inet xlbrefl {\nchain input {\ntype filter hook input priority 0; policy accept;\n"
             "udp dport 53 drop\nmeta l4proto 4 drop\n}\n}\n")
    subprocess.run(link.inside("nft", "-f", "-"), input=rules, text=True, check=True)
    run("ip", "-6", "route", "add", "2001:db8:6::/64", "dev", link.outer)


def tester_args(link: XdpLink, mode: str, ces: int, rate: int, duration: float) -> list[str]:
    common = ["--server", SERVER_V4, "--io", "xdp", "--xdp-interface", link.outer,
              "--flow-order", "pseudorandom", "--rate", str(rate), "--duration", str(duration),
              "--sender-cpus", TESTER_CPU, "--receiver-cpus", TESTER_CPU, "--quiet"]
    if mode == "plain":
        return [*common, "--source", f"{TESTER_V4},20000-20511", "--ports-per-thread", "512"]
    return [*common, "--encap", "map-e", "--encap-rule", RULES[ces], "--encap-ces", str(ces),
            "--encap-br", BR]


def trial(link: XdpLink, mode: str, ces: int, rate: int, duration: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        argv = [str(tester_binary()), *tester_args(link, mode, ces, rate, duration), "--json", str(out)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stderr = proc.stderr.read() if proc.stderr else ""
        doc = json.loads(out.read_text()) if out.exists() else {}
    totals, io = doc.get("totals", {}), doc.get("io", {})
    cpu_s = usage.ru_utime + usage.ru_stime
    valid = totals.get("valid", 0)
    return {
        "mode": mode, "ces": ces if mode == "encap" else None, "rate_qps": rate, "duration_s": duration,
        "exit": proc.returncode, "stderr": stderr.strip()[-300:], "sent": totals.get("sent"), "valid": valid,
        "verdict": doc.get("verdict", {}).get("status"), "cpu_s": round(cpu_s, 3),
        "cpu_s_per_million_valid": round(cpu_s / valid * 1e6, 3) if valid else None,
        "max_rss_kib": usage.ru_maxrss, "flows": io.get("flows"),
        "matching_bytes": io.get("matching", {}).get("total_bytes"),
        "ce_table_bytes": io.get("encap", {}).get("table_bytes"),
        "wrong_ce": io.get("encap", {}).get("wrong_ce"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50000,100000", help="queries/s, comma-separated")
    parser.add_argument("--duration", type=float, default=5.0, help="s per trial")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cpu-ces", type=int, default=1_000_000,
                        help="CEs of the encap trials of the CPU figure")
    parser.add_argument("--ces", default="1000,1000000,16777216", help="CE counts of the memory figure")
    parser.add_argument("--memory-rate", type=int, default=20000, help="rate of the memory trials, queries/s")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    ce_counts = [int(c) for c in args.ces.split(",")]
    trials: list[dict] = []
    with xdp_link("xeb" + secrets.token_hex(2)) as link:
        prepare(link)
        argv = link.inside("taskset", "-c", SERVER_CPU, str(reflector_binary()), link.inner)
        reflector = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        try:
            assert reflector.stdout is not None and reflector.stdout.readline().strip() == "ready"
            for rate in rates:
                for _ in range(args.repeat):
                    for mode in ("plain", "encap"):
                        trials.append(trial(link, mode, args.cpu_ces, rate, args.duration))
                        print(json.dumps(trials[-1]), flush=True)
            for ces in ce_counts:
                trials.append(trial(link, "encap", ces, args.memory_rate, 2.0))
                print(json.dumps(trials[-1]), flush=True)
        finally:
            reflector.terminate()
            counts, _ = reflector.communicate(timeout=10)
    print("reflector:", counts.strip().splitlines()[-1] if counts.strip() else "?")
    print(f"\n{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}, "
          f"{os.uname().release}, tester {tester_binary()}, tester and its threads on CPU {TESTER_CPU}, "
          f"reflector on CPU {SERVER_CPU}")
    print("\n| rate (q/s) | plain CPU-s / 10^6 valid | encap CPU-s / 10^6 valid | encap / plain |")
    print("|---|---|---|---|")
    def figure(mode: str, rate: int) -> float | None:
        values = [t["cpu_s_per_million_valid"] for t in trials if t["mode"] == mode and t["rate_qps"] == rate
                  and t["sent"] and t["valid"] == t["sent"] and t.get("ces") in (None, args.cpu_ces)]
        return median(values) if values else None

    for rate in rates:
        plain, encap = figure("plain", rate), figure("encap", rate)
        ratio = f"{encap / plain:.3f}" if plain and encap else "n/a"
        print(f"| {rate} | {plain} | {encap} | {ratio} (target <= 1.20) |")
    print("\n| CEs | flows | peak RSS (MiB) | CE table (B) | flow table (B) | valid / sent |")
    print("|---|---|---|---|---|---|")
    for t in trials[-len(ce_counts):]:
        print(f"| {t['ces']} | {t['flows']} | {t['max_rss_kib'] / 1024:.1f} | {t['ce_table_bytes']} | "
              f"{t['matching_bytes']} | {t['valid']} / {t['sent']} |")
    if args.out:
        args.out.write_text(json.dumps({"trials": trials}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
