"""`fuzz_kafka`: hostile input to the brokers' Kafka listeners, and what it did.

Against a running `LocalCluster`'s Kafka listeners (loopback), in four phases, each followed
by a check that every broker still serves (`check_serving`: a fresh connection gets an
ApiVersions answer, and a Produce with acks=all then a Fetch of it round-trip through each
partition leader, within ``timeout_s``) and that no node process died; the first two phases
also run `check_serving` over and over while they go on (bad input must harm no other
connection):

1. **requests**: ``calls_per_api`` structurally valid requests of every API key the brokers
   serve (read from the dispatch table, `SUPPORTED_VERSIONS`, so a new API is fuzzed without
   a change here), at random served versions, with random field values
   (`KafkaPayloadFuzzer.request`), on long-lived connections. Each must get, within the
   timeout, a response frame with its correlation id that decodes as its API and version (a
   Produce with acks=0 gets none: an ApiVersions sent after it must be answered).
   Violations: ``closed`` (the broker dropped a connection on a well-formed request: a
   handler raised), ``hang``, ``bad_response``;
2. **frames**: ``calls_per_api`` broken frames per API key (`MUTATIONS`), each on a fresh
   connection; the client half-closes after sending unless the broker must close at once
   (`CLOSE_AT_ONCE`). Each connection must end (answered or not) within the timeout.
   Violation: ``hang``;
3. **connections**: up to ``max_connections`` connections at once (bounded by the open-file
   limit), each holding half an ApiVersions frame while the brokers are checked, then
   finishing it: every one must be answered;
4. **never-reads**: a client pipelines Fetch requests for a few MiB of records on each broker
   and never reads the responses; the brokers must stop reading it (back-pressure) and go on
   serving everyone else. Its figures: requests sent before the broker stopped reading, and
   the broker's resident memory before and during.

Every call is drawn from ``random.Random(f"{seed}:kafka:{phase}:{api_key}:{call}")``.
"""

from __future__ import annotations

import contextlib
import random
import resource
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from kraft.cluster.local import LocalCluster
from kraft.cluster.process import ManagedProcess
from replication.broker.kafka.apis import HANDLERS, SUPPORTED_VERSIONS
from replication.broker.kafka.frames import DEFAULT_MAX_REQUEST_BYTES
from replication.nemesis.fuzz import CHECK_EVERY, EXAMPLES, drive_calls
from replication.nemesis.kafka_client import (
    API_VERSIONS,
    FETCH,
    METADATA,
    PROBE_TOPIC,
    PRODUCE,
    call,
    check_serving,
    connect,
    decode,
    fetch_values,
    produce_values,
    read_exact,
    read_frame,
    request,
)
from replication.nemesis.kafka_payloads import CLOSE_AT_ONCE, KafkaPayloadFuzzer
from storage.errors import UnknownTopicOrPartitionError
from storage.records import build_batch

DATA_TOPIC: Final = "fuzz-kafka-data"
TARGET_TOPIC: Final = "fuzz-kafka-target"
"""The one existing topic the fuzzed requests name (besides random names): they may write to
it, change it or delete it; the probe and data topics are never named, so the checks stand."""
VIOLATIONS: Final = frozenset({"closed", "hang", "bad_response"})
FRAME_VIOLATIONS: Final = frozenset({"hang", "refused"})
DEFAULT_MAX_CONNECTIONS: Final = 2_000
NEVER_READS_LIMIT: Final = 200_000
"""Requests the never-reading client sends at most (it stops when the broker stops reading)."""
_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class Outcome:
    """What one API's (or one mutation's) calls got, by outcome."""

    calls: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    max_seconds: float = 0.0

    def violations(self, kinds: frozenset[str]) -> int:
        return sum(self.statuses[k] for k in kinds)

    def record(self, status: str, seconds: float, example: str, kinds: frozenset[str]) -> None:
        self.calls += 1
        self.statuses[status] += 1
        self.max_seconds = max(self.max_seconds, seconds)
        if status in kinds and len(self.examples) < EXAMPLES:
            self.examples.append(example)


