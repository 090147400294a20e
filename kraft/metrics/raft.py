"""The metadata quorum's latency histograms, as Kafka's ``raft-metrics`` group has them.

- ``kafka_server_raftmetrics_commit_latency_seconds``: on the leader, once per committed batch,
  from the append of its oldest proposal to the commit (Kafka's ``commit-latency-avg``/``-max``,
  also recorded per batch);
- ``kafka_server_raftmetrics_election_latency_seconds``: on every node, from the moment it
  knew no leader to the moment it knows one again (Kafka's ``election-latency-avg``/``-max``):
  a controller's own elections, and what a broker (an observer) waited for one.

`RaftLatency` holds the one piece of state this needs (since when no leader is known) and
takes time as milliseconds from the driver's clock; the histograms are the process's.
"""

from __future__ import annotations

from typing import Final

from kraft.metrics.registry import histogram

COMMIT_LATENCY: Final = "kafka_server_raftmetrics_commit_latency_seconds"
ELECTION_LATENCY: Final = "kafka_server_raftmetrics_election_latency_seconds"


class RaftLatency:
    """Observes commit and election latencies of one Raft driver."""

    def __init__(self) -> None:
        self._commit = histogram(COMMIT_LATENCY, "metadata proposals, append to commit")
        self._election = histogram(ELECTION_LATENCY, "time without a known metadata leader")
        self._leaderless_since_ms: int | None = None

    def committed(self, latency_ms: int) -> None:
        """A proposal committed ``latency_ms`` after it was appended."""
        self._commit.observe(max(latency_ms, 0) / 1000)

    def leader_observed(self, leader_id: int | None, now_ms: int) -> None:
        """The driver's view of the leader after a step (None: no leader known)."""
        if leader_id is None:
            if self._leaderless_since_ms is None:
                self._leaderless_since_ms = now_ms
        elif self._leaderless_since_ms is not None:
            self._election.observe(max(now_ms - self._leaderless_since_ms, 0) / 1000)
            self._leaderless_since_ms = None


__all__ = ["COMMIT_LATENCY", "ELECTION_LATENCY", "RaftLatency"]
