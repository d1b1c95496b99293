"""The real-testbed backends of MAP-E and lw4o6 (issue 34): FD.io VPP's MAP plugin as the BR and the lwAFTR,
the kernel's ip6tnl as the CE and the lwB4. Their rendering against known answers worked out by hand (the
paper's CE 0x11b: end-user prefix 2001:db8:ce:11b::/64, IPv4 192.0.2.8, PSID 27, so RFC 7597's MAP address
2001:db8:ce:11b:0:c000:208:1b; lwB4 subscriber 283: 2001:db8:b4::11c), every step's undo, the one-line
refusals (a host without VPP, its MAP plugin or ip6tnl; a role a backend does not play) and the dry runs."""

from __future__ import annotations

import io
import subprocess
import tomllib
from pathlib import Path

import pytest

from xlatbench.cli import main
from xlatbench.setups.backends import RenderContext, registry
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import BackendChoice, render_host
from xlatbench.setups.steps import Cmd, Step, WriteFile
from xlatbench.setups.testbed.bringup import batch_script, plan
from xlatbench.setups.testbed.cli import dry_run
from xlatbench.setups.testbed.inventory import InventoryError, load_inventory, parse_inventory
from xlatbench.setups.testbed.undo import undo_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "lab-mape-vpp.toml"
CTX = RenderContext(world="real", rundir="/run/x", prefix="xlatbench")
W = "sh /run/x/vppctl-checked"
ENCAP = "mape-ce=ip6tnl,mape-br=vpp,lwb4=ip6tnl,lwaftr=vpp"


def _steps(name: str, host: str, ctx: RenderContext = CTX, **options: int) -> list[Step]:
    """One DUT host's steps (the single-DUT topologies' tester and server hosts carry the emulation's own
    tunnel end, which no testbed backend renders)."""
    topo = topology(name, **options)  # type: ignore[arg-type]
    return render_host(topo, topo.host(host), BackendChoice.parse(ENCAP), ctx)


def _lines(name: str, host: str, **options: int) -> list[str]:
    return [s.shell() for s in _steps(name, host, **options)]


def _vpp_host(first: str) -> list[str]:
    """A VPP host's interfaces as the BR topologies give them: the CE-BR link, then the server's."""
    return [
        "ip link set enp5s0f0 up",
        "sysctl -w net.ipv6.conf.enp5s0f0.disable_ipv6=1",
        f"{W} create host-interface name enp5s0f0",
        f"{W} set interface state host-enp5s0f0 up",
        f"{W} set interface ip address host-enp5s0f0 2001:db8:6::2/64",
        "ip link set enp5s0f1 up",
        "sysctl -w net.ipv6.conf.enp5s0f1.disable_ipv6=1",
        f"{W} create host-interface name enp5s0f1",
        f"{W} set interface state host-enp5s0f1 up",
        f"{W} set interface ip address host-enp5s0f1 203.0.113.2/24",
        f"{W} ip route add {first}",
        "# vpp: forwarding is VPP's own (no sysctl)",
    ]


def test_vpp_renders_the_mape_br_as_one_map_domain() -> None:
    dut2 = _lines("mape", "dut2")
    assert dut2[0].startswith("cat > /run/x/vppctl-checked <<'EOF'\n#!/bin/sh")
    assert dut2[1:] == [
        *_vpp_host("2001:db8:ce::/51 via 2001:db8:6::11b"),
        f"{W} map add domain tag xlatbench-mape-0 ip4-pfx 192.0.2.0/24 ip6-pfx 2001:db8:ce::/51 "
        "ip6-src 2001:db8:6::1/128 ea-bits-len 13 psid-offset 0 psid-len 5",
        f"{W} map interface host-enp5s0f0",
        f"{W} map interface host-enp5s0f1",
    ]
    assert _lines("mape-br", "dut1", ces=1000)[1:] == dut2[1:], "the single-DUT BR is the same host"