@dataclass(slots=True, kw_only=True)
class KafkaFuzzReport:
    seed: int
    concurrency: int
    per_api: dict[str, Outcome]
    per_mutation: dict[str, Outcome]
    abuse: dict[str, Any]
    log_lines: dict[str, int]
    """What the brokers logged during the run: ``connections_closed`` (one line per connection
    closed for bad input), ``request_failures`` (a handler raised), ``tracebacks`` (any: the
    run is invalid)."""
    serving_problems: dict[str, list[str]]
    """Phase -> what `check_serving` found wrong after it (empty lists when all served)."""
    crashed: list[str]
    crash_suspects: list[str]
    seconds: float

    @property
    def calls(self) -> int:
        return sum(o.calls for o in self.per_api.values()) + sum(
            o.calls for o in self.per_mutation.values()
        )

    @property
    def violations(self) -> int:
        return (
            sum(o.violations(VIOLATIONS) for o in self.per_api.values())
            + sum(o.violations(FRAME_VIOLATIONS) for o in self.per_mutation.values())
            + sum(int(v.get("violations", 0)) for v in self.abuse.values())
        )

    @property
    def valid(self) -> bool:
        return (
            not self.violations
            and not self.crashed
            and not any(self.serving_problems.values())
            and not self.log_lines.get("tracebacks")
        )

    def as_dict(self) -> dict[str, Any]:
        def outcomes(table: dict[str, Outcome], kinds: frozenset[str]) -> dict[str, Any]:
            return {
                name: {
                    "calls": o.calls,
                    "statuses": dict(o.statuses),
                    "violations": o.violations(kinds),
                    "max_ms": round(o.max_seconds * 1000),
                    "examples": o.examples,
                }
                for name, o in sorted(table.items())
            }

        return {
            "valid": self.valid,
            "seed": self.seed,
            "calls": self.calls,
            "seconds": round(self.seconds, 1),
            "concurrency": self.concurrency,
            "violations": self.violations,
            "crashed": self.crashed,
            "crash_suspects": self.crash_suspects,
            "serving_problems": self.serving_problems,
            "log_lines": self.log_lines,
            "per_api": outcomes(self.per_api, VIOLATIONS),
            "per_mutation": outcomes(self.per_mutation, FRAME_VIOLATIONS),
            "abuse": self.abuse,
        }


# -- phase 1: valid requests ----------------------------------------------------------------------


class _Connections:
    """One long-lived connection per thread and broker (a closed one is replaced)."""

    def __init__(self, timeout_s: float) -> None:
        self._local = threading.local()
        self._timeout_s = timeout_s
        self._all: list[socket.socket] = []
        self._lock = threading.Lock()

    def get(self, address: str) -> socket.socket:
        table: dict[str, socket.socket] = self._local.__dict__.setdefault("table", {})
        sock = table.get(address)
        if sock is None:
            sock = table[address] = connect(address, self._timeout_s)
            with self._lock:
                self._all.append(sock)
        return sock

    def drop(self, address: str) -> None:
        table: dict[str, socket.socket] = self._local.__dict__.setdefault("table", {})
        if (sock := table.pop(address, None)) is not None:
            sock.close()

    def close(self) -> None:
        with self._lock:
            for sock in self._all:
                sock.close()


def _valid_call(
    conns: _Connections,
    addresses: list[str],
    topics: list[str],
    seed: int,
    key: int,
    n: int,
    timeout_s: float,
) -> tuple[str, str, float]:
    rng = random.Random(f"{seed}:kafka:requests:{key}:{n}")
    low, high = SUPPORTED_VERSIONS[key]
    version = rng.randint(low, high)
    address = rng.choice(addresses)
    correlation = rng.randrange(2**31 - 1)
    body, data = KafkaPayloadFuzzer(rng, topics).request(key, version, correlation)
    expect_key, expect_version = key, version
    if key == PRODUCE and int(body.acks) == 0:  # no answer: the next request's proves it went by
        correlation += 1
        data += request(API_VERSIONS, 0, {}, correlation)
        expect_key, expect_version = API_VERSIONS, 0
    label = f"call {n} v{version}"
    sent = time.monotonic()
    try:
        sock = conns.get(address)
        sock.sendall(data)
        answer = read_frame(sock, sent + timeout_s)
    except TimeoutError:
        conns.drop(address)
        return "hang", label, time.monotonic() - sent
    except (OSError, ValueError) as e:
        conns.drop(address)
        return "closed", f"{label}: {e!r:.80}", time.monotonic() - sent
    seconds = time.monotonic() - sent
    if answer is None:
        conns.drop(address)
        return "closed", label, seconds
    try:
        got, _ = decode(expect_key, expect_version, answer)
    except Exception as e:  # any decoding failure is the finding
        conns.drop(address)
        return "bad_response", f"{label}: {e!r:.120}", seconds
    if got != correlation:
        conns.drop(address)
        return "bad_response", f"{label}: correlation id {got}, expected {correlation}", seconds
    return "answered", label, seconds


