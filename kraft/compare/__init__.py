"""``kraft compare``: ISR and quorum replication side by side on real processes.

One `LocalCluster` (as many brokers as the replication factor, so every broker holds a replica
of every partition), one fresh one-partition topic per mode and scenario, the same paced
workload (`workload.ProbeProducer`) on each, and the same faults on real processes:

- `scenarios.slow_follower`: SIGSTOP of a follower; produce latency over time, ISR moments;
- `scenarios.failures`: SIGKILL of 1 then 2 replicas, then restarts; who keeps accepting,
  and what one acks=all Produce request gets (`kafka_wire`: NOT_ENOUGH_REPLICAS, ...);
- `scenarios.leader_kill`: SIGKILL of the leader to the next acknowledged write;
- `losses`: acks=1 with a leader kill, unclean election with a stale replica, and the last
  replica standing's power loss (in the simulator: a real process keeps its page cache);
- `scenarios.steady`: throughput and CPU per record (`kraft bench produce`'s harness).

With ``--with-kafka``, `kafka_column` runs every scenario but the simulator's power loss on an
Apache Kafka cluster (`kraft.peer`) as a third column, through librdkafka (``--client
confluent-kafka`` drives kraft's columns the same way) and kio requests (`kafka_wire`: the
leader epoch, one Produce's error code).

`checker.check_acknowledged` compares the acknowledged sends with a final read; `report` and
`plots` write ``report.md`` and the PNGs; `run.run` does it all (``kraft compare``).
"""

from kraft.compare.checker import LossCheck, check_acknowledged

__all__ = ["LossCheck", "check_acknowledged"]
