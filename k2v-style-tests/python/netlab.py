"""The network test bed (doc/netlab.md): hosts in network namespaces joined
by a bridge, with every link between two of them shaped (delay, jitter,
loss, rate) as a profile says.

A "switch" namespace `hgc-sw` holds a bridge; each node slot i is
namespace `hgc-n<i>` with address 10.231.0.<i>/24 on a veth into the
bridge; the load namespace `hgc-load` (clients of a benchmark) is
10.231.0.250; the root namespace (where the tests and scripts run) is
10.231.0.254 on `hgc-host`, and its traffic is never shaped (control and
the chaos suite's clients). The bridge lives in its own namespace so that
the root namespace's firewall (Docker's FORWARD DROP) never sees the
traffic. Every name starts with `hgc-`; a lock file keeps two runs apart
(the chaos suite, script/netlab and test_netlab.py share this network).

Shaping, per ordered pair of hosts (a -> b), for a profile:
- delay, jitter and loss at b's ingress: `iptables -t mangle -A PREROUTING
  -s a -j NFQUEUE --queue-num <slot of a>` in b's namespace, and a
  `hangar-netdelay` process there holding each packet for half the pair's
  round trip (this machine's kernel has no `sch_netem`; ingress, because
  packets held on the sender's side would count against its socket and
  stall TCP Small Queues);
- rate: each host has a NIC of `nic_mbit` (the link rate unless given),
  both ways: an `htb` parent class at that rate on its `eth0` (what it
  sends), with a class per destination at the pair's link rate under it;
  and an `htb` on its port of the bridge (what it receives). Traffic to and
  from the root namespace bypasses both.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

from hangar_testlib import NETDELAY_BIN, die_with_parent

SUBNET = "10.231.0"
HOST_IP = f"{SUBNET}.254"
SW_NS = "hgc-sw"
HOST_IF = "hgc-host"
LOAD_SLOT = 250
LOCK_FILE = "/run/hgc-chaos.lock"


def sh(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    res = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {res.returncode}: {res.stderr.strip()}")
    return res


def namespaces_usable() -> tuple[bool, str]:
    """Whether this process can create network namespaces (root, iproute2, iptables)."""
    if os.geteuid() != 0:
        return False, "the network test bed needs root to create network namespaces (ip netns)"
    for tool in ("ip", "iptables", "tc"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` is not installed (script/install-test-deps installs it)"
    probe = "hgc-probe"
    sh("ip", "netns", "del", probe, check=False)
    res = sh("ip", "netns", "add", probe, check=False)
    if res.returncode != 0:
        return False, f"`ip netns add` failed: {res.stderr.strip()}"
    try:
        res = sh("ip", "netns", "exec", probe, "iptables", "-L", "-n", check=False)
        if res.returncode != 0:
            return False, f"iptables does not work inside a namespace: {res.stderr.strip()}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return True, ""


@dataclasses.dataclass(frozen=True)
class Profile:
    """How the links of a lab are shaped. Node slot i is in zone
    `(i - 1) % zones + 1`; the load namespace is in zone `load_zone`.
    `zone_rtt_ms[(a, b)]` (a < b) is the round trip between zones a and b;
    two hosts of one zone are `local_rtt_ms` apart. Every link has rate
    `rate_mbit` in each direction, loses `loss_pct` % of its packets (at
    each end's ingress) and adds up to ±`jitter_ms` (never reordering);
    every host's NIC carries `nic_mbit` (default: `rate_mbit`) each way,
    whatever its links could."""

    name: str
    zones: int
    local_rtt_ms: float
    zone_rtt_ms: dict
    rate_mbit: float
    loss_pct: float = 0.0
    jitter_ms: float = 0.0
    load_zone: int = 1
    nic_mbit: float | None = None

    @property
    def nic(self) -> float:
        return self.nic_mbit if self.nic_mbit is not None else self.rate_mbit

    def zone(self, slot: int) -> int:
        return self.load_zone if slot == LOAD_SLOT else (slot - 1) % self.zones + 1

    def rtt_ms(self, a: int, b: int) -> float:
        za, zb = sorted((self.zone(a), self.zone(b)))
        return self.local_rtt_ms if za == zb else self.zone_rtt_ms[(za, zb)]

    def describe(self) -> str:
        zones = ", ".join(f"z{a}-z{b} {v:g} ms" for (a, b), v in sorted(self.zone_rtt_ms.items()))
        return (f"{self.name}: {self.zones} zone(s), RTT {self.local_rtt_ms:g} ms within a zone"
                f"{'; ' + zones if zones else ''}; {self.rate_mbit:g} Mbit/s per link, "
                f"{self.nic:g} Mbit/s per host"
                f"{f', {self.loss_pct:g} % loss' if self.loss_pct else ''}"
                f"{f', ±{self.jitter_ms:g} ms jitter' if self.jitter_ms else ''}")


PROFILES = {
    "lan": Profile("lan", zones=1, local_rtt_ms=0.2, zone_rtt_ms={}, rate_mbit=10_000),
    "racks": Profile("racks", zones=3, local_rtt_ms=0.2,
                     zone_rtt_ms={(1, 2): 1.0, (1, 3): 1.0, (2, 3): 1.0}, rate_mbit=10_000),
    "wan": Profile("wan", zones=3, local_rtt_ms=0.2,
                   zone_rtt_ms={(1, 2): 20.0, (1, 3): 40.0, (2, 3): 80.0}, rate_mbit=1_000, loss_pct=0.1),
}


def uniform(name: str, rtt_ms: float, rate_mbit: float = 10_000, loss_pct: float = 0.0,
            jitter_ms: float = 0.0) -> Profile:
    """Every node in a zone of its own, every pair `rtt_ms` apart (the load
    namespace shares zone 1, so it is `rtt_ms` from nodes 2 and 3)."""
    return Profile(name, zones=3, local_rtt_ms=0.2, zone_rtt_ms={(1, 2): rtt_ms, (1, 3): rtt_ms, (2, 3): rtt_ms},
                   rate_mbit=rate_mbit, loss_pct=loss_pct, jitter_ms=jitter_ms)


class Net:
    """The switch namespace, the root namespace's port on it, one namespace
    per node slot and (with `load`) the load namespace; shaped by `shape`."""

    def __init__(self, slots: int = 3, load: bool = False):
        self.slots = slots
        self.load = load
        self.lock_fd = None
        self.profile: Profile | None = None
        self.delays: list[subprocess.Popen] = []

    @staticmethod
    def ns(slot: int) -> str:
        return "hgc-load" if slot == LOAD_SLOT else f"hgc-n{slot}"

    @staticmethod
    def ip(slot: int) -> str:
        return f"{SUBNET}.{slot}"

    def members(self) -> list[int]:
        return list(range(1, self.slots + 1)) + ([LOAD_SLOT] if self.load else [])

    def setup(self) -> None:
        self.lock_fd = open(LOCK_FILE, "w")
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another chaos or netlab run holds {LOCK_FILE}") from None
        self.teardown(keep_lock=True)  # what a killed run left behind
        sh("ip", "netns", "add", SW_NS)
        sh("ip", "-n", SW_NS, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", SW_NS, "link", "set", "br0", "up")
        sh("ip", "-n", SW_NS, "link", "set", "lo", "up")
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", "host", "netns", SW_NS)
        sh("ip", "-n", SW_NS, "link", "set", "host", "master", "br0", "up")
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
        sh("ip", "link", "set", HOST_IF, "up")
        for s in self.members():
            ns = self.ns(s)
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", SW_NS, "link", "add", f"p{s}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", SW_NS, "link", "set", f"p{s}", "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.ip(s)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def shape(self, profile: Profile) -> None:
        """Shapes every link between two members as `profile` says (see the
        module's comment); the root namespace's links stay as they are."""
        if not NETDELAY_BIN.exists():
            raise RuntimeError(f"{NETDELAY_BIN} is missing: cargo build -p hangar_netdelay")
        self.profile = profile
        members = self.members()
        for b in members:
            ns = self.ns(b)
            links = []
            for a in members:
                if a == b:
                    continue
                one_way = profile.rtt_ms(a, b) / 2
                links += ["--link", f"{a}:{one_way:g}:{profile.jitter_ms / 2:g}:{profile.loss_pct:g}"]
            log = open(Path("/tmp") / f"hgc-netdelay-{ns}.log", "wb")
            p = subprocess.Popen(["ip", "netns", "exec", ns, str(NETDELAY_BIN), *links], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=log, preexec_fn=die_with_parent)
            log.close()
            self.delays.append(p)
            if p.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"hangar-netdelay in {ns} did not start: {p.wait(5)}; see /tmp/hgc-netdelay-{ns}.log")
            for a in members:
                if a != b:
                    sh("ip", "netns", "exec", ns, "iptables", "-t", "mangle", "-A", "PREROUTING",
                       "-s", self.ip(a), "-j", "NFQUEUE", "--queue-num", str(a))
            self.shape_host(b, profile)

    def shape_host(self, b: int, profile: Profile) -> None:
        """The rates of host `b`: its NIC both ways, and its links out."""
        ns, peers = self.ns(b), [a for a in self.members() if a != b]
        nic, link = profile.nic, min(profile.rate_mbit, profile.nic)

        def burst(mbit: float) -> str:
            # At least a GSO packet (64 KiB), else about 1 ms at the rate.
            return str(max(128 * 1024, int(mbit * 1e6 / 8 / 1000)))

        def tc(*args: str, where: str = ns) -> None:
            sh("ip", "netns", "exec", where, "tc", *args)

        # What b sends: unclassified packets (to the root namespace) bypass
        # the htb; the links share the NIC class (each is guaranteed its
        # share and may borrow up to its own rate, so that together they
        # never pass the NIC's).
        tc("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "9999")
        tc("class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb",
           "rate", f"{nic:g}mbit", "ceil", f"{nic:g}mbit", "burst", burst(nic), "cburst", burst(nic))
        for a in peers:
            tc("class", "add", "dev", "eth0", "parent", "1:1", "classid", f"1:{a + 10}", "htb",
               "rate", f"{nic / len(peers):g}mbit", "ceil", f"{link:g}mbit", "burst", burst(link),
               "cburst", burst(link))
            tc("filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
               "match", "ip", "dst", f"{self.ip(a)}/32", "flowid", f"1:{a + 10}")
        # What b receives: its port of the bridge, at the NIC's rate, for
        # everything from the other hosts.
        port = f"p{b}"
        tc("qdisc", "add", "dev", port, "root", "handle", "1:", "htb", "default", "9999", where=SW_NS)
        tc("class", "add", "dev", port, "parent", "1:", "classid", "1:1", "htb", "rate", f"{nic:g}mbit",
           "ceil", f"{nic:g}mbit", "burst", burst(nic), "cburst", burst(nic), where=SW_NS)
        for a in peers:
            tc("filter", "add", "dev", port, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
               "match", "ip", "src", f"{self.ip(a)}/32", "flowid", "1:1", where=SW_NS)

    def check_delays(self) -> None:
        """Raises if a delay process died (its links would drop everything)."""
        for p in self.delays:
            if p.poll() is not None:
                raise RuntimeError(f"a hangar-netdelay exited with {p.returncode}: {p.args[3]}")

    def rtt_ms(self, a: int, b: int, port: int = 9) -> float:
        """A measured round trip from `a` to `b`: the time of a TCP connect
        to a closed port (the SYN and its RST), taken in `a`'s namespace."""
        code = ("import socket,time\n"
                "best=1e9\n"
                "for _ in range(3):\n"
                "  s=socket.socket();s.settimeout(5);t=time.perf_counter()\n"
                "  try: s.connect((%r,%d))\n"
                "  except OSError: pass\n"
                "  best=min(best,time.perf_counter()-t);s.close()\n"
                "print(best*1000)\n") % (self.ip(b), port)
        out = sh("ip", "netns", "exec", self.ns(a), "python3", "-c", code, timeout=60).stdout
        return float(out.strip())

    def teardown(self, keep_lock: bool = False) -> None:
        for p in self.delays:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        self.delays = []
        listed = sh("ip", "netns", "list", check=False).stdout.split("\n")
        for line in listed:
            name = line.split(" ")[0]
            if re.fullmatch(r"hgc-n\d+|hgc-sw|hgc-load", name):
                # Whatever a killed run left running in it (a delay line).
                for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                    try:
                        os.kill(int(pid), 9)
                    except (ProcessLookupError, ValueError):
                        pass
                sh("ip", "netns", "del", name, check=False)
        sh("ip", "link", "del", HOST_IF, check=False)
        if not keep_lock and self.lock_fd is not None:
            self.lock_fd.close()
            self.lock_fd = None

    def peers_of(self, slot: int) -> list[str]:
        return [self.ip(s) for s in range(1, self.slots + 1) if s != slot]

    def partition(self, slot: int, direction: str) -> None:
        """Cut `slot` off from the other nodes: `both`, `in` (it hears nothing)
        or `out` (nothing it sends arrives). Clients (10.231.0.254) still reach it."""
        ns = self.ns(slot)
        for peer in self.peers_of(slot):
            if direction in ("both", "in"):
                sh("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-s", peer, "-j", "DROP")
            if direction in ("both", "out"):
                sh("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-d", peer, "-j", "DROP")

    def heal(self, slot: int) -> None:
        sh("ip", "netns", "exec", self.ns(slot), "iptables", "-F", check=False)

