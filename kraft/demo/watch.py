"""The main job's eyes: a thread that polls the active controller and narrates what changes,
and a structlog processor that counts what the clients log (producer retries, warnings).

`ClusterWatcher` asks the controllers (not the brokers: one of those is about to die) for the
committed image every ``interval_s`` and prints each change as it happens: a broker fenced or
unfenced, a partition's new leader (and leader epoch), its ISR shrinking or expanding. It also
keeps the milestones of the failover story, each a monotonic time:

- ``killed_at``: set by the demo just before the SIGKILL;
- ``fenced_at``: the controller fenced the victim (its session expired);
- ``leaders_moved_at``: no partition is led by the victim any more, each has a leader;
- ``isr_shrunk_at``: the victim is in no ISR;
- ``restarted_at``: set by the demo when it starts the victim again;
- ``unfenced_at``, ``rejoined_at``: the victim is unfenced, then in every ISR again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import structlog

from kraft.controller.client import ControllerClient
from kraft.demo.console import Console
from kraft.security.tls import TlsConfig
from storage.errors import KraftError


@dataclass(frozen=True, slots=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def _ids(ids: tuple[int, ...]) -> str:
    return "{" + ",".join(str(i) for i in sorted(ids)) + "}"


class ClientEvents:
    """A structlog processor for the demo process: counts ``produce_retried`` by error code
    and every warning by event name, prints nothing itself (the watcher reports them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.retries: Counter[str] = Counter()
        self.warnings: Counter[str] = Counter()

    def __call__(self, logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        event = str(event_dict.get("event", ""))
        with self._lock:
            if event == "produce_retried":
                self.retries[str(event_dict.get("error", "?"))] += 1
            elif method in ("warning", "error", "critical"):
                self.warnings[event] += 1
        raise structlog.DropEvent

    def install(self) -> None:
        """Route every structlog event of this process here (debug level: the producer logs
        its retries at debug)."""
        structlog.configure(
            processors=[self],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
            cache_logger_on_first_use=False,
        )

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            return Counter(self.retries), Counter(self.warnings)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in counter.most_common())


class ClusterWatcher(threading.Thread):
    """Polls DescribeCluster for ``topic`` and narrates the changes (see the module doc)."""

    def __init__(
        self,
        controller_bootstrap: str,
        topic: str,
        console: Console,
        client_events: ClientEvents,
        *,
        interval_s: float = 0.1,
        tls: TlsConfig | None = None,
    ) -> None:
        super().__init__(name="kraft-demo-watcher", daemon=True)
        self._client = ControllerClient(
            controller_bootstrap, timeout=2.0, request_timeout=1.0, tls=tls
        )
        self._topic = topic
        self._console = console
        self._client_events = client_events
        self._interval_s = interval_s
        self._stopping = threading.Event()
        self._changed = threading.Condition()
        self.partitions: dict[int, PartitionView] = {}
        self.fenced: dict[int, bool] = {}
        self.victim: int | None = None
        self.killed_at: float | None = None
        self.fenced_at: float | None = None
        self.leaders_moved_at: float | None = None
        self.isr_shrunk_at: float | None = None
        self.restarted_at: float | None = None
        self.unfenced_at: float | None = None
        self.rejoined_at: float | None = None
        self._retries_seen = 0
        self._retries_said_at = 0.0
        self._warnings_seen: Counter[str] = Counter()
        self.errors = 0

    # -- the demo's side -----------------------------------------------------------------------

    def refresh(self) -> None:
        """Poll once now (the demo's first look, before the thread runs)."""
        self._poll(narrate=False)

    def leader_counts(self) -> Counter[int]:
        return Counter(p.leader for p in self.partitions.values() if p.leader >= 0)

    def mark_killed(self, broker: int) -> None:
        self.victim = broker
        self.killed_at = time.monotonic()

    def mark_restarted(self) -> None:
        self.restarted_at = time.monotonic()

    def wait_until(self, milestone: str, timeout: float) -> float | None:
        """Block until ``milestone`` (an attribute name such as ``"rejoined_at"``) is set, or
        ``timeout`` seconds pass; returns its value (None on timeout)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while getattr(self, milestone) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            value: float = getattr(self, milestone)
            return value

    def close(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=5)
        self._client.close()

    # -- the thread ----------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stopping.is_set():
            self._poll(narrate=True)
            self._report_client_events()
            self._stopping.wait(self._interval_s)

    def _poll(self, *, narrate: bool) -> None:
        try:
            response = self._client.describe_cluster(topic_names=(self._topic,), timeout=2.0)
        except (KraftError, TimeoutError):
            self.errors += 1
            return
        now = time.monotonic()
        fenced = {b.broker_id: b.fenced for b in response.brokers}
        partitions: dict[int, PartitionView] = {}
        for topic in response.topics:
            for p in topic.partitions:
                partitions[p.partition] = PartitionView(
                    p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)
                )
        if narrate:
            self._narrate(fenced, partitions)
        self.fenced, self.partitions = fenced, partitions
        self._milestones(now)

    def _narrate(self, fenced: dict[int, bool], partitions: dict[int, PartitionView]) -> None:
        say = self._console.event
        for broker, is_fenced in sorted(fenced.items()):
            was = self.fenced.get(broker)
            if was is not None and was != is_fenced:
                if is_fenced:
                    say(f"controller fenced broker {broker} (no heartbeat within its session)")
                else:
                    say(f"controller unfenced broker {broker} (registered and caught up)")
        for index, new in sorted(partitions.items()):
            old = self.partitions.get(index)
            if old is None or old == new:
                continue
            changes = []
            if old.leader != new.leader:
                leader = "none (offline)" if new.leader < 0 else str(new.leader)
                changes.append(f"leader {old.leader} -> {leader} (leader epoch {new.leader_epoch})")
            if old.isr != new.isr:
                kind = "shrank" if len(new.isr) < len(old.isr) else "expanded"
                if len(new.isr) == len(old.isr):
                    kind = "changed"
                changes.append(f"ISR {kind} {_ids(old.isr)} -> {_ids(new.isr)}")
            if changes:
                say(f"partition {index}: " + ", ".join(changes))

    def _milestones(self, now: float) -> None:
        victim = self.victim
        if victim is None or self.killed_at is None:
            return
        parts = self.partitions.values()
        killed = self.killed_at
        say = self._console.event
        with self._changed:
            if self.fenced_at is None and self.fenced.get(victim):
                self.fenced_at = now
            if (
                self.leaders_moved_at is None
                and parts
                and all(p.leader >= 0 and p.leader != victim for p in parts)
            ):
                self.leaders_moved_at = now
                say(
                    f"failover done: every partition has a live leader, "
                    f"{now - killed:.2f}s after the kill"
                )
            if self.isr_shrunk_at is None and parts and all(victim not in p.isr for p in parts):
                self.isr_shrunk_at = now
            if self.restarted_at is not None:
                if self.unfenced_at is None and self.fenced.get(victim) is False:
                    self.unfenced_at = now
                if (
                    self.rejoined_at is None
                    and self.unfenced_at is not None
                    and parts
                    and all(victim in p.isr for p in parts if victim in p.replicas)
                ):
                    self.rejoined_at = now
                    say(
                        f"broker {victim} is back in every ISR, "
                        f"{now - self.restarted_at:.2f}s after its restart"
                    )
            self._changed.notify_all()

    def _report_client_events(self) -> None:
        retries, warnings = self._client_events.snapshot()
        total = sum(retries.values())
        now = time.monotonic()
        if total != self._retries_seen and now - self._retries_said_at >= 1.0:
            self._console.event(f"producer retried {total} batches so far ({_counts(retries)})")
            self._retries_seen = total
            self._retries_said_at = now
        for name, count in warnings.items():
            if self._warnings_seen[name] == 0:
                self._console.event(f"client warning: {name}")
            self._warnings_seen[name] = count


__all__ = ["ClientEvents", "ClusterWatcher", "PartitionView"]
