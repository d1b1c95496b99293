"""Rendering without root: tayga configurations, the emulation script, the CLI's render and its errors."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from xlatbench.cli import main
from xlatbench.setups.backends import RenderContext
from xlatbench.setups.emulation.capture import Datagram, read_pcap
from xlatbench.setups.emulation.check import expected_on_inner_link
from xlatbench.setups.emulation.emulator import Emulation, EmulationConfig
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import BackendChoice, render
from xlatbench.setups.steps import Cmd, Daemon, WriteFile
from xlatbench.setups.transports import DryRun


def tayga_conf(topology_name: str, host: str, variant: str = "patched", prefix: str = "64:ff9b::/96") -> str:
    plan = render(
        topology(topology_name, prefix),
        BackendChoice.parse("tayga", {"tayga": variant}),
        RenderContext(world="netns", rundir="/run/x", prefix="xq"),
    )
    files = [s for s in plan[host] if isinstance(s, WriteFile)]
    assert len(files) == 1
    return files[0].text


def test_tayga_clat_maps_the_client_by_eam_with_the_paper_prefix():
    conf = tayga_conf("464xlat", "dut1").splitlines()
    assert "prefix 64:ff9b::/96" in conf
    assert "wkpf-strict no" in conf
    assert "map 192.168.0.4 2001:db8:2::4" in conf


def test_tayga_ce_and_br_use_the_map_address_from_the_arithmetic():
    for host in ("dut1", "dut2"):
        assert "map 192.0.2.8 2001:db8:ce:11b:0:c000:208:1b" in tayga_conf("mapt", host).splitlines()


def test_tayga_plat_is_dynamic_pool_plus_snat_to_pool4():
    plan = render(
        topology("464xlat"), BackendChoice.parse("tayga"), RenderContext(world="netns", prefix="xq")
    )
    lines = [" ".join(s.argv) for s in plan["dut2"] if isinstance(s, Cmd)]
    assert any("snat to 203.0.113.2" in line and "table" not in line for line in lines)
    assert any(line.startswith("nft add table ip xq_") for line in lines)
    assert sum(isinstance(s, Daemon) for s in plan["dut2"]) == 1


def test_stock_tayga_refuses_the_well_known_prefix_and_accepts_a_network_specific_one():
    with pytest.raises(ValueError, match="network-specific prefix"):
        tayga_conf("464xlat", "dut1", "stock")
    conf = tayga_conf("464xlat", "dut1", "stock", "2001:db8:64::/96").splitlines()
    assert "prefix 2001:db8:64::/96" in conf and "wkpf-strict no" not in conf


def test_stock_default_prefix_and_expectations_follow_the_prefix():
    config = EmulationConfig("464xlat", backends=BackendChoice.parse("tayga", {"tayga": "stock"}))
    assert config.effective_nat64_prefix == "2001:db8:64::/96"
    expect = expected_on_inner_link(topology("464xlat", config.effective_nat64_prefix))
    assert expect.dst == "2001:db8:64::cb00:7138"


def test_expected_packets_on_the_inner_link_are_the_papers():
    x464 = expected_on_inner_link(topology("464xlat"))
    assert (x464.src, x464.dst) == ("2001:db8:2::4", "64:ff9b::cb00:7138")
    mapt = expected_on_inner_link(topology("mapt"))
    assert (mapt.src, mapt.dst, mapt.sport_range) == (
        "2001:db8:ce:11b:0:c000:208:1b",
        "64:ff9b::cb00:7138",
        (55296, 57343),
    )
    assert topology("mapt").max_flows() == 2048 and topology("baseline").max_flows() is None
    assert topology("464xlat").max_flows() == 65536 - 1024  # the PLAT's one NAT44 address toward the server


def test_emulation_script_wraps_every_host_command_in_its_namespace():
    emulation = Emulation(EmulationConfig("mapt", prefix="xq"))
    out = io.StringIO()
    dry = DryRun(out, netns_of=emulation.netns_of)
    for host, step in emulation.plan():
        dry.run(host, step)
    text = out.getvalue()
    assert "ip netns add xq-napt" in text
    assert "ip -n xq-dut1 link add to_napt type veth peer name to_global netns xq-napt" in text
    assert "ip netns exec xq-napt iptables -t nat -A POSTROUTING" in text
    assert "ip netns exec xq-server ethtool -K enp5s0f0 tx off" in text
    assert "ip netns add napt" not in text  # napt is a namespace of its own in emulation


def test_cli_render_prints_the_papers_commands(capsys):
    assert main(["setup", "render", "464xlat", "--backend", "jool"]) == 0
    out = capsys.readouterr().out
    assert "### host dut2" in out and "jool pool4 add 203.0.113.2 --udp 0-65535" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["setup", "render", "mapt", "--backend", "snabb"], "unknown backend 'snabb'"),
        (["setup", "render", "mapt", "--backend", "ce=vpp"],
         "backend vpp does not serve the ce role of the mapt topology: choose jool or tayga or bpf "
         "(--backend ce=NAME)"),
        (["setup", "render", "mapt", "--backend", "cpe=tayga"], "unknown role 'cpe'"),
        (
            [
                "setup",
                "render",
                "464xlat",
                "--backend",
                "tayga",
                "--tayga",
                "stock",
                "--nat64-prefix",
                "64:ff9b::/96",
            ],
            "network-specific prefix",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_nonzero(capsys, argv, message):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_bad_prefix_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["setup", "down", "--prefix", "Bad-Prefix"])
    assert exit_info.value.code == 2
    assert "prefix 'Bad-Prefix' must be" in capsys.readouterr().err


def _pcap(frames: list[bytes]) -> bytes:
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    return head + b"".join(struct.pack("<IIII", 0, 0, len(f), len(f)) + f for f in frames)


def test_pcap_reader_finds_udp_over_ipv4_and_ipv6(tmp_path: Path):
    eth4 = b"\x00" * 12 + b"\x08\x00"
    ip4 = bytes([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 192, 168, 0, 4, 203, 0, 113, 56])
    udp = struct.pack("!HHHH", 40000, 53, 8, 0)
    eth6 = b"\x00" * 12 + b"\x86\xdd"
    src6 = bytes.fromhex("20010db800ce011b0000c0000208001b")
    dst6 = bytes.fromhex("0064ff9b0000000000000000cb007138")
    ip6 = b"\x60\x00\x00\x00\x00\x08\x11\x40" + src6 + dst6
    path = tmp_path / "x.pcap"
    path.write_bytes(_pcap([eth4 + ip4 + udp, eth6 + ip6 + struct.pack("!HHHH", 55555, 53, 8, 0)]))
    assert read_pcap(path) == [
        Datagram("192.168.0.4", 40000, "203.0.113.56", 53),
        Datagram("2001:db8:ce:11b:0:c000:208:1b", 55555, "64:ff9b::cb00:7138", 53),
    ]
