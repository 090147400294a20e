"""The metadata quorum's commit and election latency histograms (Kafka's raft-metrics)."""

from __future__ import annotations

import asyncio

from kraft.metrics.raft import COMMIT_LATENCY, ELECTION_LATENCY, RaftLatency
from kraft.metrics.registry import registry
from kraft.raft_shell.proposals import Proposals
from kraft.raft_shell.state_machine import AppliedBatch
from storage.errors import NotControllerError


def _sample(name: str, suffix: str) -> float:
    value = registry().get_sample_value(name + suffix)
    return 0.0 if value is None else value


def test_an_election_is_timed_from_losing_the_leader_to_knowing_one() -> None:
    latency = RaftLatency()
    count, total = _sample(ELECTION_LATENCY, "_count"), _sample(ELECTION_LATENCY, "_sum")
    latency.leader_observed(1, 1_000)  # a leader known: nothing to time
    latency.leader_observed(None, 2_000)  # lost
    latency.leader_observed(None, 2_100)  # still none: the start stays 2,000
    latency.leader_observed(2, 2_350)  # known again
    latency.leader_observed(2, 9_000)
    assert _sample(ELECTION_LATENCY, "_count") == count + 1
    assert abs(_sample(ELECTION_LATENCY, "_sum") - total - 0.35) < 1e-9


def test_a_committed_batch_reports_its_oldest_proposal_append_to_commit_time() -> None:
    now = [100]
    seen: list[int] = []
    proposals = Proposals(
        lambda: NotControllerError("not leader"), clock=lambda: now[0], on_committed=seen.append
    )

    async def run() -> None:
        loop = asyncio.get_running_loop()
        first, second, lost = (loop.create_future() for _ in range(3))
        proposals.add(10, 2, 3, first)
        now[0] = 120
        proposals.add(12, 1, 3, second)
        now[0] = 130
        proposals.add(13, 1, 3, lost)
        now[0] = 175
        proposals.committed(AppliedBatch(base_offset=10, end_offset=13, epoch=3))
        proposals.committed(AppliedBatch(base_offset=13, end_offset=14, epoch=4))  # lost
        assert first.result() == 10 and second.result() == 12
        assert lost.exception() is not None

    asyncio.run(run())
    assert seen == [75]  # one batch, timed from its oldest proposal; the lost one is not timed


def test_commit_latencies_land_in_the_histogram() -> None:
    before = _sample(COMMIT_LATENCY, "_count")
    RaftLatency().committed(12)
    assert _sample(COMMIT_LATENCY, "_count") == before + 1
