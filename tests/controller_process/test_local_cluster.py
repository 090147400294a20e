"""`LocalCluster`'s surface: brokers by id or index, topic configs passed through, pause and
resume, logs under the data dir, children started from any thread, and no process outliving
the context manager on Ctrl-C or on an exception."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft import LocalCluster
from kraft.cluster.health import NodeExitedError
from kraft.cluster.process import wait_for
from storage.errors import InvalidConfigError
from tests.interrupts import python_interruptible

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=1,
        brokers=2,
        data_dir=tmp_path_factory.mktemp("cluster"),
        controller_config={"broker.session.timeout.ms": "1500"},
        broker_config={"broker.heartbeat.interval.ms": "250"},
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c


def _fenced(cluster: LocalCluster) -> dict[int, bool]:
    brokers = cluster.controller_client().describe_cluster(timeout=5).brokers
    return {b.broker_id: b.fenced for b in brokers}


def test_brokers_are_named_by_id_or_by_one_based_index(cluster: LocalCluster) -> None:
    assert cluster.broker_ids == [101, 102]
    assert cluster.broker_id(1) == 101 and cluster.broker_id(102) == 102
    assert cluster.broker(2) is cluster.broker(102)
    assert cluster.broker_log(1) == cluster.data_dir / "logs" / "broker-101.log"
    with pytest.raises(KeyError):
        cluster.broker_id(3)
    assert cluster.bootstrap.count("127.0.0.1:") == 2
    assert cluster.controller_bootstrap.count("127.0.0.1:") == 1


def test_logs_and_configs_live_under_the_data_dir(cluster: LocalCluster) -> None:
    for log in (cluster.controller_log(1), cluster.broker_log(101), cluster.broker_log(102)):
        assert log.is_relative_to(cluster.data_dir) and log.stat().st_size > 0
    assert sorted(p.name for p in (cluster.data_dir / "config").iterdir()) == [
        "broker-101.properties",
        "broker-102.properties",
        "controller-1.properties",
    ]


def test_topic_configs_pass_through_to_the_controller(cluster: LocalCluster) -> None:
    cluster.create_topic("passed", 2, 2, config={"min.insync.replicas": "2"})
    partitions = cluster.describe_topic("passed").partitions
    assert len(partitions) == 2 and all(p.leader in (101, 102) for p in partitions)
    with pytest.raises(InvalidConfigError):
        cluster.create_topic("rejected", 1, 1, config={"no.such.topic.config": "1"})


def _broker_epoch(cluster: LocalCluster, broker_id: int) -> int:
    brokers = cluster.controller_client().describe_cluster(timeout=5).brokers
    return int(next(b.broker_epoch for b in brokers if b.broker_id == broker_id and not b.fenced))


def test_a_broker_started_from_a_short_lived_thread_outlives_the_thread(
    cluster: LocalCluster,
) -> None:
    """PR_SET_PDEATHSIG fires when the *thread* that started a child exits: `LocalCluster`
    starts children from its own long-lived thread, so this is safe."""
    epoch = _broker_epoch(cluster, 101)
    cluster.kill_broker(1)
    assert not cluster.broker(1).is_running()
    log = cluster.broker_log(1)
    size = log.stat().st_size

    def start_then_exit() -> None:
        cluster.start_broker(1)
        # The child asks for its death signal before it logs anything: once it has logged,
        # this thread's exit would kill it if this thread were its parent.
        wait_for(lambda: log.stat().st_size > size, 30, "broker 101 logging")

    starter = threading.Thread(target=start_then_exit)
    starter.start()
    starter.join()
    wait_for(
        lambda: not cluster.broker(1).is_running() or _broker_epoch(cluster, 101) > epoch,
        30,
        "broker 101 registered again (or dead)",
    )
    assert cluster.broker(1).is_running()


def test_a_paused_broker_is_fenced_and_unfenced_when_resumed(cluster: LocalCluster) -> None:
    cluster.pause_broker(2)
    try:
        wait_for(lambda: _fenced(cluster).get(102), 30, "broker 102 fenced while paused")
        assert cluster.broker(2).is_running()  # stopped, not dead
    finally:
        cluster.resume_broker(2)
    wait_for(lambda: _fenced(cluster).get(102) is False, 30, "broker 102 unfenced")


def test_wait_until_healthy_waits_for_a_restarted_broker_to_register_again(
    cluster: LocalCluster,
) -> None:
    cluster.wait_until_healthy(timeout=60)
    epoch = _broker_epoch(cluster, 102)
    cluster.kill_broker(2)
    cluster.start_broker(2)  # the controller still has the old registration, unfenced
    cluster.wait_until_healthy(timeout=60)
    brokers = {b.broker_id: b for b in cluster.controller_client().describe_cluster().brokers}
    assert brokers[102].broker_epoch > epoch, "returned on the old registration"
    assert not brokers[102].fenced


def test_wait_until_healthy_fails_fast_naming_a_broker_that_died(cluster: LocalCluster) -> None:
    cluster.wait_until_healthy(timeout=60)
    pid = cluster.broker(2).pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # a crash: not LocalCluster's kill_broker
    wait_for(lambda: not cluster.broker(2).is_running(), 10, "broker 102 gone")
    started = time.monotonic()
    with pytest.raises(NodeExitedError, match=r"broker 102 exited with code -9: \S") as e:
        cluster.wait_until_healthy(timeout=60)
    assert time.monotonic() - started < 10, "it waited instead of failing fast"
    assert str(cluster.data_dir / "logs") in str(e.value)
    cluster.start_broker(2)
    cluster.wait_until_healthy(timeout=60)


SCRIPT = """
import sys, threading
from kraft import LocalCluster
from kraft.cluster.health import NodeExitedError
with LocalCluster(controllers=1, brokers=1, data_dir=sys.argv[1]) as cluster:
    cluster.wait_until_healthy(timeout=60)
    print(" ".join(str(p) for p in cluster.pids()), flush=True)
    if sys.argv[2] == "raise":
        raise RuntimeError("a failing test")
    threading.Event().wait()  # until Ctrl-C
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("how", ["ctrl-c", "raise"])
def test_no_process_outlives_the_context_manager(tmp_path: Path, how: str) -> None:
    owner = subprocess.Popen(
        python_interruptible(code=SCRIPT, args=(str(tmp_path), how)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert owner.stdout is not None
    pids = [int(p) for p in owner.stdout.readline().split()]
    assert len(pids) == 2, owner.communicate(timeout=30)
    if how == "ctrl-c":
        owner.send_signal(signal.SIGINT)
    _, err = owner.communicate(timeout=60)
    assert owner.returncode != 0
    assert ("KeyboardInterrupt" if how == "ctrl-c" else "a failing test") in err
    # The context manager killed and reaped them before the owner exited.
    assert not [p for p in pids if _alive(p)]
