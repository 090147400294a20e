"""`ReplicaManager`: the broker's partition replicas, kept in line with the metadata image
(Kafka's ``ReplicaManager.applyDelta``).

After each image change (coalesced into one pass per event-loop turn) `reconcile` visits the
partitions that changed (Kafka's ``localChanges``): it opens the replicas this broker now hosts
(a bounded slice per pass, so heartbeats keep flowing while a large topic appears), gives each
its role and live topic configs, stops and deletes those moved away or deleted (KIP-455), and
once per incarnation deletes stray logs. A replica that goes is taken out of service at once
and retired in slices: its log closed without a flush, its directory renamed aside and deleted
by a worker thread (Kafka's ``LogManager.asyncDelete``). Replicas a disk error took offline are
probed with backoff and reopened (`replication.broker.replicas.offline`). The reassignment throttles
follow the dynamic configs. A task ticks each replica when its deadline comes (`tick_loop`).
An object that `BrokerServer` holds: it reads the broker's image and epoch through callables.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from kraft.metadata import MetadataImage
from kraft.metadata.changes import changed_partitions
from kraft.metadata.image import PartitionRegistration, TopicImage
from kraft.raft_shell.clock import clock_ms
from kraft.types import TopicPartition
from replication.broker.config import BrokerNodeConfig
from replication.broker.loop_slice import LoopSlice
from replication.broker.replicas.change_event import ChangeEvent
from replication.broker.replicas.offline import OfflineReplicas
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.quorum_host import QuorumHost
from replication.broker.replicas.reconcile import (
    broker_statuses,
    hosted_partitions,
    is_adding_replica,
    may_reconcile,
)
from replication.broker.replicas.throttle import (
    FOLLOWER_RATE_KEY,
    LEADER_RATE_KEY,
    ThrottleBucket,
    throttled_rate,
)
from replication.broker.replicas.topic_settings import TopicSettings, resolve_topic_settings
from replication.core import (
    AlterPartitionSend,
    FollowerFetchRequest,
    FollowerFetchResponse,
)
from storage.checkpoint import CheckpointBatch
from storage.errors import KafkaStorageError, KraftError
from storage.file_io import probe_log_directory

MIN_TICK_INTERVAL_MS = 5
"""The least time between two passes of the tick task, however often inputs wake it."""
MAX_TICK_SLEEP_MS = 5_000
"""The longest the tick and probe tasks sleep without a wake or a deadline: the bound on the
delay a missed wake could cause."""
TOPIC_ID_FILE = "topic_id"

MAX_REPLICA_OPENS_PER_RECONCILE = 32
"""Replicas one reconcile pass opens (each opens or creates a log on disk, ~10 ms); the rest
wait for the next pass, scheduled at once, so a topic of thousands of partitions never holds
the event loop (and with it heartbeats and fetches) for seconds."""
RECONCILE_APPLY_BUDGET_S = 0.1
"""A pass applies changed registrations to open replicas until it has spent this long; the
rest wait for the next pass, scheduled at once. Each leadership change writes and fsyncs the
replica's leader-epoch checkpoint: a fencing moves hundreds of partitions, and applying them all
in one pass held a loaded broker's loop (its heartbeats with it) for seconds, so the broker
was fenced in turn, which moved them all again -- brokers fenced every few seconds, and
acks=all writes stopped, long after a network fault had healed."""
CHECKPOINT_BATCH = 8
"""Checkpoints (a new leader's epoch, a truncation's offsets) a pass collects before it writes
them together (`storage.checkpoint.CheckpointBatch`): one at a time, their two fsyncs each were
nearly all of a fencing's cost to the brokers that took its leaderships over. Few, so a write
of them, counted in the pass's time budgets, ends the pass little later than one write did
(32 at once made the creation of 600 partitions stall the brokers two to four times as often:
the pass overran its budget by a whole batch)."""
RECONCILE_OPEN_BUDGET_S = 0.05
"""...and a pass stops opening once it has spent this long: under load an open took ~30 ms
(fsyncs), so 32 of them held the loop for a second per pass, and brokers opening 10,000
replicas heartbeated late enough to be fenced, again and again."""
RETIRE_BUDGET_S = 0.05
"""A pass retires removed replicas (`ReplicaManager._retire`) until it has spent this long; the
rest wait for the next pass, scheduled at once. Deleting a topic of 1,000 partitions removed
333 replicas from each broker in one pass, each closed cleanly (fsyncs) and its directory
deleted on the loop: the brokers' loops stalled for 15-30 s on a loaded machine."""
DELETED_SUFFIX = "-delete"
"""A retired replica's directory is renamed to ``<topic>-<partition>.<unique>-delete`` (Kafka's
name for a log being deleted) before a worker thread deletes it: its name is free at once for
a new topic, and a crash leaves a directory the next start deletes (`_delete_stray_logs`)."""


