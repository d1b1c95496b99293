"""From a topology and a choice of backends to the steps each host runs.

One code path serves real hosts and emulation: `render` gives per-host steps. On a real host a
sub-host (the CE's `napt`) becomes a namespace its parent creates; in emulation every host is its own
namespace and the links are veth pairs the emulation creates first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .backends import Backend, RenderContext, linux, registry
from .steps import Cmd, Comment, Daemon, Step
from .topology import TRANSLATOR_ROLES, Host, MapBrRole, Plat, Topology, Translator

ROLES = ("clat", "plat", "ce", "br")


@dataclass(frozen=True)
class BackendChoice:
    """Which backend serves each translator role (clat, plat, ce, br); forwarding and NAT44 are Linux's.
    variants: backend name -> its variant (a backend's `variant_option`), where not the default."""

    by_role: dict[str, str] = field(default_factory=lambda: dict.fromkeys(ROLES, registry.EMULATION_DEFAULT))
    variants: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, variants: Mapping[str, str] | None = None,
              default: str = registry.EMULATION_DEFAULT) -> BackendChoice:
        """ "NAME" (every role) or "clat=NAME,plat=OTHER" (per role; unnamed roles keep `default`)."""
        by_role = dict.fromkeys(ROLES, default)
        if "=" not in text:
            registry.make(text)
            by_role = dict.fromkeys(ROLES, text)
        else:
            for part in text.split(","):
                role, _, name = part.partition("=")
                if role not in ROLES:
                    raise ValueError(f"unknown role {role!r} in --backend: roles are {', '.join(ROLES)}")
                registry.make(name)
                by_role[role] = name
        for name, variant in (variants or {}).items():
            registry.make(name, variant)  # a bad variant: ValueError naming the choices
        return cls(by_role, dict(variants or {}))

    def backend(self, role: Translator) -> Backend:
        name = self.by_role[TRANSLATOR_ROLES[type(role)]]
        return registry.make(name, self.variants.get(name))

    def used(self, topology: Topology) -> list[Backend]:
        """Each backend serving a role of `topology`, once."""
        found: dict[str, Backend] = {}
        for role in topology.translators().values():
            backend = self.backend(role)
            found.setdefault(backend.name, backend)
        return list(found.values())

    def machine_steps(self, topology: Topology, ctx: RenderContext) -> list[Step]:
        """Steps the chosen backends need once per machine, outside every namespace (e.g. a bpffs)."""
        steps: list[Step] = []
        for backend in self.used(topology):
            steps += backend.machine_steps(ctx)
        return steps

    def default_prefix(self) -> str | None:
        """A translation prefix a chosen variant needs instead of the paper's (None: the paper's)."""
        for name, variant in self.variants.items():
            option = registry.variant_options().get(name)
            if name in self.by_role.values() and option is not None and variant in option.default_prefix:
                return option.default_prefix[variant]
        return None


def render_host(topology: Topology, host: Host, choice: BackendChoice, ctx: RenderContext) -> list[Step]:
    """The steps of one host, its configuration items in order; on a real host its sub-hosts first."""
    steps: list[Step] = []
    if ctx.world == "real":
        for child in topology.children(host.name):
            steps += _nested_subhost(topology, host, child, choice, ctx)
    for item in host.items:
        role = host.translator
        if role is not None and item is role:
            steps += choice.backend(role).render(role, host, ctx)
        else:
            steps += linux.render_item(item)
    return steps


