"""Broker lifecycle decisions: registration, heartbeats, fencing, controlled shutdown (KIP-631).

A broker's life, as the controller sees it (Kafka's ``BrokerHeartbeatManager``)::

    register ──> FENCED ──(heartbeat: caught up, !want_fence)──> UNFENCED
                  ^  ^                                             │  │
                  │  └────(want_fence, or session timeout)─────────┘  │ want_shutdown
                  │                                                   v
                  └──(leads nothing: should_shut_down)──── CONTROLLED_SHUTDOWN

- **Registration** is refused with INVALID_REQUEST when it cannot come from a broker: a
  negative broker id, no incarnation id, or fields longer than any broker sends
  (`registration_problem`). Kafka takes broker id 0 (so does kraft), and its brokers always
  send a random incarnation UUID; an empty request is therefore INVALID_REQUEST here.
- **Registration** writes a ``RegisterBrokerRecord`` (fenced) whose offset is the broker epoch, so
  every new incarnation has a larger epoch. A different incarnation of a broker whose session
  is still valid gets DUPLICATE_BROKER_REGISTRATION (after a crash, the new process retries
  until the old session expires; after a completed controlled shutdown the session is already
  over). The same incarnation registering again is a retry (Kafka's "amending" a
  registration): it gets a new broker epoch at once. A re-registering broker loses its ISR
  memberships and leaderships in the same batch (its old process is gone). With eligible
  leader replicas on (KIP-966), a registration whose ``previous_broker_epoch`` is not the
  registered epoch (the broker did not shut down cleanly, so its logs may have lost committed
  records) also takes the broker out of every ELR.
- **Unfencing**: once a heartbeat reports a metadata offset >= the broker epoch (the broker has
  replayed its own registration, so it is caught up to it); offline partitions that can now
  elect a leader do so in the same batch.
- **Fencing** (``want_fence``, or no heartbeat for ``broker.session.timeout.ms``): the fence
  record, the ISR removals and the leader moves form one batch (KIP-841).
- **Controlled shutdown** (``want_shutdown``): if the broker leads partitions (or is in more
  ISRs than one batch holds), it enters CONTROLLED_SHUTDOWN: its leaderships move away, then it
  leaves every ISR, in steps of at most `PARTITION_CHANGES_PER_BATCH` partition changes (one
  per heartbeat and per tick, `controlled_shutdown_step`). Once none is left,
  ``should_shut_down`` is true and it is fenced (KIP-631, Kafka's ``SHUTDOWN_NOW``).
  Quorum-mode partitions do not hold it back: their Raft groups move their leadership
  (`kraft.controller.quorum_partitions`).
- **Re-registration** of a broker whose previous incarnation is still unfenced and in more
  ISRs or leaderships than one batch holds (its paced fencing is under way) is refused with
  DUPLICATE_BROKER_REGISTRATION until the ticks have fenced it; the broker retries.

Heartbeat times are *soft state* in `BrokerHeartbeatManager`: not replicated, rebuilt (every
unfenced broker touched "now"; a fenced one has no session until it heartbeats, so a restarted
incarnation of a dead, fenced broker registers at once) when a controller becomes active, like
Kafka's.
"""

from __future__ import annotations

from typing import Final, final

from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from kraft.controller.offline_replicas import offline_replica_changes
from kraft.controller.partition_control import elect_offline_leaders, remove_broker_from_partitions
from kraft.controller.quorum_partitions import is_quorum_topic
from kraft.controller.result import ControllerResult
from kraft.metadata.configs import quoted
from kraft.metadata.image import BrokerState, MetadataImage
from kraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from storage.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE: Final = 1000
"""Producer ids handed out per AllocateProducerIds request (KIP-730)."""

PARTITION_CHANGES_PER_BATCH: Final = 500
"""Partition changes in one automatic batch: a step of fencing a broker
(`fence_one_expired_broker`), the elections of an unfencing or of a tick. At ~0.1-0.5 ms per
record to decide, encode and replay in Python, a batch stays well under the Raft timeouts."""

