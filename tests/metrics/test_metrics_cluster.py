"""Real processes: every node serves Prometheus metrics, and a broker kill shows in them:
under-replicated partitions rise and return to 0, the ISR-shrink and expand counters move,
exactly one controller is active, requests are counted per RPC (issue 17), and every node's
event-loop stall watch reports (issue 29)."""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraft.cluster import LocalCluster
from kraft.loop_watch import STALL_WARN_KEY
from kraft.metrics.kafka import (
    ACTIVE_CONTROLLER,
    ISR_EXPANDS,
    ISR_SHRINKS,
    LEADER_COUNT,
    UNDER_REPLICATED,
)
from replication.clients import Producer

LOOP_LAG_COUNT = "kraft_event_loop_lag_seconds_count"
LOOP_STALLS = "kraft_event_loop_stalls_total"

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]


def scrape(address: str) -> dict[str, float]:
    """``name{labels}`` -> value of one endpoint's samples (labels sorted, as a string)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def total(cluster: LocalCluster, name: str, nodes: list[int]) -> float:
    """``name`` summed over ``nodes``' endpoints (a node that does not answer counts 0)."""
    value = 0.0
    for node in nodes:
        with contextlib.suppress(OSError):
            value += scrape(cluster.metrics_addresses[node]).get(name, 0.0)
    return value


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def test_a_broker_kill_shows_in_the_metrics_and_they_return_to_normal() -> None:
    with LocalCluster(
        controllers=3,
        brokers=3,
        metrics=True,
        # A 1 ms threshold: any wake-up of the stall watch a request's handling delays warns.
        broker_config={"replica.lag.time.max.ms": "1500", STALL_WARN_KEY: "1"},
    ) as cluster:
        cluster.wait_until_healthy(timeout=60)
        cluster.create_topic("m", 3, 3, config={"min.insync.replicas": "2"})
        brokers = list(cluster.broker_ids)
        with Producer(cluster.bootstrap, acks="all") as producer:

            def produce(n: int = 50) -> None:
                futures = [producer.send("m", b"x" * 100, partition=i % 3) for i in range(n)]
                for future in futures:
                    future.result(timeout=30)

            produce()
            assert total(cluster, ACTIVE_CONTROLLER, cluster.controller_ids) == 1
            assert total(cluster, LEADER_COUNT, brokers) == 3
            assert total(cluster, UNDER_REPLICATED, brokers) == 0
            # Every node runs the event-loop stall watch; the brokers, told to warn of a 1 ms
            # lag, saw some under the produce, counted them and logged them.
            for node in (*cluster.controller_ids, *brokers):
                assert scrape(cluster.metrics_addresses[node])[LOOP_LAG_COUNT] > 0
            wait_until(
                lambda: total(cluster, LOOP_STALLS, brokers) > 0, 30, "a broker's loop stall"
            )
            assert any('"event_loop_stalled"' in cluster.broker_log(b).read_text() for b in brokers)
            requests = scrape(cluster.metrics_addresses[brokers[0]])
            assert any(
                k.startswith("kafka_network_requestmetrics_requests_total") for k in requests
            )

            victim = brokers[-1]
            cluster.kill_broker(victim)
            live = brokers[:-1]

            def under_replicated() -> bool:
                produce(10)
                return total(cluster, UNDER_REPLICATED, live) > 0

            wait_until(under_replicated, 60, "under-replicated partitions after the kill")
            assert total(cluster, ISR_SHRINKS, live) >= 1

            cluster.start_broker(victim)

            def healed() -> bool:
                produce(10)
                return total(cluster, UNDER_REPLICATED, brokers) == 0

            wait_until(healed, 90, "under-replicated partitions back to 0")
            assert total(cluster, ISR_EXPANDS, brokers) >= 1
