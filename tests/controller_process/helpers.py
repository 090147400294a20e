"""Helpers for process-level controller tests: fake brokers and a background topic writer."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Sequence

from kraft.controller.client import ControllerClient
from storage.errors import (
    BrokerIdNotRegisteredError,
    KraftError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
)

CAUGHT_UP = 2**62
"""A metadata offset past any real one: the fake brokers always claim to be caught up."""


class FakeBrokers:
    """Brokers that only register and heartbeat (KIP-631), so topics have replicas to use.

    A thread heartbeats every ``interval`` seconds; a broker whose registration is gone
    registers again. Errors (no active controller) are ignored: the next beat retries.
    """

    def __init__(self, bootstrap: str, broker_ids: Sequence[int], interval: float = 0.3) -> None:
        self._client = ControllerClient(bootstrap, timeout=1.0, request_timeout=1.0)
        self._ids = list(broker_ids)
        self._epochs: dict[int, int] = {}
        # One incarnation per broker: re-registering after a lost response is idempotent.
        self._incarnations = {b: uuid.uuid4().hex for b in self._ids}
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-brokers", daemon=True)

    def __enter__(self) -> FakeBrokers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for broker_id in self._ids:
                with contextlib.suppress(KraftError):  # no active controller: beat again later
                    self._beat(broker_id)
            self._stop.wait(self._interval)

    def _beat(self, broker_id: int) -> None:
        epoch = self._epochs.get(broker_id)
        if epoch is None:
            epoch = self._epochs[broker_id] = self._client.register_broker(
                broker_id, incarnation_id=self._incarnations[broker_id]
            )
        try:
            self._client.heartbeat(broker_id, epoch, current_metadata_offset=CAUGHT_UP)
        except (StaleBrokerEpochError, BrokerIdNotRegisteredError):
            del self._epochs[broker_id]


class TopicWriter:
    """Creates topics ``<prefix>-0``, ``<prefix>-1``, ... on a thread until stopped, and
    records which creations were acknowledged (only those must survive any failure)."""

    def __init__(self, client: ControllerClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self.acknowledged: list[str] = []
        self.unknown: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topic-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def count(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"{self._prefix}-{i}"
            i += 1
            try:
                self._client.create_topic(name, timeout=10)
            except TopicAlreadyExistsError:
                pass  # an earlier attempt of this call committed it (a retried write)
            except KraftError:
                with self._lock:
                    self.unknown.append(name)
                continue
            with self._lock:
                self.acknowledged.append(name)
