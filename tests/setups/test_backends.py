"""The Backend interface and its registry: every registered backend describes its execution model, a
variant goes through its backend, and the specifics the emulation and the testbed ask for (processes,
undo, binary swap, refusals, whether it carries a zero IPv4 UDP checksum to IPv6) come from the backend that
owns them."""

from __future__ import annotations

import pytest

from xlatbench.setups.backends import EXECUTION_MODELS, USER_SPACE_SINGLE_THREAD, RenderContext, registry
from xlatbench.setups.emulation import EmulationConfig
from xlatbench.setups.paper import topology
from xlatbench.setups.plan import BackendChoice
from xlatbench.setups.steps import Cmd
from xlatbench.setups.testbed.undo import undo_line


@pytest.mark.parametrize("name", registry.names())
def test_every_backend_describes_its_execution_model_for_every_role(name: str) -> None:
    backend = registry.make(name)
    assert backend.execution_model in EXECUTION_MODELS
    for role in topology("464xlat").translators().values():
        assert backend.describe(role)["execution_model"] == backend.execution_model


def test_the_choice_comes_from_the_registry_and_variants_go_through_the_backend() -> None:
    with pytest.raises(ValueError,
                       match="unknown backend 'snabb': choose jool or tayga or bpf or vpp or ip6tnl"):
        BackendChoice.parse("snabb")
    with pytest.raises(ValueError, match="unknown tayga variant 'old'"):
        BackendChoice.parse("tayga", {"tayga": "old"})
    assert BackendChoice.parse("tayga", {"tayga": "stock"}).default_prefix() == "2001:db8:64::/96"
    assert BackendChoice.parse("bpf", {"tayga": "stock"}).default_prefix() is None  # tayga serves no role
    mixed = BackendChoice.parse("clat=bpf,plat=tayga")
    assert [b.name for b in mixed.used(topology("464xlat"))] == ["bpf", "tayga"]


def test_processes_undo_and_binary_swap_are_the_backends() -> None:
    ctx = RenderContext(world="netns", rundir="/run/x", prefix="xq")
    (daemon,) = registry.make("tayga").processes("dut1", ctx)
    assert (daemon.name, daemon.pidfile, daemon.program) == ("tayga (dut1)", "/run/x/dut1-tayga.pid", "tayga")
    assert daemon.watch and daemon.pin and registry.make("tayga").execution_model == USER_SPACE_SINGLE_THREAD
    assert registry.make("bpf").processes("dut1", ctx) == []  # in the kernel: nothing to watch or pin
    assert registry.make("tayga").run_time("dut1", ctx) is None  # user space: its processes' CPU times
    assert registry.make("bpf").run_time("dut1", ctx) is None  # nothing pinned under /run/x
    assert registry.make("tayga").counters("dut1", ctx) == {} == registry.make("bpf").counters("dut1", ctx)
    assert undo_line(Cmd(("/usr/sbin/tayga", "--config", "c", "--mktun"))) == "ip link del xlatbench64"
    assert undo_line(Cmd(("jool_siit", "instance", "add", "--netfilter"))) == "jool_siit instance remove"
    assert undo_line(Cmd(("jool", "pool4", "add", "1.2.3.4"))) is None
    swapped = registry.make("tayga").with_binary(("/usr/sbin/tayga", "--mktun"), "/opt/tayga")
    assert swapped == ("/opt/tayga", "--mktun")
    assert registry.make("jool").with_binary(("jool", "x"), "/opt/tayga") == ("jool", "x")


def test_a_backend_refuses_a_testbed_host_that_lacks_it() -> None:
    tayga = registry.make("tayga")
    assert tayga.preflight_problems("dut1", "464xlat", None, {"tayga": "absent"}) == [
        "dut1: tayga not installed: apt-get install tayga, or set hosts.dut1.tayga_binary"]
    assert tayga.preflight_problems("dut1", "464xlat", None, {"tayga": "0.9.2-8"}) == []
    bpf = registry.make("bpf")
    ready = {"bpftool": "/usr/sbin/bpftool", "bpf_tc": "/usr/sbin/tc", "bpf_fs": "present",
             "bpf_object_path": "/opt/siit.bpf.o", "bpf_object": "ab" * 32, "bpf_rp_filter": "2"}
    assert bpf.preflight_problems("dut2", "464xlat", "/opt/siit.bpf.o", ready) == []
    assert bpf.preflight_problems("dut2", "464xlat", None, {**ready, "bpftool": "absent"}) == [
        "dut2: bpftool not found (it loads the translator): apt-get install bpftool"]
    gone = {**ready, "bpf_object": "absent"}
    assert bpf.preflight_problems("dut2", "464xlat", "/opt/siit.bpf.o", gone) == [
        "dut2: bpf translator object /opt/siit.bpf.o not found on the host: copy build/bpf/siit.bpf.o there "
        "(`make build` of this commit) and set hosts.dut2.bpf_binary to its path"]
    assert bpf.preflight_problems("dut1", "464xlat", None, {**ready, "bpf_rp_filter": "1"}) == [
        "dut1: net.ipv4.conf.all.rp_filter is 1 (strict), which drops the bpf translator's IPv4 output: run "
        "`sysctl -w net.ipv4.conf.all.rp_filter=2` (loose) there"]
    assert len(bpf.preflight_problems("dut1", "464xlat", None, {})) == 4  # nothing found: tools, fs, object
    facts = "\n".join(bpf.preflight_facts("/opt/my obj.o"))
    assert "'/opt/my obj.o'" in facts and "bpf_object=" in facts  # the host's own object, quoted
    report = bpf.preflight_report(ready)
    assert report == {"bpftool": "/usr/sbin/bpftool", "object": "/opt/siit.bpf.o", "sha256": "ab" * 32}
    assert bpf.testbed_version({"kernel": "6.1.0-9", "bpf": report}) == "siit.bpf.o sha256 abababababab, " \
        "Linux 6.1.0-9"
    assert bpf.testbed_version({"kernel": "6.1.0-9", "bpf": bpf.preflight_report({})}) is None


