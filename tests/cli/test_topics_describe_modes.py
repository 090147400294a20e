"""``kraft topics describe`` says how each topic replicates: a quorum topic's partitions show
their Raft voters and a note that the leader comes from the Raft vote, not an ISR (issue #12)."""

from __future__ import annotations

import argparse
import json
from types import TracebackType

import pytest

from kraft.cli import topics
from kraft.controller.messages import DescribeClusterResponse, TopicMetadata
from kraft.metadata.image import PartitionDescription


def _topic(name: str, mode: str) -> TopicMetadata:
    partition = PartitionDescription(
        partition=0, leader=2, leader_epoch=7, replicas=(1, 2, 3), isr=(1, 2, 3),
        offline_replicas=(),
    )  # fmt: skip
    return TopicMetadata(
        name=name, topic_id=f"{name}-id", partitions=(partition,), replication_mode=mode
    )


class _Session:
    def __init__(self, args: argparse.Namespace) -> None:
        del args

    def __enter__(self) -> _Session:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass

    def describe_cluster(self) -> DescribeClusterResponse:
        return DescribeClusterResponse(topics=(_topic("ledger", "quorum"), _topic("events", "")))


def _describe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *, json_out: bool
) -> str:
    monkeypatch.setattr(topics, "AdminSession", _Session)
    args = argparse.Namespace(
        topic=None,
        under_replicated_partitions=False,
        under_min_isr_partitions=False,
        unavailable_partitions=False,
        json=json_out,
    )
    assert topics.describe(args) == 0
    return capsys.readouterr().out


def test_describe_marks_a_quorum_topic_and_its_leader_from_the_raft_vote(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _describe(monkeypatch, capsys, json_out=False)
    events, ledger = out.split("Topic: ledger\tTopicId", 1)  # sorted by name
    assert "ReplicationMode: quorum" in ledger and "Raft vote" in ledger
    assert "Voters: 1,2,3" in ledger and "Isr:" not in ledger
    assert "ReplicationMode: isr" in events and "Isr: 1,2,3" in events
    assert "Raft" not in events


def test_describe_shows_the_eligible_leader_replicas_of_an_isr_topic(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    partition = PartitionDescription(
        partition=0, leader=2, leader_epoch=7, replicas=(1, 2, 3), isr=(2,),
        offline_replicas=(), elr=(1,), last_known_elr=(3,),
    )  # fmt: skip
    topic = TopicMetadata(name="events", topic_id="id", partitions=(partition,))

    class _ElrSession(_Session):
        def describe_cluster(self) -> DescribeClusterResponse:
            return DescribeClusterResponse(topics=(topic,))

    monkeypatch.setattr(topics, "AdminSession", _ElrSession)
    args = argparse.Namespace(
        topic=None,
        under_replicated_partitions=False,
        under_min_isr_partitions=False,
        unavailable_partitions=False,
        json=False,
    )
    assert topics.describe(args) == 0
    assert "Isr: 2\tElr: 1\tLastKnownElr: 3" in capsys.readouterr().out
    args.json = True
    assert topics.describe(args) == 0
    doc = json.loads(capsys.readouterr().out)[0]["partitions"][0]
    assert (doc["elr"], doc["last_known_elr"]) == ([1], [3])


def test_describe_json_names_the_mode_and_who_elects_the_leader(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = {d["name"]: d for d in json.loads(_describe(monkeypatch, capsys, json_out=True))}
    ledger, events = docs["ledger"], docs["events"]
    assert ledger["replication_mode"] == "quorum"
    assert ledger["partitions"][0]["leader_elected_by"] == "raft_vote"
    assert ledger["partitions"][0]["voters"] == [1, 2, 3]
    assert events["replication_mode"] == "isr"
    assert events["partitions"][0]["leader_elected_by"] == "controller"
