"""Prometheus metrics of a kraft node, named after Kafka's MBeans (issue 17).

One registry per process (`registry`), served on ``metrics.port`` (`start_endpoint`) in the
text exposition format Prometheus scrapes. Names follow what the Prometheus JMX exporter makes
of Kafka's MBeans, lower-cased: ``kafka.server:type=ReplicaManager,name=
UnderReplicatedPartitions`` is ``kafka_server_replicamanager_underreplicatedpartitions``.

Three kinds of metric, by where the value lives:

- **state gauges** (`StateGauges`): read from the node's state when scraped, through a
  snapshot function the shell registers (under-replicated partitions, leader count, the
  active controller, fenced brokers, the Raft leader and epoch...). Nothing is counted on a
  hot path; a scrape costs one walk of the node's partitions.
- **request metrics** (`RequestMetrics`): a gRPC server interceptor that every server built
  by `kraft.transport.channels` carries: requests and errors per RPC, and a latency
  histogram per RPC.
- **event counters** (`counter`): ISR shrinks and expands, messages and bytes in per topic,
  counted where the shell sees the event.

The metric names and their meaning are listed in ``docs/operations.md`` ("Metrics").
"""

from kraft.metrics.registry import (
    GaugeSpec,
    RequestMetrics,
    StateGauges,
    counter,
    histogram,
    registry,
    start_endpoint,
)

__all__ = [
    "GaugeSpec",
    "RequestMetrics",
    "StateGauges",
    "counter",
    "histogram",
    "registry",
    "start_endpoint",
]
