"""Apache Kafka's and Spark's Kafka-source jars, fetched once from Maven Central into a cache.

The exact versions live in one build file, ``kraft/peer/pom.xml`` (its ``kafka.version`` and
``spark.version`` properties); `fetch` runs Maven's ``dependency:copy-dependencies`` on it, one
profile per set, into a directory per set and version::

    ~/.cache/kraft/jars/                 ($KRAFT_JARS_DIR)
        kafka-4.4.0/*.jar                the broker, controller and tools: java -cp 'DIR/*'
        spark-sql-kafka-4.2.0/*.jar      Spark's Kafka source: spark.jars
        m2/                              Maven's own download cache

A set is complete once its ``.complete`` marker exists (written last), so an interrupted fetch
is redone, and a complete one is never fetched again. Nothing here goes into the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
"""The build file that names every jar's version."""
JARS_DIR_ENV = "KRAFT_JARS_DIR"
_DEFAULT_JARS_DIR = Path.home() / ".cache" / "kraft" / "jars"
_COMPLETE = ".complete"
_MAVEN_NS = "{http://maven.apache.org/POM/4.0.0}"
FETCH_TIMEOUT_S = 900.0
"""How long one Maven run may take (a first download of ~60 MB)."""


class PeerToolError(Exception):
    """Java, Maven, the registry or the jars are missing: the message is one line for the
    user, naming what to do."""


@dataclass(frozen=True, slots=True)
class JarSet:
    """One profile of the build file, copied into ``directory``."""

    name: str
    """``kafka`` or ``spark``: the pom's profile id."""
    version: str
    directory: Path

    @property
    def complete(self) -> bool:
        return (self.directory / _COMPLETE).exists()

    def jars(self) -> list[Path]:
        return sorted(self.directory.glob("*.jar"))

    @property
    def classpath(self) -> str:
        """``DIR/*``: the JVM's wildcard for every jar of the set."""
        return str(self.directory / "*")


def jars_dir() -> Path:
    """The cache root: ``$KRAFT_JARS_DIR``, else ``~/.cache/kraft/jars``."""
    override = os.environ.get(JARS_DIR_ENV)
    return Path(override).expanduser() if override else _DEFAULT_JARS_DIR


def pom_properties(pom: Path = POM) -> dict[str, str]:
    """The ``<properties>`` of the build file (``kafka.version``, ``spark.version``, ...)."""
    root = ET.parse(pom).getroot()
    props = root.find(f"{_MAVEN_NS}properties")
    assert props is not None, f"{pom} has no <properties>"
    return {child.tag.removeprefix(_MAVEN_NS): (child.text or "").strip() for child in props}


def kafka_jars(root: Path | None = None) -> JarSet:
    """The Kafka server and tools set, at the build file's ``kafka.version``."""
    version = pom_properties()["kafka.version"]
    return JarSet("kafka", version, (root or jars_dir()) / f"kafka-{version}")


def spark_kafka_jars(root: Path | None = None) -> JarSet:
    """Spark's Kafka source and what pyspark lacks of its dependencies (``spark.jars``)."""
    version = pom_properties()["spark.version"]
    return JarSet("spark", version, (root or jars_dir()) / f"spark-sql-kafka-{version}")


def find_java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on PATH.

    Raises:
        PeerToolError: no Java.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise PeerToolError(
            "java not found: Apache Kafka 4.x needs Java 17+ "
            "(sudo apt-get install openjdk-17-jre-headless)"
        )
    return java


def require(jar_set: JarSet) -> JarSet:
    """``jar_set`` if it was fetched.

    Raises:
        PeerToolError: it was not (the message names the command that fetches it).
    """
    if not jar_set.complete:
        raise PeerToolError(
            f"{jar_set.name} jars {jar_set.version} are not in {jar_set.directory}: "
            "fetch them with: kraft peer kafka fetch"
        )
    return jar_set


def fetch(
    jar_set: JarSet,
    *,
    timeout: float = FETCH_TIMEOUT_S,
    maven_options: Sequence[str] = (),
) -> bool:
    """Copy the set's jars and their runtime dependencies from Maven Central into its
    directory, unless it is complete already; whether it downloaded. ``maven_options`` go to
    Maven as they are (``--offline``).

    Raises:
        PeerToolError: no Maven or Java, or Maven failed (the registry refused, no network):
            the message is Maven's first error line.
    """
    if jar_set.complete:
        return False
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerToolError(
            "mvn not found: fetching Kafka's jars needs Maven (sudo apt-get install maven)"
        )
    find_java()  # Maven runs on it
    if jar_set.directory.exists():
        shutil.rmtree(jar_set.directory)  # an interrupted fetch: start over
    jar_set.directory.parent.mkdir(parents=True, exist_ok=True)
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "-Dstyle.color=never",
        *maven_options,
        "--file",
        str(POM),
        "--activate-profiles",
        jar_set.name,
        f"-Dmaven.repo.local={jar_set.directory.parent / 'm2'}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={jar_set.directory}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PeerToolError(
            f"Maven did not finish fetching {jar_set.name} in {timeout:.0f}s"
        ) from None
    if done.returncode != 0:
        raise PeerToolError(
            f"Maven could not fetch {jar_set.name} {jar_set.version}: {_first_error(done.stdout)}"
        )
    if not jar_set.jars():
        raise PeerToolError(f"Maven copied no jar into {jar_set.directory}")
    (jar_set.directory / _COMPLETE).write_text(f"{jar_set.name} {jar_set.version}\n")
    return True


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if "[ERROR]" in line:
            text = line.split("[ERROR]", 1)[1].strip()
            if text:
                return text[:400]
    return output.strip().splitlines()[-1][:400] if output.strip() else "(no output)"


def installed_pyspark_version() -> str | None:
    """The installed pyspark's version, without importing it (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark")
    except PackageNotFoundError:
        return None


__all__ = [
    "JARS_DIR_ENV",
    "POM",
    "JarSet",
    "PeerToolError",
    "fetch",
    "find_java",
    "installed_pyspark_version",
    "jars_dir",
    "kafka_jars",
    "pom_properties",
    "require",
    "spark_kafka_jars",
]
