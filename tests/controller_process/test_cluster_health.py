"""`kraft.cluster.health.check_cluster_health` against a stub controller client: each condition of a
healthy cluster fails with a sentence that names the node or partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kraft.cli._cluster_status import collect_status, render_status
from kraft.cluster.health import EXITED, STOPPED, NodeProcess, check_cluster_health
from kraft.controller.messages import DescribeClusterResponse, TopicMetadata
from kraft.metadata.image import BrokerRegistration, PartitionDescription
from kraft.raft.messages import DescribeQuorumResponse, QuorumReplica
from storage.errors import RequestTimedOutError

NOW_MS = 1_000_000


class StubClient:
    def __init__(self, quorum: DescribeQuorumResponse, cluster: DescribeClusterResponse) -> None:
        self.quorum = quorum
        self.cluster = cluster
        self.fail = False

    def describe_quorum(self, **_: Any) -> DescribeQuorumResponse:
        if self.fail:
            raise RequestTimedOutError("no controller answered")
        return self.quorum

    def describe_cluster(self, **_: Any) -> DescribeClusterResponse:
        return self.cluster


def broker(broker_id: int, epoch: int, *, fenced: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, incarnation_id="x", broker_epoch=epoch, fenced=fenced
    )


def partition(index: int, leader: int, isr: tuple[int, ...]) -> PartitionDescription:
    return PartitionDescription(
        partition=index,
        leader=leader,
        leader_epoch=1,
        replicas=(101, 102),
        isr=isr,
        offline_replicas=(),
    )


def cluster_view(**changes: Any) -> StubClient:
    voters = (
        QuorumReplica(replica_id=1, last_fetch_timestamp_ms=NOW_MS),
        QuorumReplica(replica_id=2, last_fetch_timestamp_ms=NOW_MS - 100),
    )
    brokers = (broker(101, 10), broker(102, 11))
    topics = (TopicMetadata(name="t", partitions=(partition(0, 101, (101, 102)),)),)
    quorum = DescribeQuorumResponse(leader_id=changes.get("leader_id", 1), voters=voters)
    cluster = DescribeClusterResponse(
        brokers=changes.get("brokers", brokers), topics=changes.get("topics", topics)
    )
    return StubClient(quorum, cluster)


NODES = [
    NodeProcess(role="controller", node_id=1, address="c1"),
    NodeProcess(role="controller", node_id=2, address="c2"),
    NodeProcess(role="broker", node_id=101, address="b1"),
    NodeProcess(role="broker", node_id=102, address="b2"),
]


def check(client: StubClient, nodes: list[NodeProcess] = NODES, **kw: Any) -> list[str]:
    serving = kw.pop("serving", lambda address: "SERVING")
    health = check_cluster_health(nodes, client, serving=serving, now_ms=NOW_MS, **kw)  # type: ignore[arg-type]
    assert health.healthy == (not health.problems)
    return list(health.problems)


def test_a_cluster_whose_every_condition_holds_is_healthy() -> None:
    assert check(cluster_view()) == []


def test_a_node_that_is_not_serving_or_does_not_answer_is_named() -> None:
    answers = {"c2": "NOT_SERVING", "b1": "no answer"}
    problems = check(cluster_view(), serving=lambda a: answers.get(a, "SERVING"))
    assert problems == [
        "controller 2 health check: NOT_SERVING",
        "broker 101 health check: no answer",
    ]


def test_a_dead_node_is_named_and_a_stopped_one_is_not_expected() -> None:
    nodes = [
        NODES[0],
        NODES[1],
        NodeProcess(
            role="broker",
            node_id=101,
            address="b1",
            process=EXITED,
            exit_detail="exited with code 1: boom",
        ),
        NodeProcess(role="broker", node_id=102, address="b2", process=STOPPED),
    ]
    health = check_cluster_health(nodes, cluster_view(), serving=lambda a: "SERVING", now_ms=NOW_MS)  # type: ignore[arg-type]
    assert health.exited == ("broker 101 exited with code 1: boom",)
    assert list(health.problems) == list(health.exited)


def test_a_broker_with_its_registration_from_before_a_restart_is_not_healthy() -> None:
    problems = check(cluster_view(), stale_broker_epochs={102: 11})
    assert problems == [
        "broker 102 is registered before restart (the controller still has the registration "
        "of epoch 11)"
    ]


def test_fenced_and_unregistered_brokers_a_leaderless_quorum_and_offline_partitions() -> None:
    topics = (
        TopicMetadata(name="t", partitions=(partition(0, -1, ()), partition(1, 101, (101,)))),
    )
    client = cluster_view(leader_id=-1, brokers=(broker(101, 10, fenced=True),), topics=topics)
    problems = check(client, require_full_isr=True)
    assert "the metadata quorum has no leader" in problems
    assert "broker 101 is fenced" in problems and "broker 102 is not registered" in problems
    assert "1 partition(s) without a leader: t-0" in problems
    assert "1 under-replicated partition(s): t-1" in problems


def test_unreachable_controllers_are_a_problem_not_an_exception() -> None:
    client = cluster_view()
    client.fail = True
    problems = check(client)
    assert problems == ["the controllers did not answer: no controller answered"]


def test_cluster_status_uses_the_same_check_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    error = '{"event": "disk_failed", "level": "error"}'
    (tmp_path / "logs" / "broker-102.log").write_text(f'{error}\n{{"event": "last"}}\n')
    info = {
        "data_dir": str(tmp_path),
        "controllers": [{"id": 1, "address": "c1", "pid": None}],
        "brokers": [{"id": 102, "address": "b2", "pid": None}],
    }
    doc = collect_status(info, cluster_view())  # type: ignore[arg-type]
    assert doc["healthy"] is False
    # The last error in its log, not its last line (issue 30: an ordinary event read as the
    # cause of death).
    assert f"broker 102 (pid None) is gone: its last error: {error}" in doc["problems"]
    text = render_status(doc)
    assert "DEGRADED" in text and "Not healthy because:" in text
    assert f"  - broker 102 (pid None) is gone: its last error: {error}" in text