INCARNATION_ID_MAX_CHARS: Final = 64
"""A broker sends a UUID (36 characters, 32 in hex)."""
MAX_LISTENERS: Final = 16
HOST_MAX_CHARS: Final = 255
"""A DNS name is at most 253 characters."""
NAME_MAX_CHARS: Final = 249
"""Listener names, security protocols and racks (Kafka's topic-name bound, for want of one)."""


def registration_problem(request: RegisterBrokerRequest) -> str | None:
    """Why ``request`` cannot be a broker's registration, or None. Bounds every field that
    becomes part of the metadata image, which every controller and broker keeps."""
    if request.broker_id < 0:
        return f"broker id must be >= 0, got {request.broker_id}"
    if not request.incarnation_id:
        return "a registration needs an incarnation id (a random id per broker process)"
    if len(request.incarnation_id) > INCARNATION_ID_MAX_CHARS:
        return f"incarnation id {quoted(request.incarnation_id)} is too long"
    if len(request.listeners) > MAX_LISTENERS:
        return f"{len(request.listeners)} listeners, at most {MAX_LISTENERS}"
    for listener in request.listeners:
        if len(listener.host) > HOST_MAX_CHARS:
            return f"listener host {quoted(listener.host)} is too long"
        if len(listener.name) > NAME_MAX_CHARS or len(listener.security_protocol) > NAME_MAX_CHARS:
            return f"listener {quoted(listener.name)} has a name or protocol that is too long"
        if not 0 <= listener.port <= 65535:
            return f"listener port {listener.port} is not in [0, 65535]"
    if request.rack is not None and len(request.rack) > NAME_MAX_CHARS:
        return f"rack {quoted(request.rack)} is too long"
    return None


@final
class BrokerHeartbeatManager:
    """Soft state: when each broker was last heard from, and its last reported metadata offset."""

    def __init__(self, session_timeout_ms: int) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[int, int] = {}
        self._metadata_offset: dict[int, int] = {}

    def reset(self, broker_ids: list[int], now_ms: int) -> None:
        """Forget everything and give every broker a fresh session (on becoming active)."""
        self._last_contact_ms = dict.fromkeys(broker_ids, now_ms)
        self._metadata_offset = {}

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int | None = None) -> None:
        self._last_contact_ms[broker_id] = max(now_ms, self._last_contact_ms.get(broker_id, now_ms))
        if metadata_offset is not None:
            self._metadata_offset[broker_id] = metadata_offset

    def remove(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)
        self._metadata_offset.pop(broker_id, None)

    def last_contact_ms(self, broker_id: int) -> int | None:
        return self._last_contact_ms.get(broker_id)

    def metadata_offset(self, broker_id: int) -> int | None:
        return self._metadata_offset.get(broker_id)

    def session_expired(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is None or now_ms - last > self.session_timeout_ms

    def session_deadline_ms(self, broker_id: int) -> int | None:
        last = self._last_contact_ms.get(broker_id)
        return None if last is None else last + self.session_timeout_ms + 1


def _fence_records(
    image: MetadataImage, broker_id: int, *, elr_enabled: bool = False
) -> list[MetadataRecord]:
    """Fence ``broker_id`` and, in the same batch, drop it from every ISR and move its
    leaderships (KIP-841). A fenced broker is plain FENCED: fencing also ends a controlled
    shutdown."""
    return [
        _fence_record(image, broker_id),
        *remove_broker_from_partitions(image, broker_id, elr_enabled=elr_enabled),
    ]


def handle_register_broker(
    image: MetadataImage,
    request: RegisterBrokerRequest,
    *,
    next_offset: int,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
    elr_enabled: bool = False,
) -> ControllerResult[RegisterBrokerResponse]:
    """Register a broker; ``next_offset`` is the log offset the batch will start at, which
    becomes the broker epoch (the ``RegisterBrokerRecord`` is the batch's first record)."""
    problem = registration_problem(request)
    if problem is not None:
        return ControllerResult(
            records=(),
            response=RegisterBrokerResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message=problem
            ),
        )
    existing = image.broker(request.broker_id)
    if (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and not heartbeats.session_expired(request.broker_id, now_ms)
    ):
        return ControllerResult(
            records=(),
            response=RegisterBrokerResponse(
                error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                # NB: never name the live incarnation id: it is what lets a broker register.
                error_message=f"broker {request.broker_id} is registered by a live incarnation",
            ),
        )
    if existing is not None and not existing.fenced:
        left = remove_broker_from_partitions(
            image, request.broker_id, elr_enabled=elr_enabled, limit=PARTITION_CHANGES_PER_BATCH
        )
        if len(left) >= PARTITION_CHANGES_PER_BATCH:
            # Its previous incarnation still leads or is in sync for many partitions (its
            # fencing is under way, one bounded batch per tick): removing them all in this
            # registration's batch is the unbounded batch that pacing avoids. The broker
            # retries (as after any refused registration) and registers once the ticks are
            # done. NB: the same code as a live session's: the old incarnation still counts.
            return ControllerResult(
                records=(),
                response=RegisterBrokerResponse(
                    error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                    error_message=(
                        f"broker {request.broker_id}'s previous incarnation is still being "
                        "fenced; retry"
                    ),
                ),
            )
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=next_offset,
            listeners=request.listeners,
            rack=request.rack,
            fenced=True,
            features=request.features,
        )
    ]
    # KIP-966: clean if it names the epoch it had, or if it is the same process retrying (its
    # logs never stopped; Kafka handles a shutdown only for a new incarnation).
    clean = existing is not None and (
        request.previous_broker_epoch == existing.broker_epoch
        or request.incarnation_id == existing.incarnation_id
    )
    if existing is not None or (elr_enabled and not clean):
        # The old incarnation is gone: it leaves every ISR and leadership (KIP-841), and every
        # ELR unless it shut down cleanly (KIP-966).
        records.extend(
            remove_broker_from_partitions(
                image, request.broker_id, elr_enabled=elr_enabled, unclean_shutdown=not clean
            )
        )
    heartbeats.touch(request.broker_id, now_ms, metadata_offset=-1)
    return ControllerResult(
        records=tuple(records), response=RegisterBrokerResponse(broker_epoch=next_offset)
    )