class ReplicaManager:
    """The broker's partition replicas (see the module docstring): an object of its own that
    `BrokerServer` holds, reading the broker's image and epoch through ``image`` and
    ``broker_epoch``.

    Args:
        config: the broker's keys (``log.dirs``, the throttles, the checkpoint interval).
        quorum: the Raft groups of quorum-mode partitions (`QuorumHost`).
        image: the broker's current metadata image.
        broker_epoch: the broker's epoch (None before it registered).
        fetch_from_leader: a follower's fetch, batched per leader broker (`LeaderFetcher`).
        send_alter_partition: a leader's AlterPartition, sent to the controller.
        heartbeat_now: set to heartbeat at once (an offline replica to report).
        log: the broker's logger.
    """

    def __init__(
        self,
        config: BrokerNodeConfig,
        quorum: QuorumHost,
        *,
        image: Callable[[], MetadataImage],
        broker_epoch: Callable[[], int | None],
        fetch_from_leader: Callable[[FollowerFetchRequest], Awaitable[FollowerFetchResponse]],
        send_alter_partition: Callable[[PartitionReplica, AlterPartitionSend], None],
        heartbeat_now: asyncio.Event,
        log: Any,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.quorum = quorum
        self._image = image
        self._broker_epoch = broker_epoch
        self._fetch_from_leader = fetch_from_leader
        self._send_alter_partition = send_alter_partition
        self._heartbeat_now = heartbeat_now
        self._log = log
        self.replicas: dict[TopicPartition, PartitionReplica] = {}
        self.offline = OfflineReplicas()
        """Replicas a disk error took offline; reported in every heartbeat until reopened."""
        # Reassignment traffic only (KIP-455 with KIP-73 quotas):
        # `replication.broker.replicas.throttle`.
        self.leader_throttle = ThrottleBucket(config.leader_replication_throttled_rate, clock_ms())
        self.follower_throttle = ThrottleBucket(
            config.follower_replication_throttled_rate, clock_ms()
        )
        self.closed = False
        """Set when the broker stops: no pass or probe opens a replica any more."""
        self.reconcile_scheduled = False
        self._reconciled_image: MetadataImage | None = None
        self._strays_checked = False
        self.revisit: set[TopicPartition] = set()
        """Partitions the next pass visits even if unchanged: left unopened or unapplied by
        the last (`MAX_REPLICA_OPENS_PER_RECONCILE`, the time budgets), or reopened by the
        offline probe."""
        self._tick_wake = ChangeEvent()
        self._touched: set[PartitionReplica] = set()
        """Replicas that had an input since the tick task last read their deadline."""
        self._probe_wake = asyncio.Event()
        self.retiring: dict[TopicPartition, PartitionReplica] = {}
        """Replicas removed from service whose logs are not yet closed and renamed aside
        (`_retire`, `RETIRE_BUDGET_S`)."""
        self._deletions: set[asyncio.Future[None]] = set()
        """Directories being deleted in worker threads."""

    @property
    def image(self) -> MetadataImage:
        return self._image()

    @property
    def tick_wake(self) -> ChangeEvent:
        """Set by every replica input and pass: the tick task reads deadlines again."""
        return self._tick_wake

    def take_touched(self) -> set[PartitionReplica]:
        """The replicas that had an input since the last call (their deadlines may move)."""
        touched, self._touched = self._touched, set()
        return touched

    def restart(self) -> None:
        """Stop every replica (the broker registered again with a new epoch): the next pass
        visits every partition and opens them again with the new epoch."""
        for replica in self.replicas.values():
            replica.stop()
        self.replicas.clear()
        self._reconciled_image = None

    def stop(self) -> None:
        """Stop every replica (the broker stops); those being retired are finished first."""
        self.closed = True
        while self.retiring:
            self._finish_retiring(next(iter(self.retiring)))
        for replica in self.replicas.values():
            replica.stop()
        self.replicas.clear()

    def metadata_changed(self) -> None:
        """Reconcile on the next loop turn (one pass however many changes came meanwhile)."""
        if not self.reconcile_scheduled:
            self.reconcile_scheduled = True
            asyncio.get_running_loop().call_soon(self.reconcile)

    def reconcile(self) -> None:
        """One pass of Kafka's ``ReplicaManager.applyDelta`` (see the module docstring)."""
        self.reconcile_scheduled = False
        self._tick_wake.set()  # replicas may come, go or change role: deadlines move
        epoch = self._broker_epoch()
        image = self.image
        if self.retiring and not self.closed:
            self._retire()
        if epoch is None or self.closed or not may_reconcile(image, epoch):
            return  # not before the image holds our own registration (`reconcile`)
        brokers = broker_statuses(image)
        self._update_throttles(image)
        self.quorum.update_addresses(image)
        # Only what changed since the last pass (Kafka's ``localChanges``), plus the replicas
        # an earlier pass left unopened: a pass over every partition for each applied batch
        # (or each slice of `MAX_REPLICA_OPENS_PER_RECONCILE` opens) made a large topic
        # O(partitions^2) and starved the heartbeats into a fencing.
        previous, self._reconciled_image = self._reconciled_image, image
        changed = None if previous is None else changed_partitions(previous, image)
        full = changed is None
        work: Iterable[tuple[TopicImage, int, PartitionRegistration]]
        if changed is None:
            self.revisit.clear()
            work = image.iter_partitions()
        else:
            # NB: one slice of the replicas left unopened, not all of them: a pass opens at
            # most a slice anyway, and walking thousands of pending ones per pass made the
            # opening of a large topic O(n^2 / slice) (py-spy: the broker's largest consumer
            # at 10,000 partitions). The rest stay for the next passes.
            taken = list(itertools.islice(self.revisit, MAX_REPLICA_OPENS_PER_RECONCILE))
            self.revisit.difference_update(taken)
            if self.revisit:
                self.metadata_changed()
            revisit = [
                (topic, tp.partition, registration)
                for tp in taken
                if (topic := image.topic(tp.topic)) is not None
                and (registration := topic.partitions.get(tp.partition)) is not None
            ]
            work = [*changed, *revisit]
            if previous is not None and image.brokers is not previous.brokers:
                # A broker registered, fenced or unfenced: only the replicas this broker leads
                # use the others' states (KIP-841), and the visited ones get them below.
                visited = {TopicPartition(t.name, i) for t, i, _ in work}
                for held_tp, held in self.replicas.items():
                    if held.driver.is_leader and held_tp not in visited:
                        held.update_brokers(brokers)
        opens_left = MAX_REPLICA_OPENS_PER_RECONCILE
        started = time.monotonic()
        opens_until = started + RECONCILE_OPEN_BUDGET_S
        applies_until = started + RECONCILE_APPLY_BUDGET_S
        wanted: set[TopicPartition] = set()
        settings_by_topic: dict[str, TopicSettings] = {}
        checkpoints = CheckpointBatch()
        try:
            for topic, index, registration in work:
                tp = TopicPartition(topic.name, index)
                if self.node_id not in registration.replicas:
                    if not full and tp in self.replicas:
                        self._remove_replica(tp)  # moved off this broker
                    continue
                wanted.add(tp)
                entry = self.offline.get(tp)
                if entry is not None and entry.topic_id != topic.topic_id:
                    self.offline.remove(tp)  # a deleted topic's replica: the new one starts afresh
                    shutil.rmtree(self._replica_dir(tp), ignore_errors=True)
                    self._heartbeat_now.set()
                elif entry is not None:
                    continue  # reopened by the probe (`_offline_probe_loop`), not here
                replica = self.replicas.get(tp)
                if replica is not None and replica.topic_id != topic.topic_id:
                    self._remove_replica(tp)  # a deleted topic's, recreated under its name
                    replica = None
                try:
                    settings = settings_by_topic.get(topic.name)
                    if settings is None:
                        settings = resolve_topic_settings(image, topic.name, self.config)
                        settings_by_topic[topic.name] = settings
                    if replica is None:
                        if opens_left == 0 or time.monotonic() > opens_until:
                            self.revisit.add(tp)
                            self.metadata_changed()  # the rest on the next pass, after other work
                            continue
                        opens_left -= 1
                        with checkpoints.collecting():  # a recovery's truncations write some
                            replica = self._open_replica(tp, topic.topic_id, epoch, settings)
                        self.replicas[tp] = replica
                    else:
                        if time.monotonic() > applies_until:
                            self.revisit.add(tp)  # `wanted` has it: a full pass keeps it
                            self.metadata_changed()
                            continue
                        # Dynamic topic configs apply live, as in Kafka (no restart).
                        replica.update_log_config(settings.log)
                    with checkpoints.collecting():
                        replica.apply_registration(registration, brokers, settings.replication)
                    if len(checkpoints) >= CHECKPOINT_BATCH:
                        self._write_checkpoints(checkpoints)
                except (KafkaStorageError, OSError) as e:
                    if tp not in self.offline:  # the log did not even open
                        self._mark_offline(tp, topic.topic_id, repr(e))
                except KraftError as e:
                    self._log.error("replica_failed", topic_partition=str(tp), error=repr(e))
        finally:
            self._write_checkpoints(checkpoints)  # durable before anything else runs
        if not self._strays_checked:
            # Once, on the first pass (a full one), against every partition the image puts
            # here: not the pass's `wanted`, which leaves out replicas not yet opened.
            self._strays_checked = True
            hosted = {
                TopicPartition(t.name, i) for t, i, _ in hosted_partitions(image, self.node_id)
            }
            self._delete_stray_logs(hosted)
        if not full:
            return  # no topic came or went (else `changed_partitions` asks for a full pass)
        for tp in [tp for tp in self.replicas if tp not in wanted]:
            self._remove_replica(tp)
        for tp in [tp for tp in self.offline.partitions() if tp not in wanted]:
            self.offline.remove(tp)
            shutil.rmtree(self._replica_dir(tp), ignore_errors=True)
            self._log.info("offline_replica_removed", topic_partition=str(tp), log_deleted=True)
            self._heartbeat_now.set()

    def _write_checkpoints(self, checkpoints: CheckpointBatch) -> None:
        """Write the checkpoints a pass collected, together (`CHECKPOINT_BATCH`); a replica
        whose write failed goes offline, as it would have in the write itself."""
        for path, error in checkpoints.flush():
            replica = next((r for r in self.replicas.values() if r.directory == path.parent), None)
            if replica is not None:  # else removed in this pass: its directory went with it
                replica.go_offline(error)

    def _delete_stray_logs(self, wanted: set[TopicPartition]) -> None:
        """Delete the partition directories this broker holds but no longer hosts: a replica
        moved away (KIP-455) or a topic deleted while the broker was down. Once, at the first
        reconcile of an image that holds this incarnation's registration, so the image is at
        least as new as the broker's last knowledge (Kafka 3.7+ deletes such stray logs at
        startup too)."""
        try:
            entries = list(self.config.data_dir.iterdir())
        except OSError:
            return
        for directory in entries:
            if directory.name.endswith(DELETED_SUFFIX) and directory.is_dir():
                self._delete_in_background(directory)  # retired before a crash or a stop
                continue
            topic, sep, index = directory.name.rpartition("-")
            if not sep or not index.isdigit() or not (directory / TOPIC_ID_FILE).is_file():
                continue
            tp = TopicPartition(topic, int(index))
            if tp in wanted or tp in self.replicas or self.offline.get(tp) is not None:
                continue
            shutil.rmtree(directory, ignore_errors=True)
            self._log.info("stray_log_deleted", topic_partition=str(tp))

    def _update_throttles(self, image: MetadataImage) -> None:
        """Dynamic ``leader/follower.replication.throttled.rate`` apply at once."""
        now = clock_ms()
        config = self.config
        self.leader_throttle.set_rate(
            throttled_rate(
                image, self.node_id, LEADER_RATE_KEY, config.leader_replication_throttled_rate
            ),
            now,
        )
        self.follower_throttle.set_rate(
            throttled_rate(
                image, self.node_id, FOLLOWER_RATE_KEY, config.follower_replication_throttled_rate
            ),
            now,
        )

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        """``replica_id`` is being added to ``tp`` by a reassignment (its fetches are
        throttled, `replication.broker.replicas.throttle`)."""
        return is_adding_replica(self.image, tp, replica_id)

    def _remove_replica(self, tp: TopicPartition) -> None:
        """A replica this broker no longer hosts (its topic was deleted, or a reassignment moved
        it away, KIP-455) leaves service now and is retired in a later slice: Kafka's
        StopReplica with delete, which KRaft brokers apply from the metadata delta."""
        replica = self.replicas.pop(tp)
        previous = self.retiring.pop(tp, None)
        if previous is not None:  # NB: the same name removed twice: the older one goes first
            self.retiring[tp] = previous
            self._finish_retiring(tp)
        self.retiring[tp] = replica
        self.metadata_changed()

    def _retire(self) -> None:
        """Retire removed replicas until `RETIRE_BUDGET_S` is spent; the rest next pass."""
        cut = LoopSlice(RETIRE_BUDGET_S, most=None)
        while self.retiring:
            if cut.over():
                self.metadata_changed()
                return
            cut.took()
            self._finish_retiring(next(iter(self.retiring)))

    def _finish_retiring(self, tp: TopicPartition) -> None:
        """Stop ``tp``'s removed replica, close its log without a flush and rename its
        directory aside (`DELETED_SUFFIX`); a worker thread deletes it."""
        replica = self.retiring.pop(tp)
        replica.stop(delete=True)
        directory = replica.log.directory
        aside = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
        try:
            directory.rename(aside)
        except OSError:
            aside = directory  # gone already, or a disk error: delete what is there
        self._delete_in_background(aside)
        self._log.info("replica_removed", topic_partition=str(tp), log_deleted=True)

    def _delete_in_background(self, directory: Path) -> None:
        """``shutil.rmtree`` in a worker thread (a broker that stops before it ends leaves a
        renamed directory, which its next start deletes)."""
        if self.closed:
            return  # stopping: the next start deletes it
        future = asyncio.get_running_loop().run_in_executor(
            None, lambda: shutil.rmtree(directory, ignore_errors=True)
        )
        self._deletions.add(future)
        future.add_done_callback(self._deletions.discard)

    # --- offline replicas ---------------------------------------------------------------------

    def _replica_dir(self, tp: TopicPartition) -> Path:
        return self.config.data_dir / f"{tp.topic}-{tp.partition}"

    def _mark_offline(self, tp: TopicPartition, topic_id: str, error: str) -> None:
        self.offline.add(tp, topic_id, error, time.monotonic())
        self._log.error("replica_offline", topic_partition=str(tp), error=error)
        self._heartbeat_now.set()
        self._probe_wake.set()

    def _replica_went_offline(self, replica: PartitionReplica, error: KafkaStorageError) -> None:
        """`PartitionReplica`'s ``on_offline``: a disk error took ``replica`` offline."""
        tp = replica.topic_partition
        if self.replicas.get(tp) is not replica:
            return  # already stopped or replaced
        del self.replicas[tp]
        self._mark_offline(tp, replica.topic_id, error.message)

    async def offline_probe_loop(self) -> None:
        """Probe each offline replica when its backoff ends (woken when one goes offline)."""
        wake = self._probe_wake
        while True:
            wake.clear()
            for tp, entry in self.offline.due(time.monotonic()):
                if self.offline.get(tp) is entry:
                    self._probe_offline_replica(tp, entry.topic_id)
            next_probe_s = self.offline.next_probe_s()
            sleep_s = MAX_TICK_SLEEP_MS / 1000
            if next_probe_s is not None:
                sleep_s = min(sleep_s, max(next_probe_s - time.monotonic(), 0.0))
            sleep_s = max(sleep_s, MIN_TICK_INTERVAL_MS / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), sleep_s)

    def _probe_offline_replica(self, tp: TopicPartition, topic_id: str) -> None:
        """Try to reopen an offline replica: the directory must take a write, then its log
        is recovered from disk. On failure, wait twice as long (up to the maximum)."""
        epoch, image = self._broker_epoch(), self.image
        if epoch is None or self.closed or image.topic_ids_by_name.get(tp.topic) is None:
            return  # not registered yet, stopping, or the topic is going (reconcile drops it)
        try:
            probe_log_directory(self._replica_dir(tp))
            settings = resolve_topic_settings(image, tp.topic, self.config)
            replica = self._open_replica(tp, topic_id, epoch, settings)
        except (KraftError, OSError) as e:
            wait_ms = self.offline.probe_failed(tp, repr(e), time.monotonic())
            self._log.info(
                "offline_replica_probe_failed",
                topic_partition=str(tp),
                error=repr(e),
                next_probe_in_ms=wait_ms,
            )
            return
        self.offline.remove(tp)
        self.replicas[tp] = replica
        self._log.warning(
            "replica_back_online",
            topic_partition=str(tp),
            log_end_offset=replica.log.log_end_offset,
        )
        self.revisit.add(tp)
        self.metadata_changed()  # reconcile gives it its role
        self._heartbeat_now.set()

    def _open_replica(
        self, tp: TopicPartition, topic_id: str, epoch: int, settings: TopicSettings
    ) -> PartitionReplica:
        if tp in self.retiring:
            self._finish_retiring(tp)  # a removed replica of the same name leaves its directory
        directory = self._replica_dir(tp)
        id_file = directory / TOPIC_ID_FILE
        if directory.exists() and (not id_file.exists() or id_file.read_text() != topic_id):
            shutil.rmtree(directory)  # a deleted topic's leftovers under the same name
        directory.mkdir(parents=True, exist_ok=True)
        id_file.write_text(topic_id)
        return PartitionReplica(
            topic_partition=tp,
            topic_id=topic_id,
            directory=Path(directory),
            log_config=settings.log,
            local_id=self.node_id,
            broker_epoch=epoch,
            fetch_from_leader=self._fetch_from_leader,
            send_alter_partition=self._send_alter_partition,
            on_offline=self._replica_went_offline,
            on_input=self._replica_input,
            replication_mode=settings.mode,  # picks the partition driver
            quorum=self.quorum,
            write_caching=settings.write_caching,
        )

    def _replica_input(self, replica: PartitionReplica) -> None:
        """A replica's ``on_input``: its deadline may have moved; wake the tick task."""
        self._touched.add(replica)
        self._tick_wake.set()


__all__ = [
    "DELETED_SUFFIX",
    "MAX_REPLICA_OPENS_PER_RECONCILE",
    "MAX_TICK_SLEEP_MS",
    "MIN_TICK_INTERVAL_MS",
    "RECONCILE_OPEN_BUDGET_S",
    "RETIRE_BUDGET_S",
    "TOPIC_ID_FILE",
    "ReplicaManager",
]
