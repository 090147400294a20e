"""`fuzz_cluster`: hostile requests to every RPC of running processes, and what they did.

Every method of the Broker, Controller and Raft services (read from the generated
descriptors, so a new RPC is fuzzed without a change here) gets ``calls_per_rpc`` payloads
from `PayloadFuzzer`, sent as raw bytes to one of the nodes that serve it; the Raft stream
is opened, fed envelopes, and abandoned. Each call must end within ``timeout_s`` with an
answer or a gRPC status. Counted as violations:

- **handler errors**: status UNKNOWN, which is what grpc answers when a servicer raised (bad
  input must get a typed error code, never an exception);
- **hangs**: no answer within the timeout (DEADLINE_EXCEEDED); a Raft stream still open at
  the deadline is replayed alone after the run, and is a hang if it stays open then (else it
  counts as ``DEADLINE_EXCEEDED_UNDER_LOAD``, not a violation);
- **crashes**: a node process that died during the run;
- **unhealthy**: a node not SERVING afterwards (`kraft.cluster.health`);
- **data changed**: records acknowledged before the fuzzing (``acks=all``) that do not read
  back unchanged afterwards.

Every payload is drawn from ``random.Random(f"{seed}:{method}:{call}")``, so one call
replays alone (`replay_payload`).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.descriptor import MethodDescriptor

from kraft._generated import broker_pb2, controller_pb2, raft_pb2
from kraft.cluster.local import LocalCluster
from kraft.cluster.process import ManagedProcess
from kraft.transport.channels import client_channel
from kraft.types import TopicPartition
from replication.clients.consumer import Consumer
from replication.clients.producer import Producer
from replication.nemesis.fuzz_messages import PayloadFuzzer

DATA_TOPIC: Final = "fuzz-data"
DATA_RECORDS: Final = 1_000
VIOLATION_CODES: Final = {
    grpc.StatusCode.UNKNOWN: "handler_error",
    grpc.StatusCode.DEADLINE_EXCEEDED: "hang",
}
EXAMPLES: Final = 5
J = TypeVar("J")
R = TypeVar("R")
DEFAULT_CONCURRENCY: Final = 64
"""Calls in flight at once (measured: see docs/guarantees.md, ``kraft fuzz``)."""
DEADLINE_UNDER_LOAD: Final = "DEADLINE_EXCEEDED_UNDER_LOAD"
"""A stream still open at the deadline among ``concurrency`` calls that ended within the
timeout when replayed alone, after the run: counted, not a violation (one that stays open
alone is a hang)."""
CHECK_EVERY: Final = 200
"""Answered calls between two checks that every node process still runs."""


@dataclass(slots=True)
class RpcOutcome:
    """What the calls of one method got back, by gRPC status (``OK``: an answer)."""

    calls: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    max_seconds: float = 0.0
    """The slowest answer (a call must end within the timeout)."""

    @property
    def violations(self) -> int:
        return sum(self.statuses[code.name] for code in VIOLATION_CODES)


@dataclass(slots=True, kw_only=True)
class FuzzReport:
    seed: int
    concurrency: int
    per_rpc: dict[str, RpcOutcome]
    crashed: list[str]
    crash_suspects: list[str]
    unhealthy: list[str]
    data_intact: bool
    data_problem: str
    seconds: float

    @property
    def calls(self) -> int:
        return sum(o.calls for o in self.per_rpc.values())

    @property
    def valid(self) -> bool:
        return (
            not any(o.violations for o in self.per_rpc.values())
            and not self.crashed
            and not self.unhealthy
            and self.data_intact
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "seed": self.seed,
            "calls": self.calls,
            "seconds": round(self.seconds, 1),
            "calls_per_second": round(self.calls / self.seconds, 1) if self.seconds else 0.0,
            "concurrency": self.concurrency,
            "crashed": self.crashed,
            "crash_suspects": self.crash_suspects,
            "unhealthy": self.unhealthy,
            "data_intact": self.data_intact,
            "data_problem": self.data_problem,
            "per_rpc": {
                name: {
                    "calls": o.calls,
                    "statuses": dict(o.statuses),
                    "violations": o.violations,
                    "max_ms": round(o.max_seconds * 1000),
                    "examples": o.examples,
                }
                for name, o in sorted(self.per_rpc.items())
            },
        }


def rpc_methods() -> Iterator[MethodDescriptor]:
    """Every method of every kraft service."""
    for module in (broker_pb2, controller_pb2, raft_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            yield from service.methods


def replay_payload(seed: int, method: MethodDescriptor, call: int) -> tuple[str, bytes]:
    """The payload of call number ``call`` to ``method`` in the run of ``seed``."""
    rng = random.Random(f"{seed}:{method.full_name}:{call}")
    return PayloadFuzzer(rng).payload(method.input_type)


def _identity(data: bytes) -> bytes:
    return data


class _Caller:
    """Raw-bytes calls to any method of any node, one channel per node."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = client_channel(address)
            return channel

    def unary(self, address: str, path: str, payload: bytes, timeout_s: float) -> str:
        call = self.channel(address).unary_unary(
            path, request_serializer=_identity, response_deserializer=_identity
        )
        try:
            call(payload, timeout=timeout_s)
            return "OK"
        except grpc.RpcError as e:
            return str(e.code().name)

    def stream(self, address: str, path: str, payloads: Sequence[bytes], timeout_s: float) -> str:
        """Open the stream, send ``payloads``, read for a moment, abandon it."""
        call = self.channel(address).stream_stream(
            path, request_serializer=_identity, response_deserializer=_identity
        )
        responses = call(iter(payloads), timeout=timeout_s)
        try:
            deadline = time.monotonic() + 0.5
            for _ in responses:
                if time.monotonic() > deadline:
                    break
            return "OK"
        except grpc.RpcError as e:
            # Our requests end (half-close) after the payloads, and the server then ends the
            # stream (`GrpcRaftTransport.handle_stream`): a stream open at the deadline hung.
            return str(e.code().name)
        finally:
            responses.cancel()

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()


