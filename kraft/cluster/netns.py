"""Test hosts on one machine: one Linux network namespace per node on a private bridge, and
real network faults between them (issue 29). Needs root and ``ip``/``tc`` (iproute2).

Topology of one run (``RUN`` is a 4-hex-digit run id, every object's name starts with
``kn<RUN>-`` so a run's leftovers are found by name)::

    namespace kn<RUN>-<host>          eth: kn<RUN>-n<i>  10.77.X.i/24, lo; no default route
         |  veth
    kn<RUN>-h<i> --- bridge kn<RUN>-br (10.77.X.1/24: this machine, the operator's host)
                     no uplink, no NAT: the subnet reaches only itself and this machine

``10.77.X.0/24`` takes an ``X`` that no address or route of this machine and no other live run
uses. Each host gets its own port space, so nodes use fixed ports (9091, 9092, ...) there.

**Faults** act on the root side of a host's veth, so the process inside sees only what a real
network would do to it (packets vanish silently; its sockets get no error):

- `cut(host, to=...)`: a one-way partition: IPv4 packets *leaving* ``host`` (for ``to``, or for
  everyone) are dropped; what others send it still arrives. ARP is left alone, so the reverse
  direction keeps working.
- `isolate(host)`: both ways, by setting its veth down.
- `loss(host, percent, direction)`: each packet dropped with that probability.
- `bandwidth(host, kbit)`: a token bucket (``tc tbf``) on both directions of its link.
- `delay(host, ms, jitter_ms=...)`: each direction held back, by netem where the kernel has it,
  otherwise by a delaying packet relay per direction (`kraft.cluster.netns_relay`: a filter
  redirects the packets to a process that writes them back later); it returns which ran.
- `heal(host)` removes them all (and stops the relays).

A drop is a classic-BPF classifier (``tc filter ... bpf bytecode``: a destination address
match, or the kernel's random number, ``SKF_AD_RANDOM``) whose action redirects the packet
to a veth that is kept down, where the kernel discards it. That needs only ``clsact``,
``cls_bpf`` and ``act_mirred``; iptables, nft and ``act_gact`` are not used (the kernel this
was written on has none of them).

**Cleanup is certain**: `NetnsNetwork.close` (also at interpreter exit and on SIGTERM) deletes
the namespaces, the veths and the bridge; a run whose owner died (SIGKILL) is removed by
`sweep`, which every new run calls first and ``kraft netns sweep`` runs by hand. A run's state
(owner pid, subnet, hosts) is a JSON file in ``/run/kraft-netns/``, which is also how another
process (``kraft netns fault``) finds the hosts of a running network.
"""

from __future__ import annotations

import atexit
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

STATE_DIR: Final = Path("/run/kraft-netns")
PREFIX: Final = "kn"
_RUN_NAME: Final = re.compile(rf"^{PREFIX}([0-9a-f]{{4}})-")
RELAY_MARK: Final = 0x6B72_6C79
"""``SO_MARK`` of the packets a delay relay writes back (`kraft.cluster.netns_relay`)."""
SUBNET_BASE: Final = "10.77"
"""Runs take a /24 of 10.77.0.0/16 (private, RFC 1918), one no route of this machine uses."""
FIRST_HOST: Final = 10
"""Hosts are .10, .11, ... of the run's /24; .1 is this machine on the bridge."""

Direction = Literal["out", "in", "both"]