# -- phase 2: broken frames -----------------------------------------------------------------------


def _frame_call(
    addresses: list[str],
    topics: list[str],
    seed: int,
    key: int,
    n: int,
    max_bytes: int,
    timeout_s: float,
) -> tuple[str, str, str, float]:
    rng = random.Random(f"{seed}:kafka:frames:{key}:{n}")
    low, high = SUPPORTED_VERSIONS[key]
    fuzzer = KafkaPayloadFuzzer(rng, topics)
    _, valid = fuzzer.request(key, rng.randint(low, high), rng.randrange(2**31 - 1))
    kind, data = fuzzer.mutated(valid, SUPPORTED_VERSIONS, max_bytes)
    base = kind.rpartition("+")[2]
    sent = time.monotonic()
    deadline = sent + timeout_s
    answered = 0
    try:
        with connect(rng.choice(addresses), timeout_s) as sock:
            with contextlib.suppress(OSError):  # the broker may close before it read it all
                sock.sendall(data)
                if base not in CLOSE_AT_ONCE:
                    sock.shutdown(socket.SHUT_WR)
            while True:
                try:
                    prefix = read_exact(sock, 4, deadline)
                    if prefix is None:
                        break
                    size = _SIZE.unpack(prefix)[0]
                    if size < 0 or read_exact(sock, size, deadline) is None:
                        break
                    answered += 1
                except TimeoutError:
                    return "hang", kind, f"call {n}", time.monotonic() - sent
                except OSError:  # reset: closed with our bytes unread
                    break
    except TimeoutError:
        return "hang", kind, f"call {n}: connect", time.monotonic() - sent
    except OSError as e:
        return "refused", kind, f"call {n}: {e!r:.80}", time.monotonic() - sent
    status = "answered_then_closed" if answered else "closed"
    return status, kind, f"call {n}", time.monotonic() - sent


# -- phases 3 and 4: resource abuse ---------------------------------------------------------------