@dataclass(frozen=True, slots=True)
class _Rpc:
    """One method to fuzz: its report name, path, descriptor and the nodes that serve it."""

    name: str
    path: str
    method: MethodDescriptor
    targets: list[str]

    @property
    def streaming(self) -> bool:
        return bool(self.method.client_streaming or self.method.server_streaming)


def _targets(cluster: LocalCluster, method: MethodDescriptor) -> list[str]:
    service = method.containing_service.name
    if service == "Broker":
        return list(cluster.broker_addresses.values())
    if service == "Controller":
        return list(cluster.controller_addresses.values())
    return [*cluster.controller_addresses.values(), *cluster.broker_addresses.values()]


def _selected(cluster: LocalCluster, methods: Sequence[str] | None) -> list[_Rpc]:
    rpcs = []
    for method in rpc_methods():
        name = f"{method.containing_service.name}.{method.name}"
        if methods and name not in methods and method.name not in methods:
            continue
        path = f"/{method.containing_service.full_name}/{method.name}"
        rpcs.append(_Rpc(name, path, method, _targets(cluster, method)))
    return rpcs


def _nodes(cluster: LocalCluster) -> list[tuple[str, ManagedProcess]]:
    return [
        *((f"controller-{i}", cluster.controller(i)) for i in cluster.controller_ids),
        *((f"broker-{b}", cluster.broker(b)) for b in cluster.broker_ids),
    ]


def _seed_data(cluster: LocalCluster) -> dict[tuple[int, int], bytes]:
    """Acknowledged records written before the fuzzing: (partition, offset) -> value."""
    cluster.create_topic(DATA_TOPIC, 3, 3, config={"min.insync.replicas": "2"})
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [
            (value, producer.send(DATA_TOPIC, value, partition=i % 3))
            for i in range(DATA_RECORDS)
            for value in [f"fuzz-{i}".encode()]
        ]
        producer.flush(timeout=60)
        acked: dict[tuple[int, int], bytes] = {}
        for value, future in futures:
            metadata = future.result(timeout=60)
            acked[(metadata.partition, metadata.offset)] = value
    return acked


def _check_data(cluster: LocalCluster, acked: dict[tuple[int, int], bytes]) -> str:
    """'' if every acknowledged record reads back unchanged, else the first difference."""
    tps = [TopicPartition(DATA_TOPIC, p) for p in range(3)]
    found: dict[tuple[int, int], bytes | None] = {}
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        deadline = time.monotonic() + 60
        while len(found) < len(acked) and time.monotonic() < deadline:
            for r in consumer.poll(timeout=1.0):
                found[(r.partition, r.offset)] = r.value
    for key, value in sorted(acked.items()):
        if found.get(key) != value:
            return f"{DATA_TOPIC}-{key[0]}@{key[1]}: expected {value!r}, read {found.get(key)!r}"
    return ""


def drive_calls(
    jobs: Iterable[J],
    call: Callable[[J], R],
    record: Callable[[J, R], None],
    *,
    label: Callable[[J], str],
    dead: Callable[[], list[str]],
    concurrency: int,
    check_every: int,
) -> tuple[list[str], list[str]]:
    """Run ``call`` on every job, ``concurrency`` at once, and ``record`` each result in job
    order. Every ``check_every`` recorded calls, ``dead()`` names the nodes that died: the
    first non-empty answer stops the run, and returns it with the labels of the calls that
    may have killed them (recorded since the previous check, or in flight)."""
    since_check: list[str] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        in_flight: deque[tuple[J, Future[R]]] = deque()
        try:
            for job in jobs:
                in_flight.append((job, pool.submit(call, job)))
                if len(in_flight) < 2 * concurrency:
                    continue
                done, future = in_flight.popleft()
                record(done, future.result())
                since_check.append(label(done))
                if len(since_check) >= check_every:
                    if died := dead():
                        return died, since_check + [label(j) for j, _ in in_flight]
                    since_check = []
        finally:
            for done, future in in_flight:
                record(done, future.result())
    died = dead()
    return died, (since_check if died else [])