def handle_broker_heartbeat(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    *,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
    elr_enabled: bool = False,
) -> ControllerResult[BrokerHeartbeatResponse]:
    """Keep the session alive and move the broker through its states (see module docstring)."""
    registration = image.broker(request.broker_id)
    if registration is None:
        return _heartbeat_error(ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {request.broker_id}")
    if registration.broker_epoch != request.broker_epoch:
        return _heartbeat_error(
            ErrorCode.STALE_BROKER_EPOCH,
            f"epoch {request.broker_epoch}, registered epoch is {registration.broker_epoch}",
        )
    heartbeats.touch(request.broker_id, now_ms, request.current_metadata_offset)
    # Offline replicas first: the state changes below then see their leader moves.
    offline_records = offline_replica_changes(
        image, request.broker_id, request.offline_replicas, elr_enabled=elr_enabled
    )
    if offline_records:
        image = image.apply_batch(offline_records, image.last_offset + 1)
    broker_id = request.broker_id
    caught_up = request.current_metadata_offset >= registration.broker_epoch
    records: list[MetadataRecord] = []
    fenced, should_shut_down = registration.fenced, False
    match registration.state:
        case BrokerState.FENCED:
            if request.want_shutdown:
                should_shut_down = True  # a fenced broker leads nothing: it may go right away
            elif not request.want_fence and caught_up:
                change = BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=registration.broker_epoch, fenced=False
                )
                unfenced = image.apply(change, image.last_offset + 1)
                # The rest, if any, in the ticks that follow (this change asks for one).
                elected = elect_offline_leaders(
                    unfenced, elr_enabled=elr_enabled, limit=PARTITION_CHANGES_PER_BATCH
                )
                records = [change, *elected]
                fenced = False
        case BrokerState.UNFENCED:
            if request.want_fence:
                records, fenced = _fence_records(image, broker_id, elr_enabled=elr_enabled), True
            elif request.want_shutdown:
                step = controlled_shutdown_step(image, broker_id, elr_enabled=elr_enabled)
                if len(step) < PARTITION_CHANGES_PER_BATCH and not _leads_anything(
                    image, broker_id
                ):
                    records = [_fence_record(image, broker_id), *step]
                    fenced, should_shut_down = True, True
                else:
                    registration_change = BrokerRegistrationChangeRecord(
                        broker_id=broker_id,
                        broker_epoch=registration.broker_epoch,
                        in_controlled_shutdown=True,
                    )
                    records = [registration_change, *step]
        case BrokerState.CONTROLLED_SHUTDOWN:
            # NB: a broker cannot leave controlled shutdown; want_shutdown=False is ignored.
            # Its leaderships and ISR memberships leave in bounded steps (this heartbeat's,
            # and the ticks' between heartbeats); it is fenced once none is left.
            step = controlled_shutdown_step(image, broker_id, elr_enabled=elr_enabled)
            if step:
                records = list(step)
            else:
                records = _fence_records(image, broker_id, elr_enabled=elr_enabled)
                fenced, should_shut_down = True, True
    if should_shut_down:
        # Its session ends here: a new incarnation may register without waiting for a timeout.
        heartbeats.remove(broker_id)
    return ControllerResult(
        records=(*offline_records, *records),
        response=BrokerHeartbeatResponse(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=should_shut_down
        ),
    )


