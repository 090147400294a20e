"""``kraft topics reassign`` without a cluster: Kafka's reassignment JSON is read strictly
(one clear line for a bad plan, before any request), and ``--generate`` is reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.cli import main
from kraft.cli.topics_reassign import generate_plan, plan_json, read_plan
from kraft.types import TopicPartition


def test_a_kafka_reassignment_json_is_read_as_targets(tmp_path: Path) -> None:
    plan = tmp_path / "move.json"
    doc = {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any"] * 3},
            {"topic": "t", "partition": 1, "replicas": [4]},
        ],
    }
    plan.write_text(json.dumps(doc))
    targets = read_plan(plan)
    assert targets == {TopicPartition("t", 0): (2, 3, 4), TopicPartition("t", 1): (4,)}
    assert plan_json(targets)["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "replicas": [2, 3, 4],
    }


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json", "not JSON"),
        ("[]", '"partitions"'),
        ('{"version": 2, "partitions": []}', "unsupported version"),
        ('{"partitions": []}', "no partitions"),
        ('{"partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}', "topic"),
        ('{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', "partition"),
        ('{"partitions": [{"topic": "t", "partition": true, "replicas": [1]}]}', "partition"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "replicas"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "twice"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]}', "replicas"),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
            ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
            "in the plan twice",
        ),
    ],
)
def test_a_bad_plan_is_one_line_and_exit_1_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, fragment: str
) -> None:
    plan = tmp_path / "move.json"
    plan.write_text(content)
    # NB: an address nobody listens on: the plan is refused before any connection.
    code = main(
        ["topics", "reassign", "--plan", str(plan), "--execute", "--bootstrap", "127.0.0.1:1"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("kraft: error:") and fragment in err[0], err


def test_flags_that_do_not_go_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "move.json"
    plan.write_text('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}')
    bootstrap = ["--bootstrap", "127.0.0.1:1"]
    assert main(["topics", "reassign", "--verify", *bootstrap]) == 1
    assert "--plan" in capsys.readouterr().err
    assert (
        main(["topics", "reassign", "--plan", str(plan), "--verify", "--throttle", "5", *bootstrap])
        == 1
    )
    assert "--throttle goes with --execute" in capsys.readouterr().err
    assert main(["topics", "reassign", "--generate", "--topics", "t", *bootstrap]) == 1
    assert "--brokers" in capsys.readouterr().err


def test_generate_spreads_partitions_round_robin_and_keeps_replication_factors() -> None:
    current = {
        TopicPartition("t", 0): (1, 2, 3),
        TopicPartition("t", 1): (2, 3, 1),
        TopicPartition("t", 2): (3, 1, 2),
        TopicPartition("u", 0): (1,),
    }
    proposed = generate_plan(current, [2, 3, 4, 5])
    assert proposed == {
        TopicPartition("t", 0): (2, 3, 4),
        TopicPartition("t", 1): (3, 4, 5),
        TopicPartition("t", 2): (4, 5, 2),
        TopicPartition("u", 0): (2,),
    }
    assert generate_plan(current, [2, 3, 4, 5]) == proposed, "reproducible"
    with pytest.raises(ValueError, match="only 2 brokers"):
        generate_plan(current, [4, 5])
