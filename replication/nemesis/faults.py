"""The fault schedule of a nemesis run: what happens when, drawn from one seed.

`plan_faults` is pure: a seed, a duration, the fault kinds allowed and the cluster's node ids
in; a list of `Fault` out, in time order, one at a time, each followed by a quiet gap so the
cluster can recover before the next. The same arguments give the same schedule, so a run can
be replayed with ``--seed``. Which node a fault hits is drawn here too, except where it can
only be known at run time (the active controller, a partition's leader): the fault then
names a role (``"active-controller"``, ``"leader"``) and the runner resolves it when the
fault starts.

Kinds (``--faults``):

- ``kill``: SIGKILL a broker, restart it when the fault ends;
- ``kill-controller``: SIGKILL the active controller, restart it;
- ``pause``: SIGSTOP a broker (a long GC pause, a stalled VM), SIGCONT when it ends;
- ``stop``: a controlled shutdown (SIGTERM) of a broker, restart it;
- ``partition``: one of these network partitions, healed when it ends:
  ``isolate`` (one node from everyone), ``leader-from-controllers`` (a partition leader cut
  from the controllers but not from clients or brokers), ``majority`` (a minority of the
  controllers and of the brokers cut from the rest), ``bridge`` (two sides that only one
  node still joins), ``one-way`` (a broker's links to the others drop what it sends);
- ``roll``: a rolling restart: every broker in turn, controlled shutdown then start;
- ``stale-leader``: the setup for an unclean election (targeted, not random): a follower of
  partition 0 is isolated until it leaves the ISR, the writes go on without it, then every
  other replica is killed and the stale follower reconnects. With
  ``unclean.leader.election.enable`` it becomes the leader and the writes it missed are lost
  when the others return and truncate to it; without, the partition waits for its ISR.
- ``delay``: every link to and from one node (a controller, a broker, or partition 0's
  leader) delays what it carries by 50-500 ms each way, varied by a fifth of that either way
  (a congested or distant link);
- ``loss`` (``--network netns`` only: a TCP proxy cannot lose packets): 1-10% of the packets
  one node (a controller, a broker, or partition 0's leader) sends and receives vanish;
- ``reorder`` (``--network netns`` only): the packets one node sends and receives are each
  held 0-10 or 0-40 ms, each at its own time, so they arrive out of order;
- ``duplicate`` (``--network netns`` only): 1-10% of them arrive twice;
- ``bandwidth``: every link to and from one broker (or partition 0's leader) is throttled to
  16-256 KiB/s each way (a saturated NIC): replication falls behind, the ISR shrinks;
- ``lone-leader`` (targeted): once every replica of partition 0 is in its ISR, the leader is
  cut from its followers (not from the controllers or clients) for up to 1.5 s, shorter than
  ``replica.lag.time.max.ms``, so they stay in its ISR while it acknowledges acks=1 writes
  alone; then it is killed and a follower is elected. What the leader acknowledged alone is
  lost with acks=1, never with acks=all.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

FAULT_KINDS: Final = (
    "kill",
    "kill-controller",
    "pause",
    "stop",
    "partition",
    "roll",
    "stale-leader",
    "lone-leader",
    "delay",
    "bandwidth",
    "loss",
    "reorder",
    "duplicate",
)
PACKET_ONLY_KINDS: Final = ("loss", "reorder", "duplicate")
"""Kinds only a network of hosts (``--network netns``) can inject."""
NETWORK_KINDS: Final = ("partition", "delay", "bandwidth", "loss", "reorder", "duplicate")
"""``--faults network``: the kinds that act on the network only, so every process lives the
whole run (no kill, pause, stop or restart): what a memory or descriptor slope needs."""
PARTITION_SHAPES: Final = ("isolate", "leader-from-controllers", "majority", "bridge", "one-way")
DELAYS_MS: Final = (50, 100, 200, 500)
"""What ``delay`` adds to every byte's way, each way."""
LOSS_PERCENTS: Final = (1.0, 5.0, 10.0)
"""What ``loss`` drops, each way."""
REORDER_MS: Final = (5, 20)
"""``reorder``: each packet is held up to this long, each at its own time, so packets overtake
each other (about one in three when they come closer than that)."""
DUPLICATE_PERCENTS: Final = (1.0, 5.0, 10.0)
"""What ``duplicate`` sends twice, each way."""
RATES_BYTES_PER_S: Final = (16 * 1024, 64 * 1024, 256 * 1024)
"""What ``bandwidth`` throttles links to, each way."""

