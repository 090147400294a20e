"""Real processes: 3 controllers + 3 brokers; the leader's broker of an RF=3,
min.insync.replicas=2 topic is SIGKILLed and restarted several times while an idempotent
acks=all producer writes unique values. Every acknowledged record must be read back exactly
once at its acknowledged offset, and the replicas' logs must be identical below the HW."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft.cluster import LocalCluster
from kraft.metadata.image import PartitionDescription
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import KraftError
from storage.log import SegmentedLog
from storage.records import iter_batches, offset_values
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

TOPIC = "kills"
PARTITIONS = 2
ROUNDS = 3
PROGRESS = 150
"""Acknowledged records required after each kill (produce resumed on a new leader)."""


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(controllers=3) as c:
        yield c


def keep_evidence(cluster: LocalCluster) -> Path:
    """Copy the cluster's data dir (logs, configs, partition logs) under /tmp."""
    keep = Path(tempfile.mkdtemp(prefix="kraft-leader-kills-", dir="/tmp"))
    shutil.copytree(cluster.data_dir, keep / "cluster", dirs_exist_ok=True)
    return keep


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (KraftError, TimeoutError, ConnectionError):
            pass  # a broker is down or the metadata moves: ask again
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


def read_replica(
    directory: Path, high_watermark: int
) -> tuple[bytes, list[tuple[int, bytes | None]]]:
    """Raw batch bytes and (offset, value) pairs below ``high_watermark`` of a *copy* of one
    replica's partition directory (opening a log may recover / rewrite checkpoints)."""
    copy = Path(tempfile.mkdtemp(prefix="kraft-replica-")) / directory.name
    shutil.copytree(directory, copy)
    raw = bytearray()
    pairs: list[tuple[int, bytes | None]] = []
    log = SegmentedLog.open(copy)
    try:
        assert log.log_end_offset >= high_watermark, (
            f"{directory}: log end offset {log.log_end_offset} < HW {high_watermark}"
        )
        offset = log.log_start_offset
        while offset < high_watermark:
            chunk = log.read(offset, 1 << 20, max_offset=high_watermark)
            assert chunk, f"{directory}: no batch at {offset} below HW {high_watermark}"
            for pos, header in iter_batches(memoryview(chunk)):
                batch = chunk[pos : pos + header.size_bytes]
                raw += batch
                pairs.extend(offset_values(batch))
                offset = header.next_offset
    finally:
        log.close()
        shutil.rmtree(copy.parent, ignore_errors=True)
    return bytes(raw), [(o, v) for o, v in pairs if o < high_watermark]


def test_repeated_leader_kills_lose_and_duplicate_no_acknowledged_record(
    cluster: LocalCluster,
) -> None:
    try:
        check_repeated_leader_kills(cluster)
    except BaseException as e:
        e.add_note(f"cluster data dir kept under {keep_evidence(cluster)}")
        raise


