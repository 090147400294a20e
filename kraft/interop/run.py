"""Run the sequence on both systems: given their bootstraps, or on clusters started here.

`run_diff` opens one `Session` per system with the same API versions (`common_versions`),
runs every step on kraft then on Kafka, and returns the normalized results per step.
`started_clusters` starts a kraft `LocalCluster` and an Apache Kafka `KafkaCluster` (1
controller and 3 brokers each) and stops them on exit.

Set-up of a step's own topics (not itself compared) goes through CreateTopics where the
system serves it; for kraft, while its Kafka listener does not serve CreateTopics, through
kraft's gRPC `AdminClient` when its gRPC bootstrap is known (``kraft_admin``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from kraft.interop.steps import STEPS, Admin, Target, WireAdmin, run_step
from kraft.interop.wire import API_NAMES, Session, common_versions, served_versions

Results = dict[str, dict[str, dict[str, Any]]]


class GrpcAdmin:
    """Topic set-up on kraft through its own gRPC admin client."""

    def __init__(self, bootstrap: str) -> None:
        from replication.clients import AdminClient

        self._admin = AdminClient(bootstrap)

    def create_topic(self, name: str, partitions: int, rf: int, config: Mapping[str, str]) -> None:
        self._admin.create_topic(name, partitions, rf, dict(config))

    def delete_topic(self, name: str) -> None:
        self._admin.delete_topic(name)

    def close(self) -> None:
        self._admin.close()


def run_diff(
    kraft_bootstrap: str,
    kafka_bootstrap: str,
    *,
    kraft_admin: str | None = None,
    steps: Sequence[str] | None = None,
) -> tuple[Results, dict[str, Any]]:
    """The normalized answers of both systems to ``steps`` (default: all, in order), and a
    description of the run (versions sent, APIs not served, seconds per step)."""
    names = list(steps or STEPS)
    unknown = [s for s in names if s not in STEPS]
    if unknown:
        raise ValueError(f"unknown step(s): {', '.join(unknown)} (steps: {', '.join(STEPS)})")
    served = {
        "kraft": served_versions(kraft_bootstrap.split(",")[0]),
        "kafka": served_versions(kafka_bootstrap.split(",")[0]),
    }
    versions = common_versions(*served.values())
    run = f"interop-{uuid.uuid4().hex[:8]}"
    results: Results = {}
    seconds: dict[str, float] = {}
    with ExitStack() as stack:
        targets = []
        for system, bootstrap in (("kraft", kraft_bootstrap), ("kafka", kafka_bootstrap)):
            session = Session(bootstrap, versions, served[system])
            stack.callback(session.close)
            admin: Admin = WireAdmin(session)
            if system == "kraft" and 19 not in served[system] and kraft_admin:
                grpc = GrpcAdmin(kraft_admin)
                stack.callback(grpc.close)
                admin = grpc
            targets.append(Target(system, session, admin, run))
        for name in names:
            began = time.monotonic()
            results[name] = {t.name: run_step(name, t) for t in targets}
            seconds[name] = round(time.monotonic() - began, 2)
    meta = {
        "versions": {API_NAMES[k]: v for k, v in sorted(versions.items())},
        "not_served": {
            system: sorted(API_NAMES[k] for k in versions if k not in ranges)
            for system, ranges in served.items()
        },
        "seconds_per_step": seconds,
    }
    return results, meta


@contextmanager
def started_clusters(data_dir: str | Path | None = None) -> Iterator[tuple[str, str, str]]:
    """A kraft `LocalCluster` and a `KafkaCluster`, 1 controller and 3 brokers each, started
    side by side: (kraft's Kafka bootstrap, kraft's gRPC bootstrap, Kafka's bootstrap).

    Both brokers run their log cleaner every `CLEANER_BACKOFF_MS` (not 15 s), so that the
    compacted-topic step waits a second, not fifteen, for a pass."""
    from kraft.cluster.local import LocalCluster
    from kraft.interop.compaction_step import CLEANER_BACKOFF_MS
    from kraft.peer import KafkaCluster

    base = Path(data_dir) if data_dir else None
    brokers = {"log.cleaner.backoff.ms": str(CLEANER_BACKOFF_MS)}
    with ExitStack() as stack:
        kafka = KafkaCluster(
            controllers=1,
            brokers=3,
            data_dir=base / "kafka" if base else None,
            log_level="WARN",
            broker_config=brokers,
        )
        stack.enter_context(kafka)
        kraft = LocalCluster(
            controllers=1,
            brokers=3,
            data_dir=base / "kraft" if base else None,
            kafka=True,
            broker_config=brokers,
        )
        stack.enter_context(kraft)
        kraft.wait_until_healthy(timeout=60)
        yield kraft.kafka_bootstrap, kraft.bootstrap, kafka.bootstrap
