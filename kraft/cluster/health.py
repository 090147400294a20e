"""Cluster health: the one check behind `LocalCluster.wait_until_healthy` and
``kraft cluster status``.

A cluster is healthy when, for the nodes expected to run:

- every node process runs (one that exited on its own is named with the last line of its
  log: callers fail fast on it instead of waiting for a timeout);
- every node's gRPC health service answers SERVING (a server whose internal loop died
  answers NOT_SERVING or exits; a paused one does not answer);
- the metadata quorum has a leader and every running controller follows it (fetched within
  the last 2 s);
- every running broker is registered, unfenced and not shutting down in the controller's
  view (DescribeCluster), with a registration newer than the one it had before a restart;
- every partition has a leader (a non-empty ISR); with ``require_full_isr``, every ISR also
  holds every replica.

`check_cluster_health` returns a `ClusterHealth`: per node what was seen, and ``problems``,
one sentence per failed condition (empty: healthy). It never raises for an unreachable
controller quorum: that is a problem too.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kraft.security.tls import TlsConfig
from kraft.transport.channels import client_channel

if TYPE_CHECKING:
    from kraft.cluster.process import ManagedProcess
    from kraft.controller.client import ControllerClient

RUNNING: Final = "running"
STOPPED: Final = "stopped"
"""Stopped or killed on purpose: not expected to run."""
EXITED: Final = "exited"
"""Exited on its own: a death."""

RECENT_FETCH_MS = 2000
"""A voter that fetched within this long follows the leader."""
_LISTED = 5
"""Partitions named in one problem sentence."""


class NodeExitedError(RuntimeError):
    """A node process that should run has exited (the message names it and its last log
    line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeProcess:
    """A node as its owner knows the process."""

    role: str
    """``controller`` or ``broker``."""
    node_id: int
    address: str
    pid: int | None = None
    process: str = RUNNING
    """`RUNNING`, `STOPPED` or `EXITED`."""
    exit_detail: str = ""
    """For `EXITED`: how (exit code, last log line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeHealth:
    role: str
    node_id: int
    address: str
    pid: int | None
    process: str
    serving: str | None
    """The gRPC health answer (SERVING, NOT_SERVING, ...), ``no answer``, or None: not asked
    (the process does not run)."""
    state: str
    """Controller: leader, follower, not fetching, down, unknown. Broker: unfenced, fenced,
    controlled shutdown, not registered, registered before restart, down, down (unfenced),
    unknown."""
    lag: int | None = None
    """A controller's lag behind the leader's log end, in records."""
    broker_epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionHealth:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def offline(self) -> bool:
        return self.leader < 0 or not self.isr

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterHealth:
    nodes: tuple[NodeHealth, ...]
    problems: tuple[str, ...]
    """One sentence per failed condition; empty when healthy."""
    exited: tuple[str, ...] = ()
    """The problems that are node processes which exited on their own."""
    error: str | None = None
    """Why the controllers did not answer, if they did not."""
    quorum_leader_id: int | None = None
    quorum_epoch: int | None = None
    high_watermark: int | None = None
    partitions: tuple[PartitionHealth, ...] = ()

    @property
    def healthy(self) -> bool:
        return not self.problems


def node_process(role: str, node_id: int, address: str, process: ManagedProcess) -> NodeProcess:
    """What `check_cluster_health` needs to know of one node's process: running, stopped on
    purpose, or exited on its own (with how)."""
    if process.is_running():
        state = RUNNING
    elif process.died():
        state = EXITED
    else:
        state = STOPPED
    return NodeProcess(
        role=role,
        node_id=node_id,
        address=address,
        pid=process.pid,
        process=state,
        exit_detail=process.exit_summary() if state == EXITED else "",
    )


class BrokerIncarnations:
    """What a broker's restart must supersede, for a cluster harness: per broker, the epoch
    of the registration it had before its last restart (`check_cluster_health`'s
    ``stale_broker_epochs``). The controller keeps a killed broker's registration, unfenced
    until its session expires, so without it a health check passes for a restarted broker
    before the new process has registered."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        """Per broker, the epoch of the last registration seen unfenced."""
        self.stale: dict[int, int] = {}
        """Per restarted broker, the epoch of its registration from before the restart."""

    def observe(self, health: ClusterHealth) -> None:
        """Remember the unfenced registrations of a health check."""
        for node in health.nodes:
            if node.role == "broker" and node.state == "unfenced" and node.broker_epoch:
                self.seen[node.node_id] = node.broker_epoch

    def restarting(self, broker_id: int, client: ControllerClient | None) -> None:
        """``broker_id`` is being started again: its current registration is stale (asked of
        ``client``; best effort: the last one seen if the controllers do not answer quickly
        or ``client`` is None)."""
        from storage.errors import KraftError

        known = self.seen.get(broker_id, -1)
        if client is not None:
            try:
                brokers = client.describe_cluster(timeout=2.0).brokers
            except (KraftError, TimeoutError):
                brokers = ()
            known = max([known, *(b.broker_epoch for b in brokers if b.broker_id == broker_id)])
        self.stale[broker_id] = known


def serving_status(address: str, timeout: float = 1.0, tls: TlsConfig | None = None) -> str:
    """What ``address``'s gRPC health service says for the whole server (``""``):
    SERVING, NOT_SERVING, ..., or ``no answer`` (asked over TLS with ``tls``)."""
    with client_channel(address, tls) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.RpcError:
            return "no answer"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def check_cluster_health(
    nodes: Sequence[NodeProcess],
    client: ControllerClient,
    *,
    stale_broker_epochs: Mapping[int, int] | None = None,
    require_full_isr: bool = False,
    timeout: float = 2.0,
    serving: Callable[[str], str] | None = None,
    now_ms: int | None = None,
) -> ClusterHealth:
    """The health of the cluster of ``nodes`` (see the module docstring).

    Args:
        client: a client of the cluster's controllers.
        stale_broker_epochs: per broker, the epoch of a registration from before its last
            restart: a registration at or below it is the old incarnation's.
        require_full_isr: count under-replicated partitions as a problem.
        timeout: for each controller request.
        serving: the health-service probe (tests inject; default: `serving_status` with the
            client's TLS settings).
        now_ms: wall-clock milliseconds (voters' fetch times are wall-clock).
    """
    from storage.errors import KraftError

    if serving is None:
        serving = functools.partial(serving_status, tls=getattr(client, "tls", None))
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    stale = stale_broker_epochs or {}
    problems: list[str] = []
    exited: list[str] = []
    for node in nodes:
        if node.process == EXITED:
            exited.append(f"{node.role} {node.node_id} {node.exit_detail or 'exited'}")
    problems.extend(exited)
    running = [n for n in nodes if n.process == RUNNING]
    with ThreadPoolExecutor(max(1, min(8, len(running)))) as pool:
        answers = dict(
            zip(
                (n.node_id for n in running),
                pool.map(lambda n: serving(n.address), running),
                strict=True,
            )
        )
    for node in running:
        if answers[node.node_id] != "SERVING":
            problems.append(f"{node.role} {node.node_id} health check: {answers[node.node_id]}")

    error: str | None = None
    try:
        quorum = client.describe_quorum(timeout=timeout)
        cluster = client.describe_cluster(timeout=timeout)
    except (KraftError, TimeoutError) as e:
        error = str(e)
        problems.append(f"the controllers did not answer: {error}")
        return ClusterHealth(
            nodes=tuple(_node(n, answers.get(n.node_id), "unknown") for n in nodes),
            problems=tuple(problems),
            exited=tuple(exited),
            error=error,
        )

    out: list[NodeHealth] = []
    leader = quorum.leader_id
    if leader < 0:
        problems.append("the metadata quorum has no leader")
    voters = {v.replica_id: v for v in quorum.voters}
    observers = {v.replica_id: v for v in quorum.observers}
    registered = {b.broker_id: b for b in cluster.brokers}
    for node in nodes:
        answer = answers.get(node.node_id)
        if node.role == "controller":
            voter = voters.get(node.node_id)
            lag = voter.lag if voter is not None else None
            if node.process != RUNNING:
                state = "down"
            elif node.node_id == leader:
                state = "leader"
            elif voter is not None and voter.last_fetch_timestamp_ms >= now - RECENT_FETCH_MS:
                state = "follower"
            elif (
                node.node_id in observers
                and observers[node.node_id].last_fetch_timestamp_ms >= now - RECENT_FETCH_MS
            ):
                state = "observer"  # KIP-853: a controller not (yet) in the voter set
            else:
                state = "not fetching"
                problems.append(f"controller {node.node_id} does not follow leader {leader}")
            out.append(_node(node, answer, state, lag=lag))
            continue
        registration = registered.get(node.node_id)
        epoch = registration.broker_epoch if registration is not None else None
        if node.process != RUNNING:
            state = "down" if registration is None or registration.fenced else "down (unfenced)"
        elif registration is None:
            state = "not registered"
        elif registration.broker_epoch <= stale.get(node.node_id, -1):
            state = "registered before restart"
        elif registration.fenced:
            state = "fenced"
        elif registration.in_controlled_shutdown:
            state = "controlled shutdown"
        else:
            state = "unfenced"
        if node.process == RUNNING and state != "unfenced":
            detail = (
                f" (the controller still has the registration of epoch {epoch})"
                if state == "registered before restart"
                else ""
            )
            problems.append(f"broker {node.node_id} is {state}{detail}")
        out.append(_node(node, answer, state, broker_epoch=epoch))

    partitions = tuple(
        PartitionHealth(
            topic=topic.name,
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            replicas=tuple(p.replicas),
            isr=tuple(p.isr),
        )
        for topic in sorted(cluster.topics, key=lambda t: t.name)
        for p in sorted(topic.partitions, key=lambda p: p.partition)
    )
    offline = [p for p in partitions if p.offline]
    if offline:
        problems.append(f"{len(offline)} partition(s) without a leader: {_names(offline)}")
    under = [p for p in partitions if p.under_replicated and not p.offline]
    if require_full_isr and under:
        problems.append(f"{len(under)} under-replicated partition(s): {_names(under)}")
    return ClusterHealth(
        nodes=tuple(out),
        problems=tuple(problems),
        exited=tuple(exited),
        quorum_leader_id=leader,
        quorum_epoch=quorum.leader_epoch,
        high_watermark=quorum.high_watermark,
        partitions=partitions,
    )


def _node(
    node: NodeProcess,
    serving: str | None,
    state: str,
    *,
    lag: int | None = None,
    broker_epoch: int | None = None,
) -> NodeHealth:
    return NodeHealth(
        role=node.role,
        node_id=node.node_id,
        address=node.address,
        pid=node.pid,
        process=node.process,
        serving=serving,
        state=state,
        lag=lag,
        broker_epoch=broker_epoch,
    )


def _names(partitions: Sequence[PartitionHealth]) -> str:
    names = ", ".join(str(p) for p in partitions[:_LISTED])
    return names + (f" and {len(partitions) - _LISTED} more" if len(partitions) > _LISTED else "")


__all__ = [
    "EXITED",
    "RUNNING",
    "STOPPED",
    "BrokerIncarnations",
    "ClusterHealth",
    "NodeExitedError",
    "NodeHealth",
    "NodeProcess",
    "PartitionHealth",
    "check_cluster_health",
    "node_process",
    "serving_status",
]