def fuzz_cluster(
    cluster: LocalCluster,
    *,
    calls_per_rpc: int,
    seed: int = 0,
    timeout_s: float = 10.0,
    concurrency: int = DEFAULT_CONCURRENCY,
    check_every: int = CHECK_EVERY,
    oversized: bool = False,
    methods: Sequence[str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> FuzzReport:
    """Fuzz every RPC of a healthy ``cluster`` (see the module docstring).

    ``concurrency`` calls are in flight at once, across method boundaries. Every
    ``check_every`` answered calls the node processes must still run; the first that died
    stops the run, and the calls answered since the previous check and those in flight are
    reported as ``crash_suspects`` (each replays alone with `replay_payload`)."""
    started = time.monotonic()
    acked = _seed_data(cluster)
    rpcs = _selected(cluster, methods)
    per_rpc = {rpc.name: RpcOutcome() for rpc in rpcs}
    nodes = _nodes(cluster)
    caller = _Caller()
    violation_names = {code.name for code in VIOLATION_CODES}

    def one(rpc: _Rpc, call: int) -> tuple[str, str, float]:
        rng = random.Random(f"{seed}:{rpc.method.full_name}:{call}")
        fuzzer = PayloadFuzzer(rng)
        target = rng.choice(rpc.targets)
        if rpc.streaming:
            payloads = [fuzzer.payload(rpc.method.input_type)[1] for _ in range(3)]
            sent = time.monotonic()
            status = caller.stream(target, rpc.path, payloads, timeout_s)
            return status, "stream", time.monotonic() - sent
        kind, payload = fuzzer.payload(rpc.method.input_type)
        sent = time.monotonic()
        status = caller.unary(target, rpc.path, payload, timeout_s)
        return status, kind, time.monotonic() - sent

    streams_at_deadline: list[tuple[_Rpc, int]] = []
    replaying = False

    def record(rpc: _Rpc, call: int, result: tuple[str, str, float]) -> None:
        status, kind, seconds = result
        outcome = per_rpc[rpc.name]
        if rpc.streaming and status == "DEADLINE_EXCEEDED" and not replaying:
            streams_at_deadline.append((rpc, call))  # replayed alone below
            return
        outcome.calls += 1
        outcome.statuses[status] += 1
        outcome.max_seconds = max(outcome.max_seconds, seconds)
        if status in violation_names and len(outcome.examples) < EXAMPLES:
            outcome.examples.append(f"call {call} ({kind}): {status}")
        if call == calls_per_rpc - 1:
            progress(f"{rpc.name:<36} {outcome.calls:>7,} calls  {dict(outcome.statuses)}")

    try:
        crashed, suspects = drive_calls(
            [(r, c) for r in rpcs for c in range(calls_per_rpc)],
            lambda job: one(*job),
            lambda job, result: record(*job, result),
            label=lambda job: f"{job[0].name}#{job[1]}",
            dead=lambda: [name for name, process in nodes if not process.is_running()],
            concurrency=concurrency,
            check_every=check_every,
        )
        replaying = True
        for rpc, call in [] if crashed else streams_at_deadline:
            status, kind, seconds = one(rpc, call)
            if status == "DEADLINE_EXCEEDED":
                record(rpc, call, (status, kind, seconds))  # open at the deadline alone too
            else:
                record(rpc, call, (DEADLINE_UNDER_LOAD, kind, seconds))
        if oversized and not crashed:
            for rpc in rpcs:
                if rpc.streaming:
                    continue
                _, payload = PayloadFuzzer(random.Random(seed)).payload(
                    rpc.method.input_type, "oversized"
                )
                status = caller.unary(rpc.targets[0], rpc.path, payload, timeout_s * 3)
                per_rpc[rpc.name].calls += 1
                per_rpc[rpc.name].statuses[status] += 1
                if died := [name for name, process in nodes if not process.is_running()]:
                    crashed, suspects = died, [f"{rpc.name}#oversized"]
                    break
    finally:
        caller.close()
    health = cluster.health(timeout=5)
    unhealthy = [str(node) for node in health.problems] if not health.healthy else []
    problem = _check_data(cluster, acked)
    return FuzzReport(
        seed=seed,
        concurrency=concurrency,
        per_rpc=per_rpc,
        crashed=crashed,
        crash_suspects=suspects,
        unhealthy=unhealthy,
        data_intact=not problem,
        data_problem=problem,
        seconds=time.monotonic() - started,
    )


__all__ = [
    "DATA_TOPIC",
    "FuzzReport",
    "RpcOutcome",
    "drive_calls",
    "fuzz_cluster",
    "replay_payload",
    "rpc_methods",
]
