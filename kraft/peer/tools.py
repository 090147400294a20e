"""Kafka's own command-line tools as ``java -cp`` commands, from the fetched jars.

Kafka's ``bin/kafka-*.sh`` scripts are thin wrappers around a main class each; kraft ships no
script (nothing of Kafka goes into the repository), so `tool_command` builds the same command::

    tool_command("kafka-console-consumer", "--bootstrap-server", kafka.bootstrap,
                 "--topic", "t", "--from-beginning", "--max-messages", "10")

The tools log at WARN to stderr (Kafka's ``tools-log4j2`` does the same), so their stdout is
only their output.
"""

from __future__ import annotations

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


__all__ = ["TOOL_JVM_OPTIONS", "TOOL_MAIN_CLASSES", "tool_command", "tools_log4j_config"]