def test_vpp_renders_the_lwaftr_as_a_domain_per_address_and_the_binding_table() -> None:
    steps = _steps("lw4o6", "dut2")
    shown = [s.shell() for s in steps]
    domains = [line for line in shown if " map add domain " in line]
    assert len(domains) == 1024 // 32  # 1024 subscribers, 32 PSIDs per address of 192.0.2.0/24
    assert domains[0] == (f"{W} map add domain tag xlatbench-lw-192.0.2.0 ip4-pfx 192.0.2.0/32 ip6-pfx "
                          "2001:db8:b4::/64 ip6-src 2001:db8:6::1/128 ea-bits-len 0 psid-offset 0 psid-len 5")
    assert domains[-1].split(" ip4-pfx ")[1].startswith("192.0.2.31/32 ")
    table = next(s for s in steps if isinstance(s, WriteFile) and s.path == "/run/x/lwaftr-bindings")
    rows = table.text.splitlines()
    assert len(rows) == 1024
    assert rows[0] == "xlatbench-lw-192.0.2.0 0 2001:db8:b4::1"
    assert rows[283] == "xlatbench-lw-192.0.2.8 27 2001:db8:b4::11c"  # the dual-DUT lwB4
    assert rows[-1] == "xlatbench-lw-192.0.2.31 31 2001:db8:b4::400"
    assert shown[-3:] == ["sh /run/x/lwaftr-rules.sh", f"{W} map interface host-enp5s0f0",
                          f"{W} map interface host-enp5s0f1"]


