"""`BrokerLifecycle`: the broker's registration, heartbeats, fencing and controlled shutdown
(KIP-631; Kafka's ``BrokerLifecycleManager``).

Register with the active controller (an incarnation id drawn once per process, every listener,
the rack, and the epoch of the last clean shutdown, KIP-966), then heartbeat every
``broker.heartbeat.interval.ms`` with the image's last offset and the offline replicas; the
controller unfences the broker once that offset reaches its registration. A heartbeat answered
STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED registers again, and a new broker epoch
restarts every replica. SIGTERM is a controlled shutdown: heartbeat ``want_shutdown`` until the
controller answers ``should_shut_down`` (it moved leadership away).

The blocking `ControllerClient` calls run on a thread of their own, so forwarded admin requests
(on other threads) can never starve the heartbeats into a fencing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kraft.controller.client import ControllerClient
from kraft.metadata import MetadataImage
from kraft.metadata.records import Endpoint
from replication.broker.lifecycle.clean_shutdown import (
    take_previous_broker_epoch,
    write_clean_shutdown,
)
from storage.errors import BrokerIdNotRegisteredError, KraftError, StaleBrokerEpochError

T = TypeVar("T")

CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
REGISTRATION_RETRY_S = 0.2


class LifecycleReplicas(Protocol):
    """What the lifecycle needs of the replicas (`ReplicaManager`)."""

    @property
    def offline(self) -> Any:
        """The offline replicas (`OfflineReplicas`), whose ``report()`` every heartbeat carries."""
        ...

    def restart(self) -> None:
        """A new broker epoch: every replica is reopened with it."""
        ...

    def metadata_changed(self) -> None: ...


class BrokerLifecycle:
    """One broker's registration and heartbeats (see the module docstring).

    Args:
        node_id / heartbeat_interval_ms / rack / data_dir: the broker's keys (``data_dir``
            holds the clean-shutdown record, KIP-966).
        client: the channel to the active controller.
        image: the broker's metadata image (its last offset goes in every heartbeat).
        listeners: the endpoints to register (read when registering: ports bound by then).
        replicas: the replicas (offline report, restart on a new epoch).
        refresh_controllers: re-point ``client`` at the voters the observer knows (KIP-853).
        heartbeat_now: set to heartbeat at once (an offline replica to report).
        log: the broker's logger.
    """

    def __init__(
        self,
        *,
        node_id: int,
        heartbeat_interval_ms: int,
        rack: str | None,
        data_dir: Path,
        client: ControllerClient,
        image: Callable[[], MetadataImage],
        listeners: Callable[[], Sequence[Endpoint]],
        replicas: LifecycleReplicas,
        refresh_controllers: Callable[[], object],
        heartbeat_now: asyncio.Event,
        log: Any,
    ) -> None:
        self.node_id = node_id
        self._interval_s = heartbeat_interval_ms / 1000
        self._rack = rack
        self._data_dir = data_dir
        self.client = client
        self._image = image
        self._listeners = listeners
        self._replicas = replicas
        self._refresh = refresh_controllers
        self.heartbeat_now = heartbeat_now
        self._log = log
        self.broker_epoch: int | None = None
        self.fenced = True
        self.stopping = False
        """Set by a controlled shutdown or a stop: heartbeats ask ``want_shutdown``."""
        self._incarnation_id = uuid.uuid4().hex
        self._previous_broker_epoch: int | None = None
        """KIP-966: the epoch of the last clean shutdown
        (`replication.broker.lifecycle.clean_shutdown`)."""
        self._shutdown_allowed = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="broker-lifecycle")

    def load_clean_shutdown(self) -> None:
        """Read (and remove) the record of the last clean shutdown, before registering."""
        self._previous_broker_epoch = take_previous_broker_epoch(self._data_dir)

    def record_clean_shutdown(self) -> None:
        """Every log is closed: the next start registers as a clean restart (KIP-966)."""
        if self.broker_epoch is not None:
            with contextlib.suppress(OSError):
                write_clean_shutdown(self._data_dir, self.broker_epoch)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def register(self) -> None:
        """Register until the controller answers (retrying every `REGISTRATION_RETRY_S`)."""
        while True:
            self._refresh()
            try:
                epoch = await self._call(
                    self.client.register_broker,
                    self.node_id,
                    incarnation_id=self._incarnation_id,
                    listeners=tuple(self._listeners()),
                    rack=self._rack,
                    # KIP-966: this process's own epoch once it has one (its logs never
                    # stopped), else the one its last clean shutdown recorded.
                    previous_broker_epoch=(
                        self.broker_epoch
                        if self.broker_epoch is not None
                        else self._previous_broker_epoch
                    ),
                )
            except KraftError as e:
                self._log.info("registration_failed", error=e.code.name, message=e.message)
                await asyncio.sleep(REGISTRATION_RETRY_S)
                continue
            old = self.broker_epoch
            self.broker_epoch = epoch
            self._log.info("broker_registered", broker_epoch=epoch)
            if old is not None and old != epoch:
                self._replicas.restart()  # the next pass visits every partition
            self._replicas.metadata_changed()
            return

    async def run(self) -> None:
        """Register, then heartbeat until a controlled shutdown is allowed."""
        await self.register()
        interval_s = self._interval_s
        while True:
            epoch = self.broker_epoch
            assert epoch is not None
            want_shutdown = self.stopping
            self.heartbeat_now.clear()
            self._refresh()
            try:
                response = await self._call(
                    self.client.heartbeat,
                    self.node_id,
                    epoch,
                    current_metadata_offset=self._image().last_offset,
                    want_shutdown=want_shutdown,
                    offline_replicas=self._replicas.offline.report(),
                    timeout=max(2.0, 4 * interval_s),
                )
            except (StaleBrokerEpochError, BrokerIdNotRegisteredError) as e:
                self._log.warning("registration_lost", error=e.code.name)
                # NB: the same incarnation id (one per process, as Kafka's broker): the
                # controller takes it as a retry and answers a new epoch at once.
                await self.register()
                continue
            except KraftError as e:
                self._log.info("heartbeat_failed", error=e.code.name)
                await asyncio.sleep(interval_s)
                continue
            if response.is_fenced != self.fenced:
                self._log.info("broker_fencing_changed", fenced=response.is_fenced)
                self.fenced = response.is_fenced
            if want_shutdown and response.should_shut_down:
                self._shutdown_allowed.set()
                return
            # NB: a replica that went offline (or came back) is reported at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.heartbeat_now.wait(), interval_s / 5 if want_shutdown else interval_s
                )

    async def controlled_shutdown(self) -> None:
        """KIP-631: heartbeat want_shutdown until the controller says should_shut_down (or
        `CONTROLLED_SHUTDOWN_TIMEOUT_S` passed)."""
        self.stopping = True
        if self.broker_epoch is None:
            return
        self._log.info("controlled_shutdown_started")
        self.heartbeat_now.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._shutdown_allowed.wait(), CONTROLLED_SHUTDOWN_TIMEOUT_S)
        self._log.info("controlled_shutdown_done", allowed=self._shutdown_allowed.is_set())

    def close(self) -> None:
        """Stop the lifecycle's thread (its tasks are the caller's to cancel)."""
        self.stopping = True
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["CONTROLLED_SHUTDOWN_TIMEOUT_S", "BrokerLifecycle", "LifecycleReplicas"]
