"""Apache Kafka beside kraft: the jars, a KRaft cluster of JVMs, and its readiness probe.

kraft's reference is Apache Kafka in KRaft mode; this package runs the real thing on the same
machine, as a yardstick for the benchmarks and an oracle for the tests::

    kraft peer kafka fetch                  # once: Kafka's and Spark's Kafka-source jars
    kraft peer kafka up --data-dir /tmp/k   # 3 controllers, 3 brokers; DIR/cluster.json
    kraft peer kafka down --data-dir /tmp/k
    kraft peer kafka tool kafka-topics --bootstrap-server HOST:PORT --list   # any Kafka tool

    from kraft.peer import KafkaCluster
    with KafkaCluster(controllers=3, brokers=3) as kafka:
        print(kafka.bootstrap)              # 127.0.0.1:port,... for any Kafka client

- `kraft.peer.jars`: the versions (``kraft/peer/pom.xml``, the one build file), the cache
  (``~/.cache/kraft/jars``, ``$KRAFT_JARS_DIR``) and the Maven fetch;
- `kraft.peer.settings`: the nodes' properties, Kafka's keys with kraft's values;
- `kraft.peer.kafka`: `KafkaCluster`, the processes;
- `kraft.peer.probe`: one Metadata request, the readiness check;
- `kraft.peer.tools`: Kafka's own command-line tools (console producer and consumer, perf
  tests) as ``java -cp`` commands.
"""

from kraft.peer.jars import PeerToolError, kafka_jars, spark_kafka_jars
from kraft.peer.kafka import KafkaCluster, KafkaNodeExitedError

__all__ = [
    "KafkaCluster",
    "KafkaNodeExitedError",
    "PeerToolError",
    "kafka_jars",
    "spark_kafka_jars",
]