def test_the_lwaftr_rules_script_turns_the_table_into_vpps_rules(tmp_path: Path) -> None:
    """The script on a host: a fake vppctl answering `show map domain` as VPP prints it (domains numbered
    by VPP, not in our order) and recording `exec`; every binding becomes one rule of its domain's index."""
    steps = _steps("lwaftr", "dut1", RenderContext(world="real", rundir=str(tmp_path), prefix="xlatbench"),
                   ces=40)
    for step in steps:
        if isinstance(step, WriteFile):
            Path(step.path).write_text(step.text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vppctl").write_text(
        "#!/bin/sh\n"
        "if [ \"$1 $2 $3\" = 'show map domain' ]; then\n"
        "  echo '[7] tag {xlatbench-lw-192.0.2.1} ip4-pfx 192.0.2.1/32 ip6-pfx 2001:db8:b4::/64 ip6-src "
        "2001:db8:6::1/128 ea-bits-len 0 psid-offset 0 psid-len 5 mtu 0 '\n"
        "  echo '[3] tag {xlatbench-lw-192.0.2.0} ip4-pfx 192.0.2.0/32 ip6-pfx 2001:db8:b4::/64 ip6-src "
        "2001:db8:6::1/128 ea-bits-len 0 psid-offset 0 psid-len 5 mtu 0 '\n"
        "  echo ' rule psid: 0 ip6-dst 2001:db8:b4::1'\n"
        f"elif [ \"$1\" = exec ]; then cp \"$2\" {tmp_path}/executed; fi\n")
    (bin_dir / "vppctl").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    done = subprocess.run(["sh", str(tmp_path / "lwaftr-rules.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rules = (tmp_path / "executed").read_text().splitlines()
    assert len(rules) == 40
    assert rules[0] == "map add rule index 3 psid 0 ip6-dst 2001:db8:b4::1"
    assert rules[39] == "map add rule index 7 psid 7 ip6-dst 2001:db8:b4::28"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "executed", "lwaftr-bindings",
                                                         "lwaftr-rules.sh", "vppctl-checked"]
    (bin_dir / "vppctl").write_text("#!/bin/sh\necho '[3] tag {xlatbench-lw-192.0.2.0} ip4-pfx x'\n")
    done = subprocess.run(["sh", str(tmp_path / "lwaftr-rules.sh")], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.strip() == "no MAP domain tagged xlatbench-lw-192.0.2.1"


def test_the_checking_wrapper_fails_on_what_vppctl_exits_0_with(tmp_path: Path) -> None:
    steps = _steps("mape-br", "dut1", RenderContext(world="real", rundir=str(tmp_path), prefix="xlatbench"))
    wrapper = next(s for s in steps if isinstance(s, WriteFile))
    Path(wrapper.path).write_text(wrapper.text)
    fake = tmp_path / "vppctl"

    def run(answer: str, *words: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "answer").write_text(answer)
        fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
        fake.chmod(0o755)
        return subprocess.run(["sh", wrapper.path, *words], env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
                              capture_output=True, text=True)

    assert run("", "map", "interface", "host-eth1").returncode == 0
    assert run("host-eth1", "create", "host-interface", "name", "eth1").returncode == 0
    failed = run("unknown input `foo'", "map", "add", "domain", "foo")
    assert failed.returncode == 1 and failed.stderr == "vppctl map add domain foo: unknown input `foo'\n"
    assert run("create host-interface: failed", "create", "host-interface", "name", "eth1").returncode == 1
    missing = subprocess.run(["/bin/sh", wrapper.path, "show", "version"], env={"PATH": "/nonexistent"},
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "vppctl" in missing.stderr


def test_ip6tnl_renders_the_ce_and_the_lwb4_as_a_tunnel_from_their_address() -> None:
    dut1 = _lines("mape", "dut1")
    tunnel = ["ip link add xlatbench-mape type ip6tnl mode ipip6 local 2001:db8:ce:11b:0:c000:208:1b remote "
              "2001:db8:6::1 encaplimit none hoplimit 64 dev enp5s0f1",
              "ip link set xlatbench-mape up",
              "ip address add 2001:db8:ce:11b:0:c000:208:1b/128 dev xlatbench-mape",
              "ip route add default dev xlatbench-mape"]
    assert dut1[-4:] == tunnel
    assert ("ip netns exec napt iptables -t nat -A POSTROUTING -s 192.168.0.0/24 -o to_global -p udp -j SNAT "
            "--to-source 192.0.2.8:55296-57343") in dut1  # the napt's NAT44 into the CE's port set
    assert _lines("mape-ce", "dut1")[-4:] == tunnel
    lwb4 = _lines("lw4o6", "dut1")
    assert lwb4[-4:] == [
        "ip link add xlatbench-lwb4 type ip6tnl mode ipip6 local 2001:db8:b4::11c remote 2001:db8:6::1 "
        "encaplimit none hoplimit 64 dev enp5s0f1",
        "ip link set xlatbench-lwb4 up",
        "ip address add 2001:db8:b4::11c/128 dev xlatbench-lwb4",
        "ip route add default dev xlatbench-lwb4"]


def test_every_step_has_its_undo() -> None:
    undo = {line: undo_line(step) for name in ("mape", "lw4o6")
            for step in _steps(name, "dut2")
            if isinstance(step, Cmd) and step.argv[0] == "sh" for line in [step.shell()]}
    assert undo[f"{W} create host-interface name enp5s0f0"] == f"{W} delete host-interface name enp5s0f0"
    assert undo[f"{W} set interface state host-enp5s0f0 up"] is None  # goes with the host interface
    assert undo[f"{W} set interface ip address host-enp5s0f1 203.0.113.2/24"] == \
        f"{W} set interface ip address del host-enp5s0f1 203.0.113.2/24"
    assert undo[f"{W} ip route add 2001:db8:ce::/51 via 2001:db8:6::11b"] == \
        f"{W} ip route del 2001:db8:ce::/51 via 2001:db8:6::11b"
    assert undo[f"{W} map interface host-enp5s0f0"] == f"{W} map interface host-enp5s0f0 del"
    assert undo["sh /run/x/lwaftr-rules.sh"] is None  # the rules go with their domains
    domain = next(line for line in undo if "tag xlatbench-mape-0" in line)
    assert undo[domain] == ("for i in $(vppctl show map domain | sed -n "
                            "'s/^\\[\\([0-9]*\\)\\] tag {xlatbench-mape-0} .*/\\1/p'); do "
                            f"{W} map del domain index \"$i\" || exit 1; done")
    ce = {s.shell(): undo_line(s) for s in _steps("mape", "dut1")
          if isinstance(s, Cmd) and "xlatbench-mape" in s.shell() and " set " not in s.shell()}
    assert ce[next(line for line in ce if "type ip6tnl" in line)] == "ip link del xlatbench-mape"
    assert ce["ip route add default dev xlatbench-mape"] == "ip route del default dev xlatbench-mape"


def test_the_domain_undo_deletes_by_tag_only_what_the_suite_made(tmp_path: Path) -> None:
    (line,) = [undo_line(s) for s in _steps("mape-br", "dut1")
               if isinstance(s, Cmd) and "map add domain" in s.shell()]
    assert line is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vppctl").write_text(
        "#!/bin/sh\necho '[0] tag {operator} ip4-pfx 198.51.100.0/24 ...'\n"
        "echo '[4] tag {xlatbench-mape-0} ip4-pfx 192.0.2.0/24 ...'\n")
    (bin_dir / "vppctl").chmod(0o755)
    (bin_dir / "sh-log").write_text("")
    wrapper = tmp_path / "vppctl-checked"
    wrapper.write_text(f"echo \"$*\" >> {bin_dir}/sh-log\n")
    done = subprocess.run(["sh", "-c", line.replace("/run/x/vppctl-checked", str(wrapper))],
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (bin_dir / "sh-log").read_text() == "map del domain index 4\n"


VPP_READY = {"vpp_vppctl": "/usr/bin/vppctl", "vpp_version": "vpp v24.10-release built by root",
             "vpp_map_plugin": "1", "vpp_domains": ""}


@pytest.mark.parametrize(("facts", "problems"), [
    ({"vpp_vppctl": "absent", "vpp_version": "absent", "vpp_map_plugin": "0"},
     ["dut2: VPP not found (no vppctl), which the vpp backend runs the BR/lwAFTR with: install VPP (FD.io's "
      "packages vpp and vpp-plugin-core) and start it, or use backend = \"bpf\""]),
    (VPP_READY | {"vpp_version": "absent", "vpp_map_plugin": "0"},
     ["dut2: VPP does not answer on its CLI socket (`vppctl show version` failed): start it (`systemctl "
      "start vpp`) and run the check as a user that may use /run/vpp/cli.sock"]),
    (VPP_READY | {"vpp_map_plugin": "0"},
     ["dut2: vpp v24.10-release built by root has no MAP plugin loaded (map_plugin.so): install "
      "vpp-plugin-core and enable the plugin in startup.conf "
      "(`plugins { plugin map_plugin.so { enable } }`)"]),
    (VPP_READY | {"vpp_domains": "tag {operator} tag {xlatbench-mape-0} "},
     ["dut2: VPP already has the MAP domain tagged xlatbench-mape-0 that the plan creates: run `xlatbench "
      "testbed down` if a previous run left it, or delete it (`vppctl show map domain`, `vppctl map del "
      "domain index N`)"]),
    (VPP_READY, []),
])
def test_vpp_preflight_refuses_in_one_line(facts: dict[str, str], problems: list[str]) -> None:
    vpp = registry.make("vpp")
    assert vpp.preflight_problems("dut2", "mape", None, facts) == problems
    summary = vpp.preflight_summary(vpp.preflight_report(facts))
    assert summary == ("" if facts["vpp_version"] == "absent" else
                       "vpp vpp v24.10-release built by root" + ("" if facts["vpp_map_plugin"] == "1"
                                                                 else " (no MAP plugin)"))


@pytest.mark.parametrize("found", ["absent", "loaded", "builtin", "installed"])
def test_ip6tnl_preflight_refuses_a_kernel_without_it(found: str) -> None:
    ip6tnl = registry.make("ip6tnl")
    problems = ip6tnl.preflight_problems("dut1", "mape", None, {"ip6tnl": found})
    assert problems == ([] if found != "absent" else [
        "dut1: the kernel has no ip6tnl (IPv4-in-IPv6 tunnel, CONFIG_IPV6_TUNNEL: module ip6_tunnel neither "
        "loaded, built in nor installed), which the ip6tnl backend's CE/lwB4 needs: boot a kernel with it "
        "(Debian's has the module), or use backend = \"bpf\""])


def test_the_probe_says_this_kernel_has_no_ip6tnl() -> None:
    """The preflight line run here: this machine's kernel has no ip6tnl (docs/testbed.md), a real absence."""
    (line,) = registry.make("ip6tnl").preflight_facts()
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    expected = "absent" if not Path("/sys/module/ip6_tunnel").exists() else "loaded"
    assert out == f"ip6tnl={expected}\n"
    assert (registry.make("ip6tnl").unavailable() or "").startswith(
        "this kernel has no ip6tnl" if expected == "absent" else "the ip6tnl backend renders")


def _inventory(dut1: str, dut2: str, topo: str = "mape") -> dict[str, object]:
    hosts = {"client": {"ssh": "c", "interfaces": {"client-dut1": "e0"}},
             "dut1": {"ssh": "d1", "backend": dut1, "interfaces": {"client-dut1": "e1", "dut1-dut2": "e2"}},
             "dut2": {"ssh": "d2", "backend": dut2, "interfaces": {"dut1-dut2": "e3", "dut2-server": "e4"}},
             "server": {"ssh": "s", "interfaces": {"dut2-server": "e5"}}}
    return {"name": "lab", "topology": topo, "hosts": hosts}


@pytest.mark.parametrize(("dut1", "dut2", "topo", "message"), [
    ("vpp", "vpp", "mape", "lab.toml: hosts.dut1.backend: backend vpp does not serve the mape-ce role of the "
                           "mape topology: choose bpf or ip6tnl"),
    ("ip6tnl", "ip6tnl", "lw4o6", "lab.toml: hosts.dut2.backend: backend ip6tnl does not serve the lwaftr "
                                  "role of the lw4o6 topology: choose bpf or vpp"),
    ("ip6tnl", "vpp", "mapt", "lab.toml: hosts.dut1.backend: backend ip6tnl does not serve the ce role of "
                              "the mapt topology: choose jool or tayga or bpf"),
])
def test_a_role_a_backend_does_not_play_is_refused_in_one_line(dut1: str, dut2: str, topo: str,
                                                               message: str) -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory(_inventory(dut1, dut2, topo), "lab.toml")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    choice = parse_inventory(_inventory("ip6tnl", "vpp"), "lab.toml").backends()
    assert choice.by_role["mape-br"].name == "vpp" and choice.by_role["mape-ce"].name == "ip6tnl"


def test_setup_render_shows_the_new_topologies_with_these_backends(
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, host, expected in (
        ("mape", "dut2", "map add domain tag xlatbench-mape-0 ip4-pfx 192.0.2.0/24"),
        ("mape", "dut1", "type ip6tnl mode ipip6 local 2001:db8:ce:11b:0:c000:208:1b"),
        ("lw4o6", "dut2", "sh /run/xlatbench/lwaftr-rules.sh"),
        ("lw4o6", "dut1", "type ip6tnl mode ipip6 local 2001:db8:b4::11c"),
        ("mape-br", "dut1", "map interface host-enp5s0f0"),
        ("lwaftr", "dut1", "ip4-pfx 192.0.2.0/32"),
        ("mape-ce", "dut1", "ip link add xlatbench-mape type ip6tnl"),
        ("lwb4", "dut1", "ip link add xlatbench-lwb4 type ip6tnl"),
    ):
        assert main(["setup", "render", name, "--backend", ENCAP]) == 0
        out = capsys.readouterr().out
        section = out.split(f"### host {host}\n")[1].split("### host")[0]
        assert expected in section, (name, host)
    assert main(["setup", "render", "mape", "--backend", "mape-ce=vpp"]) != 0
    err = capsys.readouterr().err
    assert err.strip() == ("xlatbench setup: backend vpp does not serve the mape-ce role of the mape "
                           "topology: choose bpf or ip6tnl (--backend mape-ce=NAME)"), err


def test_the_dry_run_of_the_example_inventory_plans_and_undoes_every_step() -> None:
    inventory = load_inventory(EXAMPLE)
    out = io.StringIO()
    dry_run(inventory, out)
    text = out.getvalue()
    dut2 = text.split("### host dut2")[1].split("### host server")[0]
    assert ("sh /run/xlatbench-testbed/lab-mape/dut2/vppctl-checked map add domain tag xlatbench-mape-0 "
            "ip4-pfx 192.0.2.0/24 ip6-pfx 2001:db8:ce::/51 ip6-src 2001:db8:6::1/128 ea-bits-len 13 "
            "psid-offset 0 psid-len 5") in dut2
    teardown = dut2.split("## teardown")[1]
    assert "map del domain index" in teardown and "delete host-interface name enp5s0f1" in teardown
    dut1 = text.split("### host dut1")[1].split("### host dut2")[0]
    assert "ip route add 203.0.113.0/24 dev xlatbench-mape" in dut1  # the host's default route stays its own
    assert "ip link del xlatbench-mape" in dut1.split("## teardown")[1]
    lw4o6 = io.StringIO()
    dry_run(parse_inventory({**tomllib.loads(EXAMPLE.read_text()), "topology": "lw4o6"}, "lw.toml"), lw4o6)
    assert ("xlatbench-lw-192.0.2.0 7 2001:db8:b4::8\n# ... 1016 more lines (generated)\nEOF"
            in lw4o6.getvalue())  # the binding table, cut as the zone is
    for role, steps in plan(inventory).items():  # every step has a known reversal (UndoError otherwise)
        assert batch_script(steps, f"/run/x/{role}/undo.sh")


def _errors_line(count: int, node: str, reason: str, severity: str) -> str:
    """A line of VPP's `show errors` as vlib prints it: count right-aligned in 10, node and reason centred in
    35 each, severity centred in 10."""
    return f"{count:>10}{node:^35}{reason:^35}{severity:^10}"


def test_vpp_counters_are_the_map_nodes_summed_over_threads() -> None:
    vpp = registry.make("vpp")
    assert vpp.counters_script("dut2", CTX) == "vppctl show errors"
    text = "\n".join([
        _errors_line("Count", "Node", "Reason", "Severity"),  # type: ignore[arg-type]
        _errors_line(4000, "ip6-map", "valid MAP packets", "info"),
        _errors_line(3920, "ip4-map", "valid MAP packets", "info"),
        _errors_line(80, "ip6-map", "decap security check failed", "error"),
        _errors_line(17, "ip6-input", "ip6 source lookup miss", "error"),  # not the MAP plugin's
        _errors_line(1000, "ip6-map", "valid MAP packets", "info"),  # a second worker thread's line
    ]) + "\n"
    assert vpp.parse_counters(text) == {
        "ip4_map_valid_map_packets": 3920, "ip6_map_valid_map_packets": 5000, "ip4_map_no_domain": 0,
        "ip6_map_no_domain": 0, "ip6_map_decap_security_check_failed": 80, "ip6_map_bad_protocol": 0}
    header = _errors_line("Count", "Node", "Reason", "Severity")  # type: ignore[arg-type]
    assert vpp.parse_counters(header + "\n")["ip6_map_valid_map_packets"] == 0  # nothing counted yet
    assert vpp.parse_counters("clib_socket_init: connect (fd 3, '/run/vpp/cli.sock'): refused\n") == {}
