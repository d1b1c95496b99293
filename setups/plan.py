"""From a topology and a choice of backends to the steps each host runs.

One code path serves real hosts and emulation: `render` gives per-host steps. On a real host a
sub-host (the CE's `napt`) becomes a namespace its parent creates; in emulation every host is its own
namespace and the links are veth pairs the emulation creates first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .backends import Backend, RenderContext, linux
from .backends.bpf import BpfBackend
from .backends.jool import JoolBackend
from .backends.tayga import TaygaBackend
from .steps import Cmd, Comment, Daemon, Step
from .topology import TRANSLATOR_ROLES, Host, Topology, Translator

BACKENDS = ("jool", "tayga", "bpf")
ROLES = ("clat", "plat", "ce", "br")


@dataclass(frozen=True)
class BackendChoice:
    """Which backend serves each translator role (clat, plat, ce, br); forwarding and NAT44 are Linux's."""

    by_role: dict[str, str] = field(default_factory=lambda: dict.fromkeys(ROLES, "tayga"))
    tayga_variant: str = "patched"

    @classmethod
    def parse(cls, text: str, tayga_variant: str = "patched") -> BackendChoice:
        """ "tayga" (every role) or "clat=tayga,plat=jool" (per role; unnamed roles keep tayga)."""
        by_role = dict.fromkeys(ROLES, "tayga")
        if "=" not in text:
            _check_backend(text)
            by_role = dict.fromkeys(ROLES, text)
        else:
            for part in text.split(","):
                role, _, name = part.partition("=")
                if role not in ROLES:
                    raise ValueError(f"unknown role {role!r} in --backend: roles are {', '.join(ROLES)}")
                _check_backend(name)
                by_role[role] = name
        return cls(by_role, tayga_variant)

    def backend(self, role: Translator) -> Backend:
        name = self.by_role[TRANSLATOR_ROLES[type(role)]]
        if name == "jool":
            return JoolBackend()
        if name == "bpf":
            return BpfBackend()
        return TaygaBackend(self.tayga_variant)

    def machine_steps(self, topology: Topology, ctx: RenderContext) -> list[Step]:
        """Steps the chosen backends need once per machine, outside every namespace (e.g. a bpffs)."""
        steps: list[Step] = []
        seen: set[str] = set()
        for role in topology.translators().values():
            backend = self.backend(role)
            prepare = getattr(backend, "machine_steps", None)
            if prepare is not None and backend.name not in seen:
                seen.add(backend.name)
                steps += prepare(ctx)
        return steps


def _check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(
            f"unknown backend {name!r}: choose {' or '.join(BACKENDS)} "
            "(linux always does forwarding and NAT44)"
        )


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
    if any(
        choice.backend(r).name == "jool" and TRANSLATOR_ROLES[type(r)] == "br"
        for r in topology.translators().values()
    ):
        lines.append("jool: the paper's BR listing omits Jool's lines; the BR's follow Jool's MAP-T docs")
    return [Comment(line) for line in lines]
