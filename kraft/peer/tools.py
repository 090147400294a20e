"""Kafka's own command-line tools as ``java -cp`` commands, from the fetched jars.

Kafka's ``bin/kafka-*.sh`` scripts are thin wrappers around a main class each; kraft ships no
script (nothing of Kafka goes into the repository), so `tool_command` builds the same command::

    tool_command("kafka-console-consumer", "--bootstrap-server", kafka.bootstrap,
                 "--topic", "t", "--from-beginning", "--max-messages", "10")

The tools log at WARN to stderr (Kafka's ``tools-log4j2`` does the same), so their stdout is
only their output.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path

from kraft.peer.jars import JarSet, find_java, kafka_jars, require

TOOL_MAIN_CLASSES: Mapping[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    # No bin/ script: Kafka's system tests run it with kafka-run-class.sh (exactly-once copy).
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
}
"""The script name -> the main class it runs (Kafka 4.x)."""
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""A client tool: a small heap, and a JIT that starts fast (Kafka's scripts use 256m too)."""


_TOOLS_LOG4J2 = """\
# Written by kraft: Kafka's tools log warnings to stderr; stdout is their output.
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
"""


def tools_log4j_config(jar_set: JarSet) -> Path:
    """The tools' log4j2 configuration, written beside the jars (the cache) once."""
    path = jar_set.directory / "tools-log4j2.properties"
    if not path.exists() or path.read_text() != _TOOLS_LOG4J2:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(_TOOLS_LOG4J2)
        tmp.replace(path)
    return path


def tool_command(
    tool: str, *args: str, jars: JarSet | None = None, log4j_config: Path | None = None
) -> list[str]:
    """The command that runs Kafka's ``tool`` (a script's name: ``kafka-console-producer``)
    with ``args``.

    Raises:
        KeyError: not a tool named in `TOOL_MAIN_CLASSES`.
        PeerToolError: no Java, or the jars were not fetched.
    """
    main = TOOL_MAIN_CLASSES[tool]
    jar_set = require(jars or kafka_jars())
    config = log4j_config or tools_log4j_config(jar_set)
    options = [*TOOL_JVM_OPTIONS, f"-Dlog4j2.configurationFile={config}"]
    return [find_java(), *options, "-cp", jar_set.classpath, main, *args]


_PRODUCER_PERF = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec .*?"
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th"
)


def parse_producer_perf_test(output: str) -> dict[str, float]:
    """``kafka-producer-perf-test``'s summary (its last matching line): records, records/s,
    p50/p99 ms.

    Raises:
        ValueError: no summary line in ``output``.
    """
    matches = list(_PRODUCER_PERF.finditer(output))
    if not matches:
        raise ValueError(f"no kafka-producer-perf-test summary in: {output[-300:]!r}")
    m = matches[-1]
    return {
        "records": int(m["records"]),
        "records_per_s": float(m["rate"]),
        "p50_ms": float(m["p50"]),
        "p99_ms": float(m["p99"]),
    }


def parse_consumer_perf_test(output: str) -> dict[str, float]:
    """``kafka-consumer-perf-test``'s CSV line: records and records/s while fetching
    (``fetch.nMsg.sec``: after the group's rebalance, as kraft's bench times from the first
    poll).

    Raises:
        ValueError: no CSV line after the header.
    """
    lines = [line for line in output.splitlines() if line.strip()]
    for header, row in itertools.pairwise(lines):
        if header.startswith("start.time"):
            names = [n.strip() for n in header.split(",")]
            values = dict(zip(names, (v.strip() for v in row.split(",")), strict=False))
            return {
                "records": int(values["data.consumed.in.nMsg"]),
                "records_per_s": float(values["fetch.nMsg.sec"]),
            }
    raise ValueError(f"no kafka-consumer-perf-test result in: {output[-300:]!r}")


__all__ = [
    "TOOL_JVM_OPTIONS",
    "TOOL_MAIN_CLASSES",
    "parse_consumer_perf_test",
    "parse_producer_perf_test",
    "tool_command",
    "tools_log4j_config",
]
