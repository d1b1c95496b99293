"""Per-hop counters of a chain's hosts: every interface (incl. TUN devices), nft rule counters, and the UDP
counters of /proc/net/snmp (socket receive-buffer drops show there). The parsers (`parse_*`) serve both
worlds: the emulation reads the text per namespace here (`collect`), the testbed reads it over SSH
(setups/testbed/) and parses it with the same functions."""

from __future__ import annotations

import json
import subprocess

UDP_FIELDS = ("InDatagrams", "NoPorts", "InErrors", "OutDatagrams", "RcvbufErrors", "SndbufErrors")


def interface_counters(netns: str, host: str) -> dict[str, dict[str, int]]:
    out = subprocess.run(
        ["ip", "-n", netns, "-s", "-j", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    return parse_links(out, host)


def parse_links(out: str, host: str) -> dict[str, dict[str, int]]:
    """`ip -s -j link show` output -> "host:interface" counters."""
    counters = {}
    for link in json.loads(out):
        if link["ifname"] == "lo":
            continue
        stats = link.get("stats64", {})
        rx, tx = stats.get("rx", {}), stats.get("tx", {})
        counters[f"{host}:{link['ifname']}"] = {
            "rx_packets": rx.get("packets", 0),
            "rx_dropped": rx.get("dropped", 0),
            "rx_errors": rx.get("errors", 0),
            "rx_missed": rx.get("missed", 0),
            "tx_packets": tx.get("packets", 0),
            "tx_dropped": tx.get("dropped", 0),
            "tx_errors": tx.get("errors", 0),
        }
    return counters


def nft_counters(netns: str, host: str) -> dict[str, dict[str, int]]:
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-j", "list", "ruleset"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {}
    return parse_nft(done.stdout, host)


def parse_nft(out: str, host: str) -> dict[str, dict[str, int]]:
    """`nft -j list ruleset` output -> counters of rules that have one."""
    if not out.strip():
        return {}
    counters = {}
    for entry in json.loads(out).get("nftables", []):
        rule = entry.get("rule")
        if not rule:
            continue
        for expr in rule.get("expr", []):
            if "counter" in expr:
                key = f"{host}:nft:{rule['family']}/{rule['table']}/{rule['chain']}/{rule['handle']}"
                counters[key] = {"packets": expr["counter"]["packets"], "bytes": expr["counter"]["bytes"]}
    return counters


def udp_counters(netns: str, host: str) -> dict[str, dict[str, int]]:
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "cat", "/proc/net/snmp"], capture_output=True, text=True, check=True
    )
    return parse_snmp(done.stdout, host)


def parse_snmp(out: str, host: str) -> dict[str, dict[str, int]]:
    """/proc/net/snmp -> the "host:udp" counters."""
    lines = [line.split() for line in out.splitlines() if line.startswith("Udp:")]
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:]), strict=False))
    return {f"{host}:udp": {k: values.get(k, 0) for k in UDP_FIELDS}}


def collect(netns_of: dict[str, str]) -> dict[str, dict[str, int]]:
    """All counters of all hosts: keys "host:interface", "host:nft:family/table/chain/handle", "host:udp"."""
    counters: dict[str, dict[str, int]] = {}
    for host, netns in netns_of.items():
        counters.update(interface_counters(netns, host))
        counters.update(nft_counters(netns, host))
        counters.update(udp_counters(netns, host))
    return counters