def connection_bound(wanted: int) -> int:
    """``wanted``, within this process's open-file limit (the brokers have the same one)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, min(wanted, soft - 256 if soft != resource.RLIM_INFINITY else wanted))


def _many_connections(
    cluster: LocalCluster, count: int, timeout_s: float
) -> tuple[dict[str, Any], list[str]]:
    addresses = [cluster.kafka_addresses[b] for b in cluster.broker_ids]
    hello = request(API_VERSIONS, 3, {"client_software_name": "kraft-fuzz"}, 7)
    socks: list[socket.socket] = []
    failed = 0
    started = time.monotonic()
    try:
        for i in range(count):
            try:
                sock = connect(addresses[i % len(addresses)], timeout_s)
                socks.append(sock)
                sock.sendall(hello[:6])  # half a frame: the broker holds it
            except OSError:
                failed += 1
        opened = time.monotonic() - started
        problems = check_serving(cluster, timeout_s)
        deadline = time.monotonic() + timeout_s * 2
        answered = 0
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.sendall(hello[6:])
        for sock in socks:
            with contextlib.suppress(OSError, ValueError):
                data = read_frame(sock, deadline)
                if data is not None and decode(API_VERSIONS, 3, data)[0] == 7:
                    answered += 1
    finally:
        for sock in socks:
            sock.close()
    figures = {
        "connections": len(socks),
        "connect_failed": failed,
        "answered": answered,
        "seconds_to_open": round(opened, 2),
        "violations": len(socks) - answered,
    }
    return figures, problems


def _rss_kib(process: ManagedProcess) -> int:
    with (
        contextlib.suppress(OSError, ValueError, StopIteration),
        open(f"/proc/{process.pid}/status") as status,
    ):
        line = next(line for line in status if line.startswith("VmRSS:"))
        return int(line.split()[1])
    return 0


def _never_reads(cluster: LocalCluster, timeout_s: float) -> tuple[dict[str, Any], list[str]]:
    """A client per broker pipelines requests and never reads: Fetches of 4 MiB of a partition
    the broker leads (Metadata requests if it leads none)."""
    partitions = cluster.describe_topic(DATA_TOPIC, timeout=timeout_s).partitions
    socks: list[socket.socket] = []
    figures: dict[str, Any] = {}
    try:
        for broker_id in cluster.broker_ids:
            process = cluster.broker(broker_id)
            before = _rss_kib(process)
            led = [p.partition for p in partitions if p.leader == broker_id]
            if led:
                what = f"Fetch {DATA_TOPIC}-{led[0]}"
                data = request(FETCH, 12, fetch_values(DATA_TOPIC, led[0], 0, 8 << 20), 1)
            else:
                what, data = "Metadata", request(METADATA, 12, {"topics": None}, 1)
            sock = connect(cluster.kafka_addresses[broker_id], timeout_s)
            socks.append(sock)
            sent, stopped = 0, False
            sock.settimeout(1.0)
            until = time.monotonic() + timeout_s * 2
            while sent < NEVER_READS_LIMIT and time.monotonic() < until:
                try:
                    sock.sendall(data)
                except TimeoutError:
                    stopped = True
                    break
                sent += 1
            figures[f"broker-{broker_id}"] = {
                "requests": what,
                "requests_sent": sent,
                "broker_stopped_reading": stopped,
                "rss_mib_before": round(before / 1024),
                "rss_mib_while_stuck": round(_rss_kib(process) / 1024),
                "violations": 0 if stopped else 1,
            }
        problems = check_serving(cluster, timeout_s)
    finally:
        for sock in socks:
            sock.close()
    violations = sum(f["violations"] for f in figures.values())
    return {"per_broker": figures, "violations": violations}, problems


def _create(cluster: LocalCluster, name: str, timeout_s: float) -> bool:
    """Create ``name`` with a partition per broker; False if it existed (an earlier run)."""
    try:
        cluster.describe_topic(name, timeout=1.0)
        return False
    except UnknownTopicOrPartitionError:
        brokers = len(cluster.broker_ids)
        cluster.create_topic(name, brokers, min(3, brokers))
        return True


def _seed_data(cluster: LocalCluster, timeout_s: float) -> None:
    """`PROBE_TOPIC`, `TARGET_TOPIC`, and `DATA_TOPIC` with 4 MiB per partition (a partition
    per broker each)."""
    _create(cluster, PROBE_TOPIC, timeout_s)
    _create(cluster, TARGET_TOPIC, timeout_s)
    if not _create(cluster, DATA_TOPIC, timeout_s):
        return
    rng = random.Random(0)
    for p in cluster.describe_topic(DATA_TOPIC, timeout=timeout_s).partitions:
        with connect(cluster.kafka_addresses[p.leader], timeout_s) as sock:
            for _ in range(64):
                batch = build_batch([rng.randbytes(64 * 1024)], timestamp_ms=0)
                values = produce_values(DATA_TOPIC, p.partition, b"", timeout_s)
                values["acks"] = 1
                values["topic_data"][0]["partition_data"][0]["records"] = batch
                call(sock, PRODUCE, 9, values)


def _log_offsets(cluster: LocalCluster) -> dict[int, int]:
    return {
        b: cluster.broker_log(b).stat().st_size if cluster.broker_log(b).exists() else 0
        for b in cluster.broker_ids
    }


def _log_lines(cluster: LocalCluster, offsets: dict[int, int]) -> dict[str, int]:
    """Counts of the listener's log lines written since ``offsets``."""
    counts = {"connections_closed": 0, "request_failures": 0, "tracebacks": 0}
    for broker_id, offset in offsets.items():
        with contextlib.suppress(OSError), cluster.broker_log(broker_id).open("rb") as log:
            log.seek(offset)
            for line in log:
                counts["connections_closed"] += b"kafka_connection_closed" in line
                counts["request_failures"] += b"kafka_request_failed" in line
                counts["tracebacks"] += b"Traceback" in line
    return counts


@contextlib.contextmanager
def _serving_meanwhile(cluster: LocalCluster, timeout_s: float) -> Iterator[list[str]]:
    """`check_serving` over and over on fresh connections while the body runs (bad input on
    other connections must not harm them); the list fills with what went wrong."""
    problems: list[str] = []
    stop = threading.Event()

    def check() -> None:
        while not stop.is_set():
            problems.extend(check_serving(cluster, timeout_s))
            stop.wait(0.5)

    checker = threading.Thread(target=check, name="kafka-fuzz-serving", daemon=True)
    checker.start()
    try:
        yield problems
    finally:
        stop.set()
        checker.join(timeout_s * 4)


# -- the run --------------------------------------------------------------------------------------