class NetnsUnavailableError(OSError):
    """Network namespaces cannot be made here (not root, no ``ip``, or the kernel refuses):
    one line saying which."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """One test host: its namespace, address, and the root side of its link."""

    name: str
    address: str
    namespace: str
    link: str
    """The veth end on the bridge (root namespace): where faults act."""
    inner: str
    """The veth end inside the namespace."""

    def exec_prefix(self) -> list[str]:
        """Run a command on this host: ``[*prefix, program, ...]``."""
        return ["ip", "netns", "exec", self.namespace]


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        line = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"{' '.join(argv)}: {line[-1] if line else f'exit {done.returncode}'}")
    return done


def check_available() -> None:
    """Raise `NetnsUnavailableError` in one line unless this process can make namespaces.

    Raises:
        NetnsUnavailableError: not root, ``ip``/``tc`` missing, or ``ip netns add`` refused.
    """
    if os.geteuid() != 0:
        raise NetnsUnavailableError("network namespaces need root (run as root, as CI does)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetnsUnavailableError(f"network namespaces need {tool!r} (iproute2)")
    probe = f"{PREFIX}{os.getpid() % 0x10000:04x}-probe"
    done = _run("ip", "netns", "add", probe, check=False)
    if done.returncode != 0:
        raise NetnsUnavailableError(
            f"cannot make a network namespace: {done.stderr.strip() or 'ip netns add failed'}"
        )
    _run("ip", "netns", "del", probe, check=False)


def _state_path(run_id: str) -> Path:
    return STATE_DIR / f"{run_id}.json"


def _live_runs() -> dict[str, dict[str, Any]]:
    """Every run with a state file whose owner is alive."""
    runs: dict[str, dict[str, Any]] = {}
    for path in STATE_DIR.glob("*.json") if STATE_DIR.is_dir() else ():
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if Path(f"/proc/{int(state.get('pid', 0))}").exists():  # its owner runs
            runs[path.stem] = state
    return runs


def _objects() -> tuple[list[str], list[str]]:
    """The names of every namespace and link of any run on this machine."""
    namespaces = [
        line.split()[0]
        for line in _run("ip", "netns", "list", check=False).stdout.splitlines()
        if _RUN_NAME.match(line)
    ]
    links = []
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if _RUN_NAME.match(name):
                links.append(name)
    return namespaces, links


def sweep(*, everything: bool = False) -> list[str]:
    """Remove the namespaces, links and state of every run whose owner is dead (with
    ``everything``: of every run). Returns what it removed."""
    live = set() if everything else set(_live_runs())
    namespaces, links = _objects()
    removed = []
    for name in namespaces:
        match = _RUN_NAME.match(name)
        if match and match.group(1) not in live:
            _run("ip", "netns", "del", name, check=False)
            removed.append(f"netns {name}")
    for name in links:
        match = _RUN_NAME.match(name)
        gone = match and match.group(1) not in live  # deleting one end of a veth: both go
        if gone and _run("ip", "link", "del", name, check=False).returncode == 0:
            removed.append(f"link {name}")
    for path in STATE_DIR.glob("*.json") if STATE_DIR.is_dir() else ():
        if path.stem not in live:
            _remove_state(path.stem)
    return removed


def _remove_state(run_id: str) -> None:
    """A run's state file and its relays' logs."""
    _state_path(run_id).unlink(missing_ok=True)
    for log in STATE_DIR.glob(f"{run_id}-relay-*.log"):
        log.unlink(missing_ok=True)


def _free_subnet(run_id: str) -> str:
    """A 10.77.X.0/24 that no address or route of this machine and no live run uses."""
    used = set(_run("ip", "-4", "-o", "addr", "show").stdout.split())
    used |= set(_run("ip", "-4", "route", "show", "table", "all").stdout.split())
    taken = {state.get("subnet") for state in _live_runs().values()}
    start = int(run_id, 16) % 256
    for step in range(256):
        third = (start + step) % 256
        net = ipaddress.ip_network(f"{SUBNET_BASE}.{third}.0/24")
        clash = any(_overlaps(net, word) for word in used if word[:1].isdigit() and "." in word)
        if str(net) not in taken and not clash:
            return str(net)
    raise NetnsUnavailableError(f"no free /24 left in {SUBNET_BASE}.0.0/16")


def _overlaps(net: ipaddress.IPv4Network | ipaddress.IPv6Network, word: str) -> bool:
    try:
        return net.overlaps(ipaddress.ip_network(word, strict=False))
    except ValueError:
        return False


def _bpf(*instructions: tuple[int, int, int, int]) -> str:
    """Classic BPF as ``tc ... bpf bytecode`` takes it: ``N,code jt jf k,...``."""
    return ",".join([str(len(instructions)), *(" ".join(map(str, i)) for i in instructions)])


_RET_MATCH: Final = (0x06, 0, 0, 0xFFFFFFFF)  # ret -1: the filter matches (its action runs)
_RET_NONE: Final = (0x06, 0, 0, 0)  # ret 0: no match
_IP_DST_OFFSET: Final = 14 + 16
"""cls_bpf sees the frame from its Ethernet header on both hooks: the IPv4 destination."""
_LOAD_RANDOM: Final = (0x20, 0, 0, 0xFFFFF000 + 56)  # ld #rand (SKF_AD_OFF + SKF_AD_RANDOM)


def _match_all() -> str:
    return _bpf(_RET_MATCH)


def _match_destination(address: str) -> str:
    dst = int(ipaddress.ip_address(address))
    return _bpf((0x20, 0, 0, _IP_DST_OFFSET), (0x15, 0, 1, dst), _RET_MATCH, _RET_NONE)


def _match_unmarked(mark: int) -> str:
    """Every packet but those marked ``mark`` (``SKF_AD_MARK``): what the relay writes back."""
    return _bpf((0x20, 0, 0, 0xFFFFF000 + 20), (0x15, 1, 0, mark), _RET_MATCH, _RET_NONE)


def _match_probability(percent: float) -> str:
    threshold = min(0xFFFFFFFF, round(percent / 100 * 2**32))
    return _bpf(_LOAD_RANDOM, (0x35, 0, 1, threshold), _RET_NONE, _RET_MATCH)  # jge: keep


class NetnsNetwork:
    """A bridge with no uplink and one namespace per host (see the module docstring).

    Args:
        run_id: attach to the running network of that id (``kraft netns fault``): faults
            work, `close` leaves it alone. None: create a new one, owned by this process.

    Raises:
        NetnsUnavailableError: namespaces cannot be made here (one line saying why).
    """

    def __init__(self, run_id: str | None = None) -> None:
        self._lock = threading.Lock()
        self.hosts: dict[str, Host] = {}
        if run_id is not None:
            self._attach(run_id)
            return
        check_available()
        sweep()
        self.owner = True
        self.owner_pid = os.getpid()
        self.run_id = secrets.token_hex(2)
        self.subnet = _free_subnet(self.run_id)
        self.bridge = self._name("br")
        self._blackhole = self._name("bk")
        self._closed = False
        self.relays: dict[str, list[int]] = {}
        """Host name -> pids of its delay relays (`kraft.cluster.netns_relay`)."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._save()
        atexit.register(self.close)
        _close_on_sigterm()
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self._address(1)}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            # Where dropped packets go: a veth kept down discards whatever is sent to it.
            _run(
                "ip",
                "link",
                "add",
                self._blackhole,
                "type",
                "veth",
                "peer",
                "name",
                self._name("bq"),
            )
        except BaseException:
            self.close()
            raise

    def _attach(self, run_id: str) -> None:
        try:
            state = json.loads(_state_path(run_id).read_text())
        except (OSError, ValueError) as e:
            raise OSError(f"no running netns network {run_id!r} ({e})") from None
        self.owner = False
        self.owner_pid = int(state["pid"])
        self._closed = False
        self.run_id = run_id
        self.subnet = state["subnet"]
        self.bridge = self._name("br")
        self._blackhole = self._name("bk")
        self.hosts = {name: Host(**fields) for name, fields in state["hosts"].items()}
        self.relays = {name: list(pids) for name, pids in state.get("relays", {}).items()}

    def _name(self, suffix: str) -> str:
        return f"{PREFIX}{self.run_id}-{suffix}"

    def _address(self, index: int) -> str:
        return str(ipaddress.ip_network(self.subnet)[index])

    @property
    def local_address(self) -> str:
        """This machine's address on the bridge (the operator's host)."""
        return self._address(1)

    def _save(self) -> None:
        state = {
            "pid": os.getpid(),
            "subnet": self.subnet,
            "hosts": {
                name: {
                    "name": h.name,
                    "address": h.address,
                    "namespace": h.namespace,
                    "link": h.link,
                    "inner": h.inner,
                }
                for name, h in self.hosts.items()
            },
            "relays": self.relays,
        }
        tmp = _state_path(self.run_id).with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, _state_path(self.run_id))

    def add_host(self, name: str) -> Host:
        """A new namespace ``name`` (letters, digits, ``-``) on the bridge, with the next
        address; its loopback is up and it has no default route."""
        if not re.fullmatch(r"[a-z0-9-]{1,40}", name) or name in self.hosts:
            raise ValueError(f"host name {name!r}: lowercase letters, digits, '-', distinct")
        index = FIRST_HOST + len(self.hosts)
        host = Host(
            name=name,
            address=self._address(index),
            namespace=self._name(name),
            link=self._name(f"h{index}"),
            inner=self._name(f"n{index}"),
        )
        self.hosts[name] = host
        self._save()
        ns = host.namespace
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", host.link, "type", "veth", "peer", "name", host.inner)
        _run("ip", "link", "set", host.inner, "netns", ns)
        _run("ip", "link", "set", host.link, "master", self.bridge, "up")
        _run("ip", "-n", ns, "addr", "add", f"{host.address}/24", "dev", host.inner)
        _run("ip", "-n", ns, "link", "set", host.inner, "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("tc", "qdisc", "add", "dev", host.link, "clsact")
        return host

    # -- faults ----------------------------------------------------------------------------

    def _drop(self, host: Host, hook: str, program: str) -> None:
        _run(
            "tc", "filter", "add", "dev", host.link, hook, "protocol", "ip",
            "bpf", "bytecode", program,
            "action", "mirred", "egress", "redirect", "dev", self._blackhole,
        )  # fmt: skip

    def cut(self, name: str, to: Iterable[str] | None = None) -> None:
        """One-way partition: drop what host ``name`` sends (to the hosts ``to``, or to
        everyone, this machine included); what they send it still arrives."""
        host = self.hosts[name]
        # Packets leaving the namespace enter the bridge at the root end's ingress.
        if to is None:
            self._drop(host, "ingress", _match_all())
            return
        for other in to:
            self._drop(host, "ingress", _match_destination(self.hosts[other].address))

    def isolate(self, name: str) -> None:
        """A full partition of host ``name``: its link goes down (both ways)."""
        _run("ip", "link", "set", self.hosts[name].link, "down")

    def loss(self, name: str, percent: float, direction: Direction = "both") -> None:
        """Drop each IPv4 packet of host ``name`` with probability ``percent`` / 100, on what
        it sends (``out``), receives (``in``) or both."""
        if not 0 < percent <= 100:
            raise ValueError(f"loss {percent}%: give a percentage in (0, 100]")
        host = self.hosts[name]
        if direction in ("out", "both"):
            self._drop(host, "ingress", _match_probability(percent))
        if direction in ("in", "both"):
            self._drop(host, "egress", _match_probability(percent))

    def bandwidth(self, name: str, kbit: int) -> None:
        """Limit host ``name``'s link to ``kbit`` kbit/s each way (a token bucket)."""
        host = self.hosts[name]
        burst = max(1600, kbit * 1000 // 8 // 50)  # 20 ms of traffic, at least a frame
        for prefix, dev in (((), host.link), (("-n", host.namespace), host.inner)):
            _run(
                "tc", *prefix, "qdisc", "replace", "dev", dev, "root", "tbf",
                "rate", f"{kbit}kbit", "burst", str(burst), "latency", "200ms",
            )  # fmt: skip

    def delay(
        self,
        name: str,
        ms: float,
        *,
        jitter_ms: float = 0.0,
        direction: Direction = "both",
        seed: int = 0,
        reorder: bool = False,
        duplicate_percent: float = 0.0,
    ) -> str:
        """Delay what host ``name`` receives (``in``), sends (``out``) or both by ``ms``
        each, varied by up to ``jitter_ms`` either way (order kept, unless ``reorder``), and
        send ``duplicate_percent`` of the packets twice. Uses the kernel's netem where it has
        it, otherwise a delaying relay (`kraft.cluster.netns_relay`, its draws from
        ``seed``); says which ran: ``"netem"`` or ``"relay"``. A second delay of the same
        host replaces the first."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError(f"delay {ms} ms, jitter {jitter_ms} ms: give values >= 0")
        if not 0 <= duplicate_percent <= 100:
            raise ValueError(f"duplicate {duplicate_percent}%: give a percentage in [0, 100]")
        host = self.hosts[name]
        self._stop_delay(host)
        ends = {"in": ((), host.link), "out": (("-n", host.namespace), host.inner)}
        chosen = ("in", "out") if direction == "both" else (direction,)
        if has_netem():
            for way in chosen:
                prefix, dev = ends[way]
                _run(
                    "tc", *prefix, "qdisc", "replace", "dev", dev, "root", "netem",
                    "delay", f"{ms}ms", *((f"{jitter_ms}ms",) if jitter_ms else ()),
                    *(("duplicate", f"{duplicate_percent}%") if duplicate_percent else ()),
                )  # fmt: skip
            return "netem"
        from kraft.cluster.netns_relay import start_relay

        pids = self.relays.setdefault(name, [])
        for way in chosen:
            prefix, dev = ends[way]
            in_namespace = way == "out"
            entry = "kdly0" if in_namespace else self._relay_entry(host)
            tap = "kdly1" if in_namespace else f"{self._relay_entry(host)[:-1]}e"
            _run("ip", *prefix, "link", "add", entry, "type", "veth", "peer", "name", tap)
            for dev_up in (entry, tap):
                _run("ip", *prefix, "link", "set", dev_up, "up")
            exec_prefix = host.exec_prefix() if in_namespace else []
            pids.append(
                start_relay(
                    exec_prefix,
                    listen=tap,
                    send=dev,
                    delay_ms=ms,
                    jitter_ms=jitter_ms,
                    seed=seed * 2 + len(pids),
                    owner_pid=self.owner_pid,
                    reorder=reorder,
                    duplicate_percent=duplicate_percent,
                    log_path=str(STATE_DIR / f"{self.run_id}-relay-{name}-{way}.log"),
                )
            )
            self._save()
            _run("tc", *prefix, "qdisc", "add", "dev", dev, "clsact", check=False)  # may exist
            _run(
                "tc", *prefix, "filter", "add", "dev", dev, "egress", "prio", "1",
                "protocol", "ip", "bpf", "bytecode", _match_unmarked(RELAY_MARK),
                "action", "mirred", "egress", "redirect", "dev", entry,
            )  # fmt: skip
        return "relay"

    def _stop_delay(self, host: Host) -> None:
        """Stop host's relays and remove their filters and veths (none: nothing happens)."""
        from kraft.cluster.netns_relay import stop_relay

        if host.name not in self.relays:
            return
        for pid in self.relays.pop(host.name):
            stop_relay(pid)
        self._save()
        ns = ("-n", host.namespace)
        _run("tc", *ns, "filter", "del", "dev", host.inner, "egress", check=False)
        _run("tc", "filter", "del", "dev", host.link, "egress", "prio", "1", check=False)
        _run("ip", *ns, "link", "del", "kdly0", check=False)
        _run("ip", "link", "del", self._relay_entry(host), check=False)

    def _relay_entry(self, host: Host) -> str:
        """The veth (this machine's namespace) a host's inbound relay reads the far end of."""
        return self._name(f"h{host.link.rpartition('h')[2]}d")

    def limits(self, name: str) -> dict[str, int]:
        """Counters of host ``name``'s faults: packets dropped by filters and packets a token
        bucket held back (``overlimits``), as ``tc -s`` reports them."""
        host = self.hosts[name]
        out = _run("tc", "-s", "qdisc", "show", "dev", host.link).stdout
        out += _run("tc", "-n", host.namespace, "-s", "qdisc", "show", "dev", host.inner).stdout
        overlimits = sum(int(n) for n in re.findall(r"overlimits (\d+)", out))
        filters = _run("tc", "-s", "filter", "show", "dev", host.link, "ingress").stdout
        filters += _run("tc", "-s", "filter", "show", "dev", host.link, "egress").stdout
        dropped = sum(int(n) for n in re.findall(r"Sent \d+ bytes (\d+) pkt", filters))
        return {"dropped": dropped, "overlimits": overlimits}

    def heal(self, name: str | None = None) -> None:
        """Remove every fault of host ``name`` (None: of every host)."""
        for host in [self.hosts[name]] if name else list(self.hosts.values()):
            self._stop_delay(host)
            _run("ip", "link", "set", host.link, "up")
            for hook in ("ingress", "egress"):
                _run("tc", "filter", "del", "dev", host.link, hook, check=False)
            _run("tc", "qdisc", "del", "dev", host.link, "root", check=False)
            _run("tc", "-n", host.namespace, "qdisc", "del", "dev", host.inner, "root", check=False)

    # -- cleanup ---------------------------------------------------------------------------

    def close(self) -> None:
        """Delete everything this run made (only if this process made it). Processes still
        running in a namespace keep it alive until they exit: stop them first."""
        with self._lock:
            if self._closed or not self.owner:
                return
            self._closed = True
        from kraft.cluster.netns_relay import stop_relay

        for pids in self.relays.values():
            for pid in pids:
                stop_relay(pid)
        for host in self.hosts.values():
            _run("ip", "netns", "del", host.namespace, check=False)
            _run("ip", "link", "del", self._relay_entry(host), check=False)
        for link in (*(h.link for h in self.hosts.values()), self._blackhole, self.bridge):
            _run("ip", "link", "del", link, check=False)
        _remove_state(self.run_id)
        atexit.unregister(self.close)

    def __enter__(self) -> NetnsNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_sigterm_installed = False


def _close_on_sigterm() -> None:
    """SIGTERM ends the process through ``SystemExit``, so atexit hooks (`close`) run; only
    where nothing else handles SIGTERM and on the main thread."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_signal)
        _sigterm_installed = True


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


_netem: bool | None = None


def has_netem() -> bool:
    """Whether this kernel has the netem qdisc (probed once, in a namespace of its own)."""
    global _netem
    if _netem is None:
        probe = f"{PREFIX}{os.getpid() % 0x10000:04x}-netem"
        _run("ip", "netns", "add", probe)
        try:
            done = _run(
                "tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                check=False,
            )  # fmt: skip
        finally:
            _run("ip", "netns", "del", probe, check=False)
        _netem = done.returncode == 0
    return _netem


def running_networks() -> dict[str, Sequence[str]]:
    """Every live run's id and host names."""
    return {run: list(state.get("hosts", {})) for run, state in _live_runs().items()}


__all__ = [
    "FIRST_HOST",
    "STATE_DIR",
    "Host",
    "NetnsNetwork",
    "NetnsUnavailableError",
    "check_available",
    "has_netem",
    "running_networks",
    "sweep",
]