def test_bpf_steps_have_their_undo_and_take_a_hosts_own_object() -> None:
    """Every step the bpf backend renders for a real host is reversed by a line of its own (or goes with an
    object another line removes): the testbed journal needs no generic rule for it."""
    bpf = registry.make("bpf")
    pins = "/run/t/dut1/bpf/dut1"
    assert undo_line(Cmd(("mount", "-t", "bpf", "bpf", "/run/t/dut1/bpf"))) == "umount /run/t/dut1/bpf"
    load = ("bpftool", "prog", "loadall", "/build/bpf/siit.bpf.o", pins, "type", "classifier",
            "pinmaps", f"{pins}/maps")
    assert undo_line(Cmd(load)) == f"rm -rf {pins}"
    assert bpf.with_binary(load, "/opt/o.o")[3] == "/opt/o.o" and bpf.with_binary(load, "/opt/o.o")[4] == pins
    assert bpf.with_binary(("tc", "qdisc"), "/opt/o.o") == ("tc", "qdisc")
    encap = ("bpftool", "prog", "loadall", "/build/bpf/encap.bpf.o", pins, "type", "classifier")
    assert bpf.with_binary(encap, "/opt/siit.bpf.o")[3] == "/opt/encap.bpf.o"
    assert undo_line(Cmd(("bpftool", "map", "update", "pinned", f"{pins}/maps/siit_config", "key"))) is None
    assert undo_line(Cmd(("tc", "qdisc", "add", "dev", "xlatbench-siit1", "clsact"))) == \
        "tc qdisc del dev xlatbench-siit1 clsact"
    assert undo_line(Cmd(("tc", "filter", "add", "dev", "xlatbench-siit1", "ingress", "bpf", "direct-action",
                          "object-pinned", f"{pins}/siit"))) == "tc filter del dev xlatbench-siit1 ingress"
    assert undo_line(Cmd(("ip", "link", "set", "xlatbench-siit0", "arp", "off", "addrgenmode", "none"))) \
        is None
    script = bpf.counters_script("dut1", RenderContext(rundir="/run/t/dut1"))
    assert f"else bpftool -j map dump pinned {pins}/maps/siit_stats; fi" in script
    assert f"then echo encap; bpftool -j map dump pinned {pins}/maps/encap_stats;" in script
    dump = ('[{"key": 1, "values": [{"cpu": 0, "value": 5}, {"cpu": 1, "value": 2}]}, '
            '{"key": 8, "values": []}]')
    counts = bpf.parse_counters(dump)
    assert counts["translated_6to4"] == 7 and counts["drop_unmapped_source"] == 0
    assert bpf.parse_counters("not json") == {}
    tunnel = bpf.parse_counters("encap\n" + dump)  # a tunnel end's encap_stats
    assert tunnel["decapsulated"] == 7 and tunnel["drop_no_binding"] == 0 and "translated_6to4" not in tunnel
    # The tunnel ends' own steps: the binding table pinned beside the program, its batch, the device setting.
    assert undo_line(Cmd(("bpftool", "map", "create", f"{pins}-bindings", "type", "hash"))) == \
        f"rm -f {pins}-bindings"
    assert undo_line(Cmd(("bpftool", "batch", "file", "/run/t/b"))) is None
    assert undo_line(Cmd(("ethtool", "-K", "xlatbench-siit0", "tx", "off"))) is None


REFUSING = [("464xlat", "tayga"), ("464xlat", "clat=bpf,plat=tayga"), ("mapt", "ce=bpf,br=tayga"),
            ("br", "tayga"), ("plat", "tayga")]


@pytest.mark.parametrize(("chain", "backend"), REFUSING)
def test_knot_xdp_is_refused_where_the_plat_or_br_drops_zero_checksums(chain: str, backend: str) -> None:
    with pytest.raises(ValueError, match="tayga drops such a datagram on its way to IPv6") as refused:
        EmulationConfig(chain, backends=BackendChoice.parse(backend), knot_io="xdp")
    role = "br" if chain in ("mapt", "br") else "plat"
    assert f"with the tayga {role}" in str(refused.value)
    if not registry.make("bpf").unavailable():
        assert f"--backend {role}=bpf" in str(refused.value), "it names a backend that computes the checksum"


@pytest.mark.parametrize(("chain", "backend"), [("464xlat", "bpf"), ("464xlat", "clat=tayga,plat=bpf"),
                                                ("mapt", "ce=tayga,br=bpf"), ("plat", "bpf"), ("br", "bpf"),
                                                ("clat", "tayga"), ("ce", "tayga"), ("baseline", "tayga")])
def test_knot_xdp_is_accepted_where_no_translator_drops_its_replies(chain: str, backend: str) -> None:
    """A bpf PLAT or BR computes the checksum; a CLAT or CE only sees replies that Knot sent over IPv6 or
    that the PLAT/BR already checksummed."""
    assert EmulationConfig(chain, backends=BackendChoice.parse(backend), knot_io="xdp").knot_io == "xdp"


def test_which_backends_accept_zero_udp_checksums() -> None:
    assert {b.name: b.accepts_zero_udp_checksum for b in registry.every()} == {
        "jool": False, "tayga": False, "bpf": True,
        "vpp": True, "ip6tnl": True}  # an encapsulation carries the IPv4 datagram as it is