def _heartbeat_error(code: ErrorCode, message: str) -> ControllerResult[BrokerHeartbeatResponse]:
    return ControllerResult(
        records=(), response=BrokerHeartbeatResponse(error_code=code, error_message=message)
    )


def _fence_record(image: MetadataImage, broker_id: int) -> BrokerRegistrationChangeRecord:
    registration = image.brokers[broker_id]
    return BrokerRegistrationChangeRecord(
        broker_id=broker_id,
        broker_epoch=registration.broker_epoch,
        fenced=True,
        in_controlled_shutdown=False if registration.in_controlled_shutdown else None,
    )


def controlled_shutdown_step(
    image: MetadataImage,
    broker_id: int,
    *,
    elr_enabled: bool = False,
    max_records: int = PARTITION_CHANGES_PER_BATCH,
) -> list[PartitionChangeRecord]:
    """One bounded step of a controlled shutdown (KIP-631): at most ``max_records`` of the
    broker's leaderships (first) and ISR memberships move (empty: none left). Before, the
    first heartbeat asking to shut down moved them all in one batch (~10,000 records for a
    broker of a 10,000-partition RF-3 cluster: the unbounded batch that paced fencing
    avoids). Between the steps the broker is in CONTROLLED_SHUTDOWN: no election picks it and
    no AlterPartition adds it back, though it stays in the ISRs not yet visited."""
    return remove_broker_from_partitions(
        image, broker_id, elr_enabled=elr_enabled, limit=max_records
    )


def controlled_shutdown_tick(
    image: MetadataImage, *, elr_enabled: bool = False
) -> tuple[list[PartitionChangeRecord], bool]:
    """A tick's share of the controlled shutdowns under way: one step of the first broker in
    CONTROLLED_SHUTDOWN that has one left (the rest waits for the next tick or its
    heartbeat); returns (records, whether a full step was taken, so more may be left)."""
    for broker_id in sorted(image.brokers):
        if image.brokers[broker_id].state is not BrokerState.CONTROLLED_SHUTDOWN:
            continue
        step = controlled_shutdown_step(image, broker_id, elr_enabled=elr_enabled)
        if step:
            return step, len(step) >= PARTITION_CHANGES_PER_BATCH
    return [], False


def _leads_anything(image: MetadataImage, broker_id: int) -> bool:
    """Whether ``broker_id`` leads a partition the controller must move before it stops. A
    quorum partition's leader is not one: it resigns to its Raft group as it stops its replicas
    (EndQuorumEpoch, KIP-595), and the group elects the next one at once."""
    topics = image.topics_by_id
    return any(
        not is_quorum_topic(image, topics[topic_id].name)
        for topic_id, _ in image.partition_index.led_by(broker_id)
    )