def check_repeated_leader_kills(cluster: LocalCluster) -> None:
    started = time.monotonic()
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=3,
            config={"min.insync.replicas": "2"},
        )
        admin.wait_for_leaders(TOPIC, timeout=30)

    def describe() -> list[PartitionDescription]:
        with AdminClient(cluster.bootstrap) as admin:
            return list(admin.describe_topic(TOPIC).partitions)

    acknowledged: dict[bytes, tuple[int, int]] = {}
    failed: list[tuple[bytes, str]] = []
    lock = threading.Lock()
    stop = threading.Event()
    producer_error: list[BaseException] = []

    def produce() -> None:
        try:
            with Producer(
                cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=2
            ) as producer:
                i = 0
                while not stop.is_set():
                    futures = []
                    for n in range(i, i + 40):
                        value = b"v-%07d" % n
                        futures.append(
                            (value, producer.send(TOPIC, value=value, partition=n % PARTITIONS))
                        )
                    i += 40
                    for value, future in futures:
                        try:
                            md = future.result(timeout=90)
                        except KraftError as e:
                            with lock:
                                failed.append((value, repr(e)))
                            continue
                        with lock:
                            assert value not in acknowledged
                            acknowledged[value] = (md.partition, md.offset)
                producer.flush()
        except BaseException as e:  # reported by the test thread
            producer_error.append(e)

    def acked() -> int:
        with lock:
            return len(acknowledged)

    def acked_at_least(n: int) -> Callable[[], bool]:
        return lambda: acked() >= n

    def leader_moved_from(old: int) -> Callable[[], bool]:
        return lambda: describe()[0].leader not in (old, -1)

    def all_in_isr() -> bool:
        return all(sorted(p.isr) == cluster.broker_ids for p in describe())

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        wait_until(acked_at_least(PROGRESS), 30, "the first acknowledgements")
        for round_ in range(ROUNDS):
            old = describe()[0].leader
            assert old in cluster.broker_ids
            cluster.kill_broker(old)
            before = acked()
            wait_until(
                leader_moved_from(old),
                30,
                f"round {round_}: a new leader of partition 0 after killing {old}",
            )
            wait_until(
                acked_at_least(before + PROGRESS),
                30,
                f"round {round_}: produce to progress after killing {old}",
            )
            cluster.start_broker(old)
            wait_until(
                all_in_isr,
                60,
                f"round {round_}: restarted broker {old} back in every ISR",
            )
            before = acked()
            wait_until(
                acked_at_least(before + PROGRESS // 3),
                30,
                f"round {round_}: produce to progress after {old} rejoined",
            )
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not thread.is_alive(), "the producer thread did not finish"
    assert not producer_error, f"producer thread failed: {producer_error!r}"

    # Consumer-visible end (ListOffsets latest) = the HW of each partition.
    wait_until(
        all_in_isr,
        60,
        "every broker in every ISR after producing",
    )
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        hw = {tp.partition: consumer.position(tp, timeout=30) for tp in tps}
        for tp in tps:
            consumer.seek(tp, 0)
        records = []
        deadline = time.monotonic() + 60
        positions = dict.fromkeys(hw, 0)
        while any(positions[p] < hw[p] for p in hw):
            assert time.monotonic() < deadline, f"consumed up to {positions}, HW {hw}"
            for r in consumer.poll(timeout=1.0):
                if r.offset < hw[r.partition]:
                    records.append(r)
                    positions[r.partition] = max(positions[r.partition], r.offset + 1)

    by_position = {(r.partition, r.offset): r.value for r in records}
    assert len(by_position) == len(records), "an offset was consumed twice"
    values = [r.value for r in records]
    duplicated = [v for v, n in Counter(values).items() if n > 1]
    assert not duplicated, f"values written twice: {duplicated[:20]}"
    lost = {v: pos for v, pos in acknowledged.items() if by_position.get(pos) != v}
    assert not lost, (
        f"{len(lost)} acknowledged records not at their acknowledged offset, e.g. "
        + ", ".join(
            f"{v!r}@{pos} holds {by_position.get(pos)!r}" for v, pos in list(lost.items())[:10]
        )
    )
    assert len(acknowledged) >= ROUNDS * PROGRESS

    # Replicas identical below the HW: stop every broker (cleanly), compare their logs.
    for broker_id in cluster.broker_ids:
        cluster.stop_broker(broker_id, timeout=40)
    for p in range(PARTITIONS):
        replicas = {
            b: read_replica(cluster.broker_data_dir(b) / f"{TOPIC}-{p}", hw[p])
            for b in cluster.broker_ids
        }
        first = cluster.broker_ids[0]
        for b, (raw, pairs) in replicas.items():
            assert [o for o, _ in pairs] == list(range(hw[p])), f"broker {b} partition {p}: gaps"
            assert pairs == replicas[first][1], (
                f"partition {p}: broker {b}'s (offset, value)s differ from broker {first}'s"
            )
            assert raw == replicas[first][0], (
                f"partition {p}: broker {b}'s batch bytes differ from broker {first}'s"
            )
            consumed = [(r.offset, r.value) for r in records if r.partition == p]
            assert sorted(consumed) == pairs
    print(
        f"acknowledged={len(acknowledged)} failed={len(failed)} hw={hw} "
        f"elapsed={time.monotonic() - started:.1f}s"
    )
