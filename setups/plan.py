"""From a topology and a choice of backends to the steps each host runs.

One code path serves real hosts and emulation: `render` gives per-host steps. On a real host a
sub-host (the CE's `napt`) becomes a namespace its parent creates; in emulation every host is its own
namespace and the links are veth pairs the emulation creates first. Who serves each translator role is a
`BackendChoice` of backend instances, parsed from text once where it enters and carried as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .backends import Backend, Counters, Deployment, RenderContext, Renderer, Runtime, linux, registry
from .steps import Cmd, Comment, Daemon, Step
from .topology import TRANSLATOR_ROLES, Host, Item, MapBrRole, Plat, Topology, Translator, TunnelEnd

ROLES = tuple(TRANSLATOR_ROLES.values())  # clat, plat, ce, br, mape-ce, mape-br, lwb4, lwaftr


def _defaults() -> dict[str, Backend]:
    """The emulation's default backend for every role it serves, the registry's default for the others."""
    return {role: registry.make(registry.default_for(role)) for role in ROLES}


@dataclass(frozen=True)
class BackendChoice:
    """Which backend instance serves each translator role (clat, plat, ce, br); forwarding and NAT44 are
    Linux's. Text is parsed once, where it enters (the command line, a campaign file, a chain's state file:
    `parse`; an inventory builds its choice from its hosts' backends: `of_roles`); everything downstream
    carries the instances (a variant is the instance's own, `Backend.variant`)."""

    by_role: Mapping[str, Backend] = field(default_factory=_defaults)

    def __post_init__(self) -> None:
        if set(self.by_role) != set(ROLES):
            raise ValueError(f"a backend choice names a backend for each of {', '.join(ROLES)}, "
                             f"got {', '.join(self.by_role) or 'none'}")
        for role, backend in self.by_role.items():
            if isinstance(backend, str) or not hasattr(backend, "render"):
                raise TypeError(f"the backend for {role} is {backend!r}, not a backend instance: parse text "
                                "where it enters (BackendChoice.parse)")

    @classmethod
    def parse(cls, text: str, variants: Mapping[str, str] | None = None,
              default: str = registry.EMULATION_DEFAULT) -> BackendChoice:
        """ "NAME" (every role it serves; the others their default, registry.default_for) or
        "clat=NAME,plat=OTHER" (per role, as named; unnamed roles keep `default` where it serves them);
        `variants`: backend name -> its variant (a bad one: ValueError naming the choices)."""
        names = {role: _serving(default, role) for role in ROLES}
        if "=" not in text:
            registry.make(text)
            names = {role: _serving(text, role) for role in ROLES}
        else:
            for part in text.split(","):
                role, _, name = part.partition("=")
                if role not in ROLES:
                    raise ValueError(f"unknown role {role!r} in --backend: roles are {', '.join(ROLES)}")
                registry.make(name)
                names[role] = name
        variants = dict(variants or {})
        instances = {name: registry.make(name, variants.get(name)) for name in variants}
        for name in names.values():
            instances.setdefault(name, registry.make(name))
        return cls({role: instances[name] for role, name in names.items()})

    @classmethod
    def of_roles(cls, by_role: Mapping[str, Backend]) -> BackendChoice:
        """The choice of already made instances, role -> backend (roles not given: none is a ValueError)."""
        return cls(dict(by_role))

    def spec(self) -> str:
        """The text `parse` reads back into this choice (with `variants()`)."""
        names = {role: backend.name for role, backend in self.by_role.items()}
        for name in dict.fromkeys(names.values()):
            if all(names[role] == _serving(name, role) for role in ROLES):
                return name
        return ",".join(f"{role}={name}" for role, name in names.items())

    def variants(self) -> dict[str, str]:
        """Backend name -> the variant of the chosen instance, for the backends that have one."""
        return {b.name: b.variant for b in self.by_role.values() if b.variant is not None}

    # The backend serving `role`, seen through the one part of its interface the caller uses.
    def renderer(self, role: Translator) -> Renderer:
        return self._of(role)

    def runtime(self, role: Translator) -> Runtime:
        return self._of(role)

    def deployment(self, role: Translator) -> Deployment:
        return self._of(role)

    def counters(self, role: Translator) -> Counters:
        return self._of(role)

    def _of(self, role: Translator) -> Backend:
        return self.by_role[TRANSLATOR_ROLES[type(role)]]

    def refusal(self, topology: Topology) -> str | None:
        """Why this choice cannot serve `topology` (a chosen backend does not play one of its roles), one
        line naming the backends that do; None when it can. Asked before anything is brought up."""
        for role in topology.translators().values():
            name = TRANSLATOR_ROLES[type(role)]
            backend = self._of(role)
            if name not in backend.roles:
                serving = [b for b in registry.names() if name in registry.make(b).roles]
                return (f"backend {backend.name} does not serve the {name} role of the {topology.name} "
                        f"topology: choose {' or '.join(serving)} (--backend {name}=NAME)")
            reason = backend.refusal(role)
            if reason:
                return f"{topology.name}: {name} by {backend.name}: {reason}"
        return None

    def used(self, topology: Topology) -> list[Renderer]:
        """Each backend serving a role of `topology`, once."""
        found: dict[str, Renderer] = {}
        for role in topology.translators().values():
            backend = self.renderer(role)
            found.setdefault(backend.name, backend)
        if any(h.tester_tunnel is not None for h in topology.hosts):
            tunnel = registry.tunnel_end()
            found.setdefault(tunnel.name, tunnel)
        return list(found.values())

    def machine_steps(self, topology: Topology, ctx: RenderContext) -> list[Step]:
        """Steps the chosen backends need once per machine, outside every namespace (e.g. a bpffs)."""
        steps: list[Step] = []
        for backend in self.used(topology):
            steps += backend.machine_steps(ctx)
        return steps

    def default_prefix(self) -> str | None:
        """A translation prefix a chosen variant needs instead of the paper's (None: the paper's)."""
        for backend in self.by_role.values():
            option = backend.variant_option
            if option is not None and backend.variant in option.default_prefix:
                return option.default_prefix[str(backend.variant)]
        return None


def _serving(name: str, role: str) -> str:
    """`name` when that backend serves `role`, else the role's default backend."""
    return name if role in registry.make(name).roles else registry.default_for(role)


def render_host(topology: Topology, host: Host, choice: BackendChoice, ctx: RenderContext) -> list[Step]:
    """The steps of one host, its configuration items in order; on a real host its sub-hosts first."""
    steps: list[Step] = []
    if ctx.world == "real":
        for child in topology.children(host.name):
            steps += _nested_subhost(topology, host, child, choice, ctx)
    for item in host.items:
        role = host.translator
        if role is not None and item is role:
            steps += choice.renderer(role).render(role, host, ctx)
        elif isinstance(item, TunnelEnd):
            steps += registry.tunnel_end().render(item, host, ctx)  # type: ignore[arg-type]
        else:
            steps += network_steps(item, host, choice, ctx)
    return steps


def network_steps(item: Item, host: Host, choice: BackendChoice, ctx: RenderContext) -> list[Step]:
    """A host's non-translator item: its translator's backend's steps where that backend owns the host's
    network (a user-space data plane such as VPP's: `Renderer.render_item`), else Linux's."""
    role = host.translator
    own = choice.renderer(role).render_item(item, host, ctx) if role is not None else None
    return own if own is not None else linux.render_item(item)


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
        backend = choice.renderer(role)
        desc = backend.describe(role)
        variant = f" ({desc['variant']}, prefix {desc['prefix']})" if "variant" in desc else ""
        lines.append(f"{host}: {TRANSLATOR_ROLES[type(role)]} by {backend.name}{variant}")
    lines += list(topology.notes)
    notes = [n for r in topology.translators().values() for n in choice.renderer(r).notes(r)]
    lines += list(dict.fromkeys(notes))
    return [Comment(line) for line in lines]


def zero_checksum_dropper(chain: Topology, choice: BackendChoice) -> tuple[str, Renderer, str] | None:
    """The translator that would drop Knot's XDP-mode replies on `chain`, as (host, backend, role name), or
    None when every reply gets through. Knot 3.2's XDP mode sends its IPv4 UDP replies with checksum 0 (no
    checksum, which RFC 768 allows); the translator that carries them to IPv6 (the PLAT, the BR: the roles
    whose IPv4 side faces the server), where UDP needs a checksum, may compute it or drop them (RFC 7915
    section 4.5); its backend says which (`accepts_zero_udp_checksum`). Over IPv6 Knot computes the
    checksum. The one rule both worlds apply (emulation.emulator.knot_xdp_refusal, the testbed's plan)."""
    if ":" in chain.knot_address:
        return None
    for host, role in chain.translators().items():
        backend = choice.renderer(role)
        if isinstance(role, Plat | MapBrRole) and not backend.accepts_zero_udp_checksum:
            return host, backend, TRANSLATOR_ROLES[type(role)]
    return None


def zero_checksum_reason(backend: Renderer) -> str:
    """Why Knot's XDP mode cannot answer through `backend` (what zero_checksum_dropper found), one clause."""
    return (f"Knot's XDP mode answers IPv4 queries with UDP checksum 0 (RFC 768 allows it) and "
            f"{backend.name} drops such a datagram on its way to IPv6 (RFC 7915 section 4.5 lets it)")


def computing_backends(role: str, available_here: bool = True) -> list[str]:
    """The backends that can serve `role` and carry a zero IPv4 UDP checksum to IPv6 (with
    `available_here`, only those this machine can run: the emulation's; a testbed's hosts are others)."""
    return [b.name for b in registry.every() if role in b.roles and b.accepts_zero_udp_checksum
            and not (available_here and b.unavailable())]