def fence_one_expired_broker(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
    *,
    max_records: int = PARTITION_CHANGES_PER_BATCH,
    elr_enabled: bool = False,
) -> tuple[list[MetadataRecord], int | None]:
    """One step of fencing the first unfenced broker whose session expired (Kafka's
    ``maybeFenceOneStaleBroker``, one broker per step); returns (records, the broker id if
    this step fenced it, else None).

    A step holds at most ``max_records`` partition changes, the broker's leaderships first;
    the step that finds fewer left holds the fence record too (one atomic batch, KIP-841, as
    before when a broker leads few partitions). Until then the broker is not fenced and the caller
    steps again: a broker leading thousands of partitions is fenced over several batches,
    each a fraction of a second to decide, encode and replicate, instead of one batch of
    ~10,000 records that held the controller's event loop for seconds and cost the quorum its
    leader (which dropped the batch, and the next controller fenced again: a loop). Every
    intermediate state is valid: the broker is merely out of some ISRs and leaderships.
    """
    for broker_id in image.unfenced_broker_ids():
        if not heartbeats.session_expired(broker_id, now_ms):
            continue
        records: list[MetadataRecord] = list(
            remove_broker_from_partitions(
                image, broker_id, elr_enabled=elr_enabled, limit=max_records
            )
        )
        if len(records) >= max_records:
            return records, None
        return [_fence_record(image, broker_id), *records], broker_id
    return [], None


def handle_unregister_broker(
    image: MetadataImage,
    request: UnregisterBrokerRequest,
    *,
    heartbeats: BrokerHeartbeatManager,
    elr_enabled: bool = False,
) -> ControllerResult[UnregisterBrokerResponse]:
    """Remove a broker (KIP-500 UnregisterBroker); it first leaves every ISR and leadership
    (and every ELR: a removed broker is no candidate)."""
    registration = image.broker(request.broker_id)
    if registration is None:
        return ControllerResult(
            records=(),
            response=UnregisterBrokerResponse(
                error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"broker {request.broker_id} is not registered",
            ),
        )
    records: list[MetadataRecord] = list(
        remove_broker_from_partitions(
            image, request.broker_id, elr_enabled=elr_enabled, unclean_shutdown=True
        )
    )
    records.append(
        UnregisterBrokerRecord(broker_id=request.broker_id, broker_epoch=registration.broker_epoch)
    )
    heartbeats.remove(request.broker_id)
    return ControllerResult(records=tuple(records), response=UnregisterBrokerResponse())


def handle_allocate_producer_ids(
    image: MetadataImage, request: AllocateProducerIdsRequest
) -> ControllerResult[AllocateProducerIdsResponse]:
    """Hand the broker the next block of `PRODUCER_ID_BLOCK_SIZE` producer ids (KIP-730)."""
    registration = image.broker(request.broker_id)
    if registration is None or registration.broker_epoch != request.broker_epoch:
        return ControllerResult(
            records=(),
            response=AllocateProducerIdsResponse(
                error_code=ErrorCode.STALE_BROKER_EPOCH,
                error_message=f"broker {request.broker_id} epoch {request.broker_epoch} is stale",
            ),
        )
    start = image.next_producer_id
    record = ProducerIdsRecord(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
    )
    return ControllerResult(
        records=(record,),
        response=AllocateProducerIdsResponse(
            producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE
        ),
    )


__all__ = [
    "PARTITION_CHANGES_PER_BATCH",
    "PRODUCER_ID_BLOCK_SIZE",
    "BrokerHeartbeatManager",
    "controlled_shutdown_step",
    "controlled_shutdown_tick",
    "fence_one_expired_broker",
    "handle_allocate_producer_ids",
    "handle_broker_heartbeat",
    "handle_register_broker",
    "handle_unregister_broker",
    "registration_problem",
]