def _nested_subhost(
    topology: Topology, parent: Host, child: Host, choice: BackendChoice, ctx: RenderContext
) -> list[Step]:
    """A sub-host on a real machine: a namespace, a veth to it, its physical interfaces moved in."""
    steps: list[Step] = [Cmd(("ip", "netns", "add", child.name))]
    internal_ifaces = set()
    for link in topology.links:
        if link.internal and {link.a.host, link.b.host} == {parent.name, child.name}:
            mine, theirs = (link.a, link.b) if link.a.host == parent.name else (link.b, link.a)
            internal_ifaces.add(theirs.interface)
            steps.append(
                Cmd(
                    (
                        "ip",
                        "link",
                        "add",
                        mine.interface,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        theirs.interface,
                        "netns",
                        child.name,
                    )
                )
            )
    for iface in child.interfaces:
        if iface.name not in internal_ifaces:
            steps.append(Cmd(("ip", "link", "set", iface.name, "netns", child.name)))
    for step in render_host(topology, child, choice, ctx):
        steps.append(in_netns(child.name, step))
    return steps


def in_netns(netns: str, step: Step) -> Step:
    """The same step run inside a named namespace of the host."""
    wrap = ("ip", "netns", "exec", netns)
    if isinstance(step, Cmd):
        return Cmd(wrap + step.argv, step.check)
    if isinstance(step, Daemon):
        return Daemon(wrap + step.argv, step.pidfile, step.logfile)
    return step  # files are shared by the namespaces of a host


def render(topology: Topology, choice: BackendChoice, ctx: RenderContext) -> dict[str, list[Step]]:
    """Host name -> steps, for every host that is a machine of its own in `ctx.world`."""
    hosts = [h for h in topology.hosts if ctx.world != "real" or h.parent is None]
    return {h.name: render_host(topology, h, choice, ctx) for h in hosts}


def header(topology: Topology, choice: BackendChoice) -> list[Comment]:
    """What a rendering is: topology, who serves which role, notes."""
    lines = [f"xlatbench setup: {topology.name} -- {topology.description}"]
    for host, role in topology.translators().items():
        backend = choice.backend(role)
        desc = backend.describe(role)
        variant = f" ({desc['variant']}, prefix {desc['prefix']})" if "variant" in desc else ""
        lines.append(f"{host}: {TRANSLATOR_ROLES[type(role)]} by {backend.name}{variant}")
    lines += list(topology.notes)
    notes = [n for r in topology.translators().values() for n in choice.backend(r).notes(r)]
    lines += list(dict.fromkeys(notes))
    return [Comment(line) for line in lines]


def zero_checksum_dropper(chain: Topology, choice: BackendChoice) -> tuple[str, Backend, str] | None:
    """The translator that would drop Knot's XDP-mode replies on `chain`, as (host, backend, role name), or
    None when every reply gets through. Knot 3.2's XDP mode sends its IPv4 UDP replies with checksum 0 (no
    checksum, which RFC 768 allows); the translator that carries them to IPv6 (the PLAT, the BR: the roles
    whose IPv4 side faces the server), where UDP needs a checksum, may compute it or drop them (RFC 7915
    section 4.5); its backend says which (`accepts_zero_udp_checksum`). Over IPv6 Knot computes the
    checksum. The one rule both worlds apply (emulation.emulator.knot_xdp_refusal, the testbed's plan)."""
    if ":" in chain.knot_address:
        return None
    for host, role in chain.translators().items():
        backend = choice.backend(role)
        if isinstance(role, Plat | MapBrRole) and not backend.accepts_zero_udp_checksum:
            return host, backend, TRANSLATOR_ROLES[type(role)]
    return None


def zero_checksum_reason(backend: Backend) -> str:
    """Why Knot's XDP mode cannot answer through `backend` (what zero_checksum_dropper found), one clause."""
    return (f"Knot's XDP mode answers IPv4 queries with UDP checksum 0 (RFC 768 allows it) and "
            f"{backend.name} drops such a datagram on its way to IPv6 (RFC 7915 section 4.5 lets it)")


def computing_backends(role: str, available_here: bool = True) -> list[str]:
    """The backends that can serve `role` and carry a zero IPv4 UDP checksum to IPv6 (with
    `available_here`, only those this machine can run: the emulation's; a testbed's hosts are others)."""
    return [b.name for b in registry.every() if role in b.roles and b.accepts_zero_udp_checksum
            and not (available_here and b.unavailable())]