FAULT_SECONDS: Final = (4.0, 10.0)
"""The shortest and longest fault."""

QUIET_SECONDS: Final = (3.0, 6.0)
"""The shortest and longest healthy gap after a fault."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One fault: ``kind`` (see the module docstring) from ``start_s`` to ``end_s`` after
    the run's start, on ``targets`` (node ids, or a role the runner resolves)."""

    start_s: float
    end_s: float
    kind: str
    shape: str = ""
    """For ``partition``: which one (`PARTITION_SHAPES`)."""
    targets: tuple[int | str, ...] = ()
    side_a: tuple[int, ...] = ()
    side_b: tuple[int, ...] = ()
    """For ``majority`` and ``bridge``: the two sides (a bridge node is on neither)."""
    delay_ms: int = 0
    """For ``delay``: the delay each way."""
    loss_percent: float = 0.0
    """For ``loss``: the share of packets dropped each way."""
    rate_bytes_per_s: int | None = None
    """For ``bandwidth``: the rate each way."""
    duplicate_percent: float = 0.0
    """For ``duplicate``: the share of packets sent twice each way."""

    @property
    def jitter_ms(self) -> int:
        """For ``delay``: how far either way each chunk or packet's delay varies (``reorder``:
        as far as the delay itself, from none to twice it)."""
        return self.delay_ms if self.kind == "reorder" else self.delay_ms // 5

    @property
    def label(self) -> str:
        what = f"{self.kind}:{self.shape}" if self.shape else self.kind
        if self.delay_ms:
            what += f":{self.delay_ms}ms"
        if self.loss_percent:
            what += f":{self.loss_percent:g}%"
        if self.duplicate_percent:
            what += f":{self.duplicate_percent:g}%"
        if self.rate_bytes_per_s is not None:
            what += f":{self.rate_bytes_per_s // 1024}KiB/s"
        targets = ",".join(map(str, self.targets))
        return f"{what}({targets})" if targets else what


def parse_fault_kinds(text: str, *, packets: bool = False) -> tuple[str, ...]:
    """``kill,pause,...`` (or ``all``, or ``network``: `NETWORK_KINDS`) as a tuple of kinds;
    ``packets``: the network is one of hosts, where `PACKET_ONLY_KINDS` work too.

    Raises:
        ValueError: an unknown kind, or one the network cannot inject.
    """
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    known = FAULT_KINDS if packets else tuple(k for k in FAULT_KINDS if k not in PACKET_ONLY_KINDS)
    if kinds == ("all",):
        return known
    if kinds == ("network",):
        return tuple(k for k in NETWORK_KINDS if k in known)
    if not packets and (only := [k for k in kinds if k in PACKET_ONLY_KINDS]):
        raise ValueError(f"fault kind {only[0]!r} needs --network netns (packets, not a proxy)")
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(
            f"unknown fault kind {unknown[0]!r}" if unknown else "no fault kind given"
        ) from None
    return kinds


