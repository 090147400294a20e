"""The process's metrics registry, its endpoint, and the three kinds of metric (see the
package docstring)."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_lock = threading.Lock()
_registry: CollectorRegistry | None = None
_counters: dict[str, Counter] = {}
_histograms: dict[str, Histogram] = {}

LATENCY_BUCKETS_S: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


def registry() -> CollectorRegistry:
    """This process's one registry (made on first use)."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = CollectorRegistry(auto_describe=True)
        return _registry


def counter(name: str, documentation: str, labels: Iterable[str] = ()) -> Counter:
    """The counter ``name`` of this process (one instance per name)."""
    with _lock:
        metric = _counters.get(name)
    if metric is None:
        made = Counter(name, documentation, tuple(labels), registry=registry())
        with _lock:
            metric = _counters.setdefault(name, made)
    return metric


def histogram(
    name: str,
    documentation: str,
    labels: Iterable[str] = (),
    buckets: Iterable[float] = LATENCY_BUCKETS_S,
) -> Histogram:
    """The histogram ``name`` of this process (one instance per name)."""
    with _lock:
        metric = _histograms.get(name)
    if metric is None:
        made = Histogram(
            name, documentation, tuple(labels), registry=registry(), buckets=tuple(buckets)
        )
        with _lock:
            metric = _histograms.setdefault(name, made)
    return metric


def start_endpoint(port: int, host: str = "127.0.0.1") -> int:
    """Serve ``/metrics`` on ``host``:``port`` (0: a free port) from a daemon thread; the port.

    Raises:
        OSError: the port cannot be bound.
    """
    server, _thread = start_http_server(port, addr=host, registry=registry())
    bound: int = server.server_port
    return bound


@dataclass(frozen=True, slots=True)
class GaugeSpec:
    """One state gauge: its name, help line and label names."""

    name: str
    documentation: str
    labels: tuple[str, ...] = ()


GaugeValue = float | Mapping[tuple[str, ...], float]
"""A gauge's value: one number, or one per label-value tuple."""


@final
class StateGauges(Collector):
    """Gauges read from the node's state at scrape time (see the package docstring).

    ``snapshot`` returns ``{gauge name: value}``; a gauge it leaves out is not exported in
    that scrape (e.g. the controller metrics of a node that is not active). A snapshot that
    raises exports nothing: a scrape never breaks the node."""

    def __init__(
        self, specs: Iterable[GaugeSpec], snapshot: Callable[[], Mapping[str, GaugeValue]]
    ):
        self._specs = tuple(specs)
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        try:
            values = self._snapshot()
        except Exception:  # the node's state moved under us: skip this scrape's gauges
            return
        for spec in self._specs:
            value = values.get(spec.name)
            if value is None:
                continue
            family = GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)
            if isinstance(value, Mapping):
                for label_values, sample in value.items():
                    family.add_metric(list(label_values), sample)
            else:
                family.add_metric([], value)
            yield family

    def register(self) -> StateGauges:
        registry().register(self)
        return self


RequestSeries = tuple[Callable[[float], None], Callable[[], None], Callable[[], None]]
"""(observe the seconds a request took, count it answered, count it failed)."""


@final
class RequestStats:
    """Per request name: ``kafka_network_requestmetrics_requests_total{request, status}`` and
    the latency histogram ``kafka_network_requestmetrics_totaltime_seconds{request}`` (Kafka's
    ``RequestMetrics`` Requests and TotalTimeMs MBeans, per request type). No transport here:
    the gRPC interceptor (`RequestMetrics`) and the broker's API layer
    (`replication.broker.api`) both record through it, by Kafka API name (Fetch as
    FetchFollower or FetchConsumer, as Kafka's RequestMetrics splits it)."""

    def __init__(self) -> None:
        self._requests = counter(
            "kafka_network_requestmetrics_requests_total",
            "requests answered, per RPC and gRPC status",
            ("request", "status"),
        )
        self._latency = histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "time from a request's arrival to its answer, per RPC",
            ("request",),
        )
        self._series: dict[str, RequestSeries] = {}

    def series(self, name: str) -> RequestSeries:
        """The (observe, ok, failed) of the request ``name`` (bound once per name)."""
        found = self._series.get(name)
        if found is None:
            found = self._series[name] = (
                self._latency.labels(name).observe,
                self._requests.labels(name, "OK").inc,
                self._requests.labels(name, "ERROR").inc,
            )
        return found


@final
class RequestMetrics(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """`RequestStats` per RPC of a gRPC server, except the services in ``skip``, whose API
    layer records its own (a broker's `replication.broker.api`)."""

    def __init__(self, skip: Iterable[str] = ()) -> None:
        self._stats = RequestStats()
        self._skip = frozenset(skip)
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        # One wrapped handler per method, built on its first call: the per-RPC cost is then
        # one dict lookup (building it per call cost ~50 µs of server CPU per RPC with
        # `RejectUnparseable`'s, `python -m kraft.bench.rpc_overhead`). The handlers are fixed
        # once it starts, so a method's handler does not change.
        method = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = await continuation(handler_call_details)
            if str(method).lstrip("/").split("/")[0] not in self._skip:
                handler = self._wrap(method, handler)
            if handler is not None:  # NB: an unknown method is not kept (any name can come)
                self._handlers[method] = handler
        return handler

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if handler is None or handler.unary_unary is None:
            return handler  # streams (the Raft stream, health watch) are not requests
        behaviour = handler.unary_unary
        if not inspect.iscoroutinefunction(behaviour):
            return handler
        request = str(method).rsplit("/", 1)[-1]
        # (observe, ok, failed) per request name: Fetch counts as FetchFollower or
        # FetchConsumer by who asks, as Kafka's RequestMetrics splits it.
        names = ("FetchFollower", "FetchConsumer") if request == "Fetch" else (request,)
        series = {name: self._stats.series(name) for name in names}
        name_of: Callable[[Any], str] = (
            fetch_name if request == "Fetch" else (lambda _message: request)
        )
        clock = time.perf_counter

        async def measured(message: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            observe, ok, failed = series[name_of(message)]
            started = clock()
            try:
                response = await behaviour(message, context)
            except BaseException:
                observe(clock() - started)
                failed()
                raise
            observe(clock() - started)
            ok()
            return response

        return grpc.unary_unary_rpc_method_handler(
            measured, handler.request_deserializer, handler.response_serializer
        )


def fetch_name(message: Any) -> str:
    """Kafka's RequestMetrics splits Fetch by who asks: a follower (its replica id, >= 0) or a
    consumer (-1): FetchFollower and FetchConsumer."""
    return "FetchFollower" if getattr(message, "replica_id", -1) >= 0 else "FetchConsumer"


_fetch_name = fetch_name  # the name tests/metrics knew it by

__all__ = [
    "GaugeSpec",
    "RequestMetrics",
    "RequestSeries",
    "RequestStats",
    "StateGauges",
    "counter",
    "fetch_name",
    "histogram",
    "registry",
    "start_endpoint",
]
