"""Random runs of three replicas on the harness, with the simulator's invariants checked after
every step: the HW never passes the leader's log end nor moves back under one leader, at most
one AlterPartition is in flight, an acks=all record survives clean leader elections, and the
replicas converge to one log."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from replication.core import PartitionLeader, ReplicationConfig
from storage.errors import ErrorCode
from tests.replication.harness import Cluster, batch

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["produce"] * 3
            + ["fetch"] * 8
            + ["replicate"] * 2
            + ["tick", "commit", "commit", "failover", "crash", "restart"]
        ),
        st.integers(0, 10**6),
    ),
    min_size=20,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_random_runs_keep_the_replication_invariants(ops: list[tuple[str, int]]) -> None:
    c = Cluster(
        (1, 2, 3), config=ReplicationConfig(min_insync_replicas=2, replica_lag_time_ms_max=300)
    )
    c.elect(1, isr=(1, 2, 3))
    acked: dict[int, bytes] = {}  # request id -> value, for acks=all successes
    sent: dict[int, bytes] = {}
    tenure = (c.registration.leader_epoch, 0)
    for n, (op, arg) in enumerate(ops):
        reg = c.registration
        followers = [r for r in reg.replicas if r != reg.leader]
        if op == "produce":
            value = b"v%d" % n
            rid = c.produce(batch(value), acks=(-1, 1, 0)[arg % 3])
            if arg % 3 == 0:
                sent[rid] = value
        elif op == "fetch":
            c.fetch(followers[arg % len(followers)])
        elif op == "replicate":
            c.replicate(rounds=2)
        elif op == "tick":
            c.tick(arg % 200)
        elif op == "commit":
            c.commit_alter_partitions()
        elif op == "failover":
            # A clean election: another live member of the committed ISR.
            candidates = [r for r in reg.isr if r != reg.leader and c.replicas[r].alive]
            if candidates:
                c.elect(candidates[arg % len(candidates)])
        elif op == "crash":
            victim = followers[arg % len(followers)]
            if c.replicas[victim].alive:
                c.flush(victim)
                c.crash(victim)
        elif op == "restart":
            victim = followers[arg % len(followers)]
            if not c.replicas[victim].alive:
                c.restart(victim)
        for rid, value in sent.items():
            done = c.completions.get(rid)
            if done is not None and done.error_code is ErrorCode.NONE:
                acked[rid] = value
        # --- invariants after every step ---
        leader = c.leader()
        log = c.log(c.registration.leader)
        assert log.log_start_offset <= leader.high_watermark <= log.log_end_offset
        if tenure[0] == leader.leader_epoch:
            assert leader.high_watermark >= tenure[1], "the HW moved back under one leader"
        tenure = (leader.leader_epoch, leader.high_watermark)
        pending = [a for a in c.alter_requests if a.data.leader_epoch == leader.leader_epoch]
        assert len(pending) <= 1, "two AlterPartition requests in flight"
        values = log.values()
        for rid, value in acked.items():
            # NB: not necessarily below the new leader's HW yet: a new leader starts from the
            # HW it had as a follower and raises it as the followers fetch (Kafka does too).
            offset = c.completions[rid].base_offset
            assert values[offset] == value, "an acknowledged record was lost"
        for r in leader.maximal_isr:
            if r != c.registration.leader:
                state = leader.follower_state(r)
                assert state is not None
                assert state.log_end_offset < 0 or c.log(r).log_end_offset >= state.log_end_offset
    event(f"acknowledged acks=all records: {min(len(acked), 3)}+")
    event(f"leader epochs: {min(c.registration.leader_epoch, 3)}+")
    # Heal and converge: every replica ends with the leader's log.
    for r in c.replicas:
        if not c.replicas[r].alive:
            c.restart(r)
    for _ in range(5):
        c.tick(50)
        c.replicate(rounds=2)
        c.commit_alter_partitions()
    leader_log = c.log(c.registration.leader).entries()
    for r in c.replicas:
        assert c.log(r).entries() == leader_log
    assert isinstance(c.replicas[c.registration.leader].core, PartitionLeader)