def plan_faults(
    seed: int,
    duration_s: float,
    kinds: Sequence[str],
    *,
    controllers: Sequence[int],
    brokers: Sequence[int],
    warmup_s: float = 3.0,
) -> list[Fault]:
    """The faults of a run of ``duration_s`` seconds (see the module docstring). Faults end
    by ``duration_s``; the first starts after ``warmup_s``."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = warmup_s
    while True:
        length = rng.uniform(*FAULT_SECONDS)
        if t + length > duration_s:
            break
        kind = rng.choice(list(kinds))
        faults.append(draw_fault(rng, kind, t, t + length, controllers, brokers))
        t += length + rng.uniform(*QUIET_SECONDS)
    return faults


def draw_fault(
    rng: random.Random,
    kind: str,
    start: float,
    end: float,
    controllers: Sequence[int],
    brokers: Sequence[int],
) -> Fault:
    """One fault of ``kind`` from ``start`` to ``end``, its targets drawn from ``rng``."""
    broker = rng.choice(list(brokers))
    match kind:
        case "kill" | "pause" | "stop":
            return Fault(start_s=start, end_s=end, kind=kind, targets=(broker,))
        case "stale-leader" | "lone-leader":
            return Fault(start_s=start, end_s=end, kind=kind, targets=("partition-0",))
        case "kill-controller":
            return Fault(start_s=start, end_s=end, kind=kind, targets=("active-controller",))
        case "roll":
            return Fault(start_s=start, end_s=end, kind=kind, targets=tuple(brokers))
        case "delay":
            choices: list[int | str] = [*controllers, *brokers, "leader"]
            node = rng.choice(choices)
            delay = rng.choice(DELAYS_MS)
            return Fault(start_s=start, end_s=end, kind=kind, targets=(node,), delay_ms=delay)
        case "loss":
            choices = [*controllers, *brokers, "leader"]
            node = rng.choice(choices)
            percent = rng.choice(LOSS_PERCENTS)
            return Fault(start_s=start, end_s=end, kind=kind, targets=(node,), loss_percent=percent)
        case "reorder":
            choices = [*controllers, *brokers, "leader"]
            node = rng.choice(choices)
            held = rng.choice(REORDER_MS)
            return Fault(start_s=start, end_s=end, kind=kind, targets=(node,), delay_ms=held)
        case "duplicate":
            choices = [*controllers, *brokers, "leader"]
            node = rng.choice(choices)
            percent = rng.choice(DUPLICATE_PERCENTS)
            return Fault(
                start_s=start, end_s=end, kind=kind, targets=(node,), duplicate_percent=percent
            )
        case "bandwidth":
            choices = [*brokers, "leader"]
            node = rng.choice(choices)
            rate = rng.choice(RATES_BYTES_PER_S)
            return Fault(
                start_s=start, end_s=end, kind=kind, targets=(node,), rate_bytes_per_s=rate
            )
        case "partition":
            shape = rng.choice(PARTITION_SHAPES)
            nodes = [*controllers, *brokers]
            match shape:
                case "isolate":
                    targets: tuple[int | str, ...] = (rng.choice(nodes),)
                    return Fault(start_s=start, end_s=end, kind=kind, shape=shape, targets=targets)
                case "leader-from-controllers":
                    return Fault(
                        start_s=start, end_s=end, kind=kind, shape=shape, targets=("leader",)
                    )
                case "one-way":
                    return Fault(
                        start_s=start, end_s=end, kind=kind, shape=shape, targets=(broker,)
                    )
                case "majority":
                    minority = (
                        *rng.sample(list(controllers), (len(controllers) - 1) // 2),
                        *rng.sample(list(brokers), max(1, (len(brokers) - 1) // 2)),
                    )
                    majority = tuple(n for n in nodes if n not in minority)
                    return Fault(
                        start_s=start,
                        end_s=end,
                        kind=kind,
                        shape=shape,
                        side_a=tuple(sorted(minority)),
                        side_b=majority,
                    )
                case _:  # bridge
                    shuffled = rng.sample(nodes, len(nodes))
                    bridge, rest = shuffled[0], shuffled[1:]
                    half = len(rest) // 2
                    return Fault(
                        start_s=start,
                        end_s=end,
                        kind=kind,
                        shape="bridge",
                        targets=(bridge,),
                        side_a=tuple(sorted(rest[:half])),
                        side_b=tuple(sorted(rest[half:])),
                    )
        case _:
            raise ValueError(f"unknown fault kind {kind!r}")


__all__ = [
    "DELAYS_MS",
    "DUPLICATE_PERCENTS",
    "FAULT_KINDS",
    "LOSS_PERCENTS",
    "NETWORK_KINDS",
    "PACKET_ONLY_KINDS",
    "PARTITION_SHAPES",
    "RATES_BYTES_PER_S",
    "REORDER_MS",
    "Fault",
    "draw_fault",
    "parse_fault_kinds",
    "plan_faults",
]
