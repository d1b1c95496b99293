"""vpp: FD.io VPP's MAP plugin as the MAP-E BR (RFC 7597) and the lwAFTR (RFC 7596), for real hosts.

This is the BR that the reference document 004 measured. Render only here: VPP is not installed on this
machine (preflight says so in one line). A VPP host is VPP's, not the kernel's: the whole DUT host is
rendered as VPP CLI commands (`vppctl`), its interfaces, addresses and routes included, not only the
translator role (`render_item`). Each test interface named in the inventory stays the kernel's NIC and is
attached to VPP as an af_packet host interface (`create host-interface name IF`, VPP's `host-IF`), with the
kernel's IPv6 off on it (`disable_ipv6`: the kernel sees the same frames and would answer neighbour
discovery beside VPP; the kernel's IPv4 has no address there): it works with any NIC and driver and leaves
nothing to rebind afterwards; a NIC bound to DPDK (VPP's fast path, what
the reference document ran) needs VPP's own startup.conf, which the suite does not write (docs/testbed.md).

The MAP-E BR is one MAP domain: the BMR's rule IPv4 prefix, rule IPv6 prefix, EA-bits length and PSID (offset,
length), and the BR's address as `ip6-src`; VPP's security check (on by default) drops an encapsulated
packet whose outer source is not the MAP address of its inner source address and port. The lwAFTR is one
domain per IPv4 address of the pool (`ip4-pfx A/32`, no EA bits, the PSID length) with one rule per bound PSID
(`map add rule index N psid P ip6-dst B4`): VPP numbers domains itself, so the rules are written from the
binding table on the host once the domains exist, each domain found by its tag. `map interface IF` enables
the plugin's input feature on both test interfaces.

vppctl exits 0 whatever the CLI answered, so every command runs through a small checking wrapper written
into the run directory first (`vppctl-checked`): it fails with VPP's message when VPP printed anything (a
configuration command prints nothing when it succeeds; `create host-interface` prints the new interface's
name). Every step journals its reversal (`undo`): domains deleted by tag (their rules go with them), the
feature disabled, routes and addresses deleted, host interfaces deleted; the kernel NIC's link state goes
back as the generic `ip link set IF up` undo has it. Each trial reads the MAP nodes' counters (`show errors`):
packets encapsulated and decapsulated, and the drops by VPP's reason (the security check a packet from outside
its CE's port set fails, no domain, no binding).
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Mapping

from ..steps import Cmd, Comment, Step, WriteFile
from ..topology import Forwarding, Host, Interface, Item, LwAftrRole, MapeBrRole, Route, Translator
from . import USER_SPACE_MULTI_THREAD, BackendBase, RenderContext, declared

CHECKED = "vppctl-checked"  # the wrapper's file name in the run directory
BINDINGS = "lwaftr-bindings"  # the lwAFTR's binding table (TAG PSID B4-ADDRESS per line) in the run directory
RULES = "lwaftr-rules.sh"  # the script turning it into `map add rule` lines for the domains' indexes
# The tags of the domains a testbed's plan makes (RenderContext.prefix "xlatbench" there).
OUR_TAGS = ("xlatbench-mape-", "xlatbench-lw-")
# VPP's MAP nodes (encapsulation on IPv4 input, decapsulation on IPv6 input) and the counters every reading
# carries (0 when VPP printed none): what passed, and why the BR/lwAFTR dropped (VPP's own descriptions).
MAP_NODES = ("ip4-map", "ip6-map")
MAP_COUNTERS = ("ip4_map_valid_map_packets", "ip6_map_valid_map_packets", "ip4_map_no_domain",
                "ip6_map_no_domain", "ip6_map_decap_security_check_failed", "ip6_map_bad_protocol")
TAG_RE = re.compile(r"^[A-Za-z0-9._-]{1,60}$")

WRAPPER = """#!/bin/sh
# One VPP CLI command that fails when VPP answers anything but what it prints on success (xlatbench).
out=$(vppctl "$@" 2>&1) || { printf '%s\\n' "$out" >&2; exit 1; }
if [ "$1 $2" = "create host-interface" ] && [ "$out" = "host-$4" ]; then exit 0; fi
[ -z "$out" ] || { printf 'vppctl %s: %s\\n' "$*" "$out" >&2; exit 1; }
"""

RULES_SCRIPT = """#!/bin/sh
# The lwAFTR's binding table as VPP rules: each line TAG PSID B4 becomes `map add rule index N psid PSID
# ip6-dst B4`, N the index VPP gave the domain tagged TAG (xlatbench).
set -e
dir=$(dirname "$0")
vppctl show map domain > "$dir/lwaftr-domains"
awk 'FNR == NR { if ($1 ~ /^\\[[0-9]+\\]$/ && $2 == "tag") { t = $3; gsub(/[{}]/, "", t); i = $1;
                  gsub(/[][]/, "", i); index_of[t] = i }; next }
     !($1 in index_of) { print "no MAP domain tagged " $1 > "/dev/stderr"; exit 1 }
     { print "map add rule index " index_of[$1] " psid " $2 " ip6-dst " $3 }' \\
    "$dir/lwaftr-domains" "$dir/lwaftr-bindings" > "$dir/lwaftr-rules.cli"
