"""Peer connections ping (`kraft.transport.channels.PEER_KEEPALIVE_MS`): a connection a
partition left open is closed and dialled again, instead of waiting after the heal for TCP's
retransmission, which backs off to tens of seconds (`kraft bench host-faults --phases isr-cut`:
a broker cut off for 40 s rejoined every ISR 1.45 s after the heal, against 15.5-18.8 s
without the pings)."""

from __future__ import annotations

from kraft.raft import RaftConfig
from kraft.transport.channels import (
    PEER_KEEPALIVE_MS,
    PEER_KEEPALIVE_TIMEOUT_MS,
    peer_channel_options,
    server_options,
)


def test_a_connection_closed_by_the_pings_never_beats_the_raft_fetch_timeout() -> None:
    # A closed connection to the leader makes a follower campaign at once (it reads as the
    # leader's process exiting): the pings must not close one sooner than the fetch timeout.
    assert RaftConfig().fetch_timeout_ms < PEER_KEEPALIVE_MS + PEER_KEEPALIVE_TIMEOUT_MS
    client = dict(peer_channel_options())
    server = dict(server_options())
    assert client["grpc.keepalive_time_ms"] == PEER_KEEPALIVE_MS
    assert server["grpc.http2.min_recv_ping_interval_without_data_ms"] <= PEER_KEEPALIVE_MS
