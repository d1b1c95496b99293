"""Four 'hosts' on this machine for the SSH proof: one network namespace per role, each running Debian's
sshd on a management link of its own (a veth to the root namespace with a random ULA /64), cabled by
veth pairs whose names the inventory gives. Nothing connects anywhere but these namespaces."""

from __future__ import annotations

import ipaddress
import secrets
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("client", "dut1", "dut2", "server")
CABLES = (("client", "eth1", "dut1", "eth1"), ("dut1", "eth2", "dut2", "eth1"),
          ("dut2", "eth2", "server", "eth1"))
INTERFACES = {
    "client": {"client-dut1": "eth1"},
    "dut1": {"client-dut1": "eth1", "dut1-dut2": "eth2"},
    "dut2": {"dut1-dut2": "eth1", "dut2-server": "eth2"},
    "server": {"dut2-server": "eth1"},
}


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=check).stdout


@dataclass
class SshHosts:
    workdir: Path
    prefix: str = field(default_factory=lambda: "tb" + "".join(
        secrets.choice(string.ascii_lowercase + string.digits) for _ in range(4)))
    ula: str = field(default_factory=lambda: f"fd{secrets.randbelow(256):02x}:{secrets.randbelow(65536):x}:"
                                             f"{secrets.randbelow(65536):x}")
    sshd: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def netns(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def address(self, role: str, end: int = 2) -> str:
        """The management address of a role (end 2) or of the root namespace's side of its link (end 1),
        written as OpenSSH will look it up in known_hosts (canonical form)."""
        return str(ipaddress.IPv6Address(f"{self.ula}:{ROLES.index(role) + 1}::{end}"))

    @property
    def key(self) -> Path:
        return self.workdir / "id_ed25519"

    def ssh_options(self) -> list[str]:
        return ["-F", "/dev/null", "-i", str(self.key), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.workdir / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes"]

    def up(self) -> None:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        known = []
        for i, role in enumerate(ROLES, 1):
            ns = self.netns(role)
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            for key in ("net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"):
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}=0")
            root_end = f"{self.prefix}m{i}"
            sh("ip", "link", "add", root_end, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            sh("ip", "address", "add", f"{self.address(role, 1)}/64", "dev", root_end, "nodad")
            sh("ip", "link", "set", root_end, "up")
            sh("ip", "-n", ns, "address", "add", f"{self.address(role)}/64", "dev", "mgmt0", "nodad")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            known.append(f"{self.address(role)} {self._start_sshd(role)}")
        (self.workdir / "known_hosts").write_text("\n".join(known) + "\n")
        for a, a_if, b, b_if in CABLES:
            sh("ip", "-n", self.netns(a), "link", "add", a_if, "type", "veth", "peer", "name", b_if,
               "netns", self.netns(b))
        self._wait_for_sshd()

    def kill_sshd(self, role: str) -> None:
        """The host stops answering SSH: its sshd and every session of it (the masters' too) killed."""
        for pid in sh("ip", "netns", "pids", self.netns(role), check=False).split():
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if name.startswith("sshd"):
                subprocess.run(["kill", "-9", pid], check=False, capture_output=True)
        self.sshd[role].wait(timeout=10)

    def restart_sshd(self, role: str) -> None:
        d = self.workdir / role
        log = open(d / "sshd.log", "ab")  # noqa: SIM115 - closed with the process
        self.sshd[role] = subprocess.Popen(
            ["ip", "netns", "exec", self.netns(role), "/usr/sbin/sshd", "-D", "-e", "-f",
             str(d / "sshd_config")],
            stdout=log, stderr=log, start_new_session=True)
        self._wait_for_sshd()

    def _start_sshd(self, role: str) -> str:
        d = self.workdir / role
        d.mkdir()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
        (d / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        (d / "sshd_config").write_text("\n".join([
            f"ListenAddress {self.address(role)}", f"HostKey {d / 'host_key'}", f"PidFile {d / 'sshd.pid'}",
            f"AuthorizedKeysFile {d / 'authorized_keys'}", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PrintMotd no", "MaxSessions 50", "MaxStartups 50", "AcceptEnv no",
        ]) + "\n")
        log = open(d / "sshd.log", "wb")  # noqa: SIM115 - closed with the process
        self.sshd[role] = subprocess.Popen(
            ["ip", "netns", "exec", self.netns(role), "/usr/sbin/sshd", "-D", "-e", "-f",
             str(d / "sshd_config")],
            stdout=log, stderr=log, start_new_session=True)
        return (d / "host_key.pub").read_text().split(" ", 2)[0] + " " + \
            (d / "host_key.pub").read_text().split(" ", 2)[1]

    def _wait_for_sshd(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        for role in ROLES:
            while True:
                dest = f"root@{self.address(role)}"
                argv = ["ssh", *self.ssh_options(), "-o", "BatchMode=yes", dest, "true"]
                done = subprocess.run(argv, capture_output=True, check=False)
                if done.returncode == 0:
                    break
                if time.monotonic() > deadline or self.sshd[role].poll() is not None:
                    log = (self.workdir / role / "sshd.log").read_text()
                    raise RuntimeError(f"sshd of {role} does not answer: {done.stderr!r} {log[-300:]}")
                time.sleep(0.1)

    def snapshot(self) -> dict[str, str]:
        """What a host 'is', read without SSH: addresses, routes, links, rules, every net.ipv4.conf.* and
        net.ipv6.conf.* sysctl of every interface (all, default), namespaces."""
        script = ("ip -br address; ip route; ip -6 route; ip -br link | sed 's/@[^ ]*//'; "
                  "nft list ruleset; iptables-save -t nat | grep -v '^#'; "
                  "sysctl -a -r '^net[.]ipv[46][.]conf[.]' 2>/dev/null")
        state = {role: sh("ip", "netns", "exec", self.netns(role), "sh", "-c", script) for role in ROLES}
        names = sh("ip", "netns", "list").split()
        state["netns"] = " ".join(sorted(n for n in names if n.startswith(self.prefix)))
        return state

    def down(self) -> None:
        for role in ROLES:
            process = self.sshd.get(role)
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
            ns = self.netns(role)
            # Processes left in our own namespaces (sshd sessions, a killed run's tester): ours to end.
            for pid in sh("ip", "netns", "pids", ns, check=False).split():
                subprocess.run(["kill", "-9", pid], check=False, capture_output=True)
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "link", "del", f"{self.prefix}m{ROLES.index(role) + 1}", check=False)

    def inventory(self, path: Path, build: Path, sysfs: Path, rundir: Path,
                  topology: str = "464xlat") -> Path:
        lines = [f'name = "{self.prefix}"', f'topology = "{topology}"', f'rundir = "{rundir}"',
                 f'napt_netns = "{self.prefix}-napt"',
                 f"ssh_options = {self.ssh_options()!r}".replace("'", '"')]
        for role in ROLES:
            lines += [f"\n[hosts.{role}]", f'ssh = "root@{self.address(role)}"',
                      f'management = "{self.address(role)}"',
                      "interfaces = { " + ", ".join(f'{k} = "{v}"' for k, v in INTERFACES[role].items())
                      + " }"]
            if role == "client":
                lines.append(f'tester = "{build / "dnsperf" / "xlatperf"}"')
            if role in ("dut1", "dut2"):
                lines += ['backend = "tayga"', f'tayga_binary = "{build / "tayga" / "tayga"}"',
                          "offline_cpus = [1, 2, 3]", f'sysfs_root = "{sysfs}/{role}"',
                          # never the machine's own /proc/irq: a fake tree (fake_irqs) or nothing
                          f'proc_root = "{sysfs.parent / "proc" / role}"']
        path.write_text("\n".join(lines) + "\n")
        return path


def fake_sysfs(root: Path, cpus: int) -> Path:
    """A sysfs tree with CPUs 0..cpus-1 online; CPU 0 has no `online` file (as on most x86 hosts)."""
    base = root / "devices" / "system" / "cpu"
    base.mkdir(parents=True)
    (base / "present").write_text(f"0-{cpus - 1}\n")
    (base / "cpu0").mkdir()
    for n in range(1, cpus):
        (base / f"cpu{n}").mkdir()
        (base / f"cpu{n}" / "online").write_text("1\n")
    return base


def online_states(base: Path, cpus: int) -> list[str]:
    return [(base / f"cpu{n}" / "online").read_text().strip() for n in range(1, cpus)]


def fake_irqs(sysfs_root: Path, proc_root: Path, irqs: dict[str, list[int]], affinity: str = "0-3") -> None:
    """Per interface its MSI IRQs (`<sysfs>/class/net/IF/device/msi_irqs/N`) and each IRQ's affinity file
    (`<proc>/irq/N/smp_affinity_list`, all `affinity`), as a host with real NICs has them."""
    for iface, numbers in irqs.items():
        msi = sysfs_root / "class" / "net" / iface / "device" / "msi_irqs"
        msi.mkdir(parents=True)
        for n in numbers:
            (msi / str(n)).write_text("msi\n")
            (proc_root / "irq" / str(n)).mkdir(parents=True)
            (proc_root / "irq" / str(n) / "smp_affinity_list").write_text(f"{affinity}\n")


def irq_affinities(proc_root: Path) -> dict[str, str]:
    return {d.name: (d / "smp_affinity_list").read_text().strip()
            for d in sorted((proc_root / "irq").iterdir())}