rm -f "$dir/lwaftr-domains"
out=$(vppctl exec "$dir/lwaftr-rules.cli" 2>&1)
rm -f "$dir/lwaftr-rules.cli"
[ -z "$out" ] || { printf '%s\\n' "$out" >&2; exit 1; }
"""


def vpp_interface(kernel_name: str) -> str:
    """VPP's name of the af_packet interface on a kernel NIC."""
    return f"host-{kernel_name}"


def domain_tag(ctx: RenderContext, what: str) -> str:
    """The tag of a MAP domain the suite creates (`show map domain` lists it; undo finds the index by it)."""
    tag = f"{ctx.prefix}-{what}"
    if not TAG_RE.match(tag):
        raise ValueError(f"MAP domain tag {tag!r} is not letters, digits and ._- (1-60)")
    return tag


class VppBackend(BackendBase):
    name = "vpp"
    roles = frozenset({"mape-br", "lwaftr"})
    execution_model = USER_SPACE_MULTI_THREAD
    # VPP's ip4-map node encapsulates the IPv4 packet as it is (a UDP checksum of 0 stays valid inside IPv4).
    accepts_zero_udp_checksum = True

    def version(self) -> str:
        return ("as installed on the real host (vppctl show version; the reference document ran VPP's MAP "
                "plugin)")

    def notes(self, role: Translator) -> list[str]:
        return ["vpp: the host's test interfaces join VPP as af_packet host interfaces (host-IF); every "
                "command runs through the run directory's vppctl-checked (vppctl itself exits 0 on errors)"]

    def describe(self, role: Translator) -> dict[str, object]:
        return {"implementation": "vpp", **declared(self), "plugin": "map", "version": self.version()}

    def unavailable(self) -> str | None:
        if shutil.which("vppctl") is None:
            return ("VPP is not installed on this machine (no vppctl): use `xlatbench setup render ... "
                    "--backend mape-br=vpp` for a real host")
        return "the vpp backend renders for real hosts only (the emulation does not start VPP)"

    # -- rendering --------------------------------------------------------------------------------------

    def checked(self, ctx: RenderContext, *words: str) -> Cmd:
        """One VPP CLI command through the checking wrapper."""
        return Cmd(("sh", f"{ctx.rundir}/{CHECKED}", *words))

    def render_item(self, item: Item, host: Host, ctx: RenderContext) -> list[Step] | None:
        """A VPP host's network items as VPP commands (the kernel only brings the NIC up for af_packet)."""
        steps = self._preamble(item, host, ctx)
        if isinstance(item, Interface):
            vif = vpp_interface(item.name)
            steps += [Cmd(("ip", "link", "set", item.name, "up")),
                      # af_packet hands VPP a copy of every frame; the kernel's IPv6 (link-local, ND) on the
                      # NIC would answer beside VPP's: off while VPP has it (the sysctl's undo restores it)
                      Cmd(("sysctl", "-w", f"net.ipv6.conf.{item.name}.disable_ipv6=1")),
                      self.checked(ctx, "create", "host-interface", "name", item.name),
                      self.checked(ctx, "set", "interface", "state", vif, "up")]
            steps += [self.checked(ctx, "set", "interface", "ip", "address", vif, a) for a in item.addresses]
            return steps
        if isinstance(item, Route):
            return steps + [self.checked(ctx, "ip", "route", "add", item.destination, "via", item.via)]
        if isinstance(item, Forwarding):
            return steps + [Comment("vpp: forwarding is VPP's own (no sysctl)")]
        return None

    def _preamble(self, item: Item, host: Host, ctx: RenderContext) -> list[Step]:
        """The checking wrapper, written with the host's first item (its undo, `rm -f`, runs last)."""
        return [WriteFile(f"{ctx.rundir}/{CHECKED}", WRAPPER)] if host.items and item is host.items[0] else []

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]:
        steps = self._preamble(role, host, ctx)
        if isinstance(role, MapeBrRole):
            for number, rule in enumerate(role.fmrs):
                psid_len = rule.psid_len()
                steps.append(self.checked(
                    ctx, "map", "add", "domain", "tag", domain_tag(ctx, f"mape-{number}"),
                    "ip4-pfx", rule.ipv4_prefix, "ip6-pfx", rule.ipv6_prefix,
                    "ip6-src", f"{role.br_address}/128", "ea-bits-len", str(rule.ea_bits_len),
                    "psid-offset", str(rule.psid_offset), "psid-len", str(psid_len)))
            return steps + self._enable(role, ctx)
        if isinstance(role, LwAftrRole):
            return steps + self._lwaftr(role, ctx) + self._enable(role, ctx)
        raise TypeError(f"the vpp backend serves {', '.join(sorted(self.roles))}, "
                        f"not {type(role).__name__}")

    def _enable(self, role: MapeBrRole | LwAftrRole, ctx: RenderContext) -> list[Step]:
        return [self.checked(ctx, "map", "interface", vpp_interface(i))
                for i in (role.ipv6_interface, role.ipv4_interface)]

    def _lwaftr(self, role: LwAftrRole, ctx: RenderContext) -> list[Step]:
        """One domain per pool address that has a binding, then the rules from the binding table."""
        table = role.bindings()
        rule = role.rule
        steps: list[Step] = []
        lines = []
        seen: list[str] = []
        for entry in table:
            tag = domain_tag(ctx, f"lw-{entry.ipv4_address}")
            if entry.ipv4_address not in seen:
                seen.append(entry.ipv4_address)
                steps.append(self.checked(
                    ctx, "map", "add", "domain", "tag", tag, "ip4-pfx", f"{entry.ipv4_address}/32",
                    "ip6-pfx", rule.b4_prefix, "ip6-src", f"{role.aftr_address}/128", "ea-bits-len", "0",
                    "psid-offset", str(rule.psid_offset), "psid-len", str(rule.psid_len)))
            lines.append(f"{tag} {entry.psid} {entry.b4_address}")
        steps += [WriteFile(f"{ctx.rundir}/{BINDINGS}", "\n".join(lines) + "\n"),
                  WriteFile(f"{ctx.rundir}/{RULES}", RULES_SCRIPT),
                  Cmd(("sh", f"{ctx.rundir}/{RULES}"))]
        return steps

    # -- counters ---------------------------------------------------------------------------------------

    def counters_script(self, host: str, ctx: RenderContext) -> str:
        """VPP's node counters (`show errors`: one line per thread and non-zero counter, since VPP started;
        a trial takes the difference of two readings)."""
        return "vppctl show errors"

    def parse_counters(self, text: str) -> dict[str, int]:
        """The MAP nodes' counters, `<node>_<reason>` in words (`ip6_map_decap_security_check_failed`),
        summed over VPP's threads, those of MAP_COUNTERS 0 when VPP printed none; {} when the answer is not
        VPP's table (no `Count Node Reason Severity` header: VPP did not answer)."""
        lines = text.splitlines()
        if not any(line.split() == ["Count", "Node", "Reason", "Severity"] for line in lines):
            return {}
        found = dict.fromkeys(MAP_COUNTERS, 0)
        for line in lines:
            words = line.split()
            if len(words) < 4 or not words[0].isdigit() or words[1] not in MAP_NODES:
                continue
            key = "_".join(re.findall(r"[a-z0-9]+", f"{words[1]} {' '.join(words[2:-1])}".lower()))
            found[key] = found.get(key, 0) + int(words[0])
        return found

    # -- a testbed host ---------------------------------------------------------------------------------

    def owns_undo(self, argv: tuple[str, ...]) -> bool:
        return len(argv) >= 2 and argv[0] == "sh" and argv[1].endswith((f"/{CHECKED}", f"/{RULES}"))

    def undo(self, argv: tuple[str, ...]) -> str | None:
        """The reversal of one checked VPP command (through the same wrapper, which the journal removes
        last: its WriteFile was the host's first step)."""
        if argv[1].endswith(f"/{RULES}"):
            return None  # the rules go with their domains
        run, words = argv[:2], argv[2:]
        if words[:2] == ("create", "host-interface"):
            return shlex.join((*run, "delete", "host-interface", "name", words[3]))
        if words[:3] == ("set", "interface", "state") or words[:3] == ("map", "add", "rule"):
            return None  # goes with the host interface / the domain
        if words[:4] == ("set", "interface", "ip", "address"):
            return shlex.join((*run, "set", "interface", "ip", "address", "del", *words[4:]))
        if words[:3] == ("ip", "route", "add"):
            return shlex.join((*run, "ip", "route", "del", *words[3:]))
        if words[:2] == ("map", "interface"):
            return shlex.join((*run, "map", "interface", words[2], "del"))
        if words[:4] == ("map", "add", "domain", "tag"):
            tag = words[4]
            pattern = shlex.quote(f"s/^\\[\\([0-9]*\\)\\] tag {{{tag}}} .*/\\1/p")
            return (f"for i in $(vppctl show map domain | sed -n {pattern}); do "
                    f"{shlex.join(run)} map del domain index \"$i\" || exit 1; done")
        raise ValueError(f"no undo known for VPP command `{' '.join(words)}`")

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        """vppctl, VPP's version and plugins (answering on its CLI socket), the MAP domains it has already
        (a host interface of the same name makes `create host-interface` fail, which the wrapper reports)."""
        return [
            'echo "vpp_vppctl=$(command -v vppctl || echo absent)"',
            'echo "vpp_version=$( (vppctl show version 2>/dev/null || echo absent) | head -n 1)"',
            "echo \"vpp_map_plugin=$(vppctl show plugins 2>/dev/null | grep -c 'map_plugin')\"",
            "echo \"vpp_domains=$(vppctl show map domain 2>/dev/null | grep -o 'tag {[^}]*}' | "
            "tr '\\n' ' ')\"",
        ]

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        return {"vppctl": facts.get("vpp_vppctl", "absent"), "version": facts.get("vpp_version", "absent"),
                "map_plugin": facts.get("vpp_map_plugin", "0").strip() not in ("", "0")}

    def preflight_summary(self, report: object | None) -> str:
        found = report if isinstance(report, dict) else {}
        if found.get("version", "absent") == "absent":
            return ""
        return f"vpp {found['version']}" + ("" if found.get("map_plugin") else " (no MAP plugin)")

    def testbed_version(self, host_report: Mapping[str, object]) -> object | None:
        return host_report.get("vpp")

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        """One line for what is missing first: vppctl, a VPP answering on it, its MAP plugin; then one per
        object the plan makes that VPP has already (a domain of the suite's tags, a host interface)."""
        if facts.get("vpp_vppctl", "absent") == "absent":
            return [f"{role}: VPP not found (no vppctl), which the vpp backend runs the BR/lwAFTR with: "
                    "install VPP (FD.io's packages vpp and vpp-plugin-core) and start it, or use "
                    "backend = \"bpf\""]
        version = facts.get("vpp_version", "absent")
        if version == "absent" or not version.strip():
            return [f"{role}: VPP does not answer on its CLI socket (`vppctl show version` failed): start it "
                    "(`systemctl start vpp`) and run the check as a user that may use /run/vpp/cli.sock"]
        if facts.get("vpp_map_plugin", "0").strip() in ("", "0"):
            return [f"{role}: {version} has no MAP plugin loaded (map_plugin.so): install vpp-plugin-core "
                    "and enable the plugin in startup.conf (`plugins { plugin map_plugin.so { enable } }`)"]
        problems = []
        for tag in re.findall(r"\{([^}]*)\}", facts.get("vpp_domains", "")):
            if tag.startswith(OUR_TAGS):
                problems.append(f"{role}: VPP already has the MAP domain tagged {tag} that the plan creates: "
                                "run `xlatbench testbed down` if a previous run left it, or delete it "
                                "(`vppctl show map domain`, `vppctl map del domain index N`)")
        return problems