def fuzz_kafka(
    cluster: LocalCluster,
    *,
    calls_per_api: int,
    seed: int = 0,
    timeout_s: float = 10.0,
    concurrency: int = 16,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    api_keys: list[int] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> KafkaFuzzReport:
    """Fuzz the Kafka listeners of a healthy ``cluster`` (see the module docstring)."""
    started = time.monotonic()
    _seed_data(cluster, timeout_s)
    offsets = _log_offsets(cluster)
    nodes = [
        *((f"controller-{i}", cluster.controller(i)) for i in cluster.controller_ids),
        *((f"broker-{b}", cluster.broker(b)) for b in cluster.broker_ids),
    ]
    addresses = [cluster.kafka_addresses[b] for b in cluster.broker_ids]
    topics = [TARGET_TOPIC]
    keys = sorted(k for k in SUPPORTED_VERSIONS if api_keys is None or k in api_keys)
    names = {k: f"{HANDLERS[k].name}({k})" for k in keys}
    per_api = {names[k]: Outcome() for k in keys}
    per_mutation: dict[str, Outcome] = {}
    serving: dict[str, list[str]] = {}
    abuse: dict[str, Any] = {}
    crashed: list[str] = []
    suspects: list[str] = []
    conns = _Connections(timeout_s)

    def dead() -> list[str]:
        return [name for name, process in nodes if not process.is_running()]

    def jobs() -> Iterator[tuple[int, int]]:
        return ((k, n) for k in keys for n in range(calls_per_api))

    def record_valid(job: tuple[int, int], result: tuple[str, str, float]) -> None:
        status, example, seconds = result
        outcome = per_api[names[job[0]]]
        outcome.record(status, seconds, example, VIOLATIONS)
        if job[1] == calls_per_api - 1:
            progress(f"{names[job[0]]:<28} {outcome.calls:>7,} requests {dict(outcome.statuses)}")

    def record_frame(job: tuple[int, int], result: tuple[str, str, str, float]) -> None:
        status, kind, example, seconds = result
        per_mutation.setdefault(kind.partition("+")[0], Outcome()).record(
            status, seconds, f"{names[job[0]]} {example} ({kind})", FRAME_VIOLATIONS
        )

    phases: list[tuple[str, Callable[[], None]]] = []

    def requests_phase() -> None:
        nonlocal crashed, suspects
        try:
            crashed, suspects = drive_calls(
                jobs(),
                lambda job: _valid_call(conns, addresses, topics, seed, *job, timeout_s),
                record_valid,
                label=lambda job: f"requests:{names[job[0]]}#{job[1]}",
                dead=dead,
                concurrency=concurrency,
                check_every=CHECK_EVERY,
            )
        finally:
            conns.close()

    def frames_phase() -> None:
        nonlocal crashed, suspects
        crashed, suspects = drive_calls(
            jobs(),
            lambda job: _frame_call(addresses, topics, seed, *job, max_request_bytes, timeout_s),
            record_frame,
            label=lambda job: f"frames:{names[job[0]]}#{job[1]}",
            dead=dead,
            concurrency=concurrency,
            check_every=CHECK_EVERY,
        )
        for kind, outcome in sorted(per_mutation.items()):
            progress(f"{kind:<28} {outcome.calls:>7,} frames   {dict(outcome.statuses)}")

    def connections_phase() -> None:
        figures, problems = _many_connections(cluster, connection_bound(max_connections), timeout_s)
        abuse["connections"] = figures
        serving["connections (while open)"] = problems
        progress(f"{'connections':<28} {figures}")

    def never_reads_phase() -> None:
        figures, problems = _never_reads(cluster, timeout_s)
        abuse["never_reads"] = figures
        serving["never_reads (while stuck)"] = problems
        progress(f"{'never_reads':<28} {figures}")

    phases = [
        ("requests", requests_phase),
        ("frames", frames_phase),
        ("connections", connections_phase),
        ("never_reads", never_reads_phase),
    ]
    for phase, run in phases:
        if phase in ("requests", "frames"):
            with _serving_meanwhile(cluster, timeout_s) as meanwhile:
                run()
            serving[f"{phase} (meanwhile)"] = meanwhile
        else:
            run()
        if crashed or (crashed := dead()):
            suspects = suspects or [phase]
            break
        serving[phase] = check_serving(cluster, timeout_s)
        progress(f"after {phase}: {'serving' if not serving[phase] else serving[phase]}")
    return KafkaFuzzReport(
        seed=seed,
        concurrency=concurrency,
        per_api=per_api,
        per_mutation=per_mutation,
        abuse=abuse,
        log_lines=_log_lines(cluster, offsets),
        serving_problems=serving,
        crashed=crashed,
        crash_suspects=suspects,
        seconds=time.monotonic() - started,
    )


__all__ = [
    "DATA_TOPIC",
    "PROBE_TOPIC",
    "TARGET_TOPIC",
    "KafkaFuzzReport",
    "Outcome",
    "check_serving",
    "connection_bound",
    "fuzz_kafka",
]
