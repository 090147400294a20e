"""The metadata workload of a fault run and its checker.

A `MetadataWorker` thread creates topics (``"meta-<worker>-<n>"``, each name used once), deletes
some of the ones it created, and changes their configs (``retention.ms`` set to a unique value)
through the `AdminClient` while the faults run, one operation at a time, recording each
invocation (`MetaOp`) and its outcome (`MetaDone`: ``ok``, or the error). After the heal, the
run records the cluster's own account (`MetaFinal`): every topic that exists and the
``retention.ms`` of each of the worker's topics.

`check_metadata` judges it, as the history checker judges writes:

- **lost_creates**: a create that was acknowledged, of a topic never deleted after, is not in
  the final metadata;
- **resurrected**: a delete that was acknowledged, and the topic is still there;
- **lost_configs**: the final ``retention.ms`` of a live topic is neither the last value an
  acknowledged change set nor a value a later (unacknowledged) change tried;
- **phantom_creates**: a topic in the final metadata that no create was ever attempted for
  (under the workers' prefix).

A failed operation (a timeout, a lost connection, NOT_CONTROLLER exhausted) is indeterminate:
it may or may not have happened, so the checker allows both. TOPIC_ALREADY_EXISTS answering a
create, and UNKNOWN_TOPIC_OR_PARTITION answering a delete, count as acknowledged: names are
used once, so they answer a retry of the worker's own request that went through.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import structlog

from replication.clients.admin import AdminClient
from storage.errors import ErrorCode, KraftError

PREFIX: Final = "meta-"
RETENTION_KEY: Final = "retention.ms"

_logger = structlog.get_logger("replication.nemesis.metadata")


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaOp:
    """A metadata operation invoked: ``op`` is ``create``, ``delete`` or ``config``."""

    kind: ClassVar[str] = "meta_op"
    time_ms: int
    process: str
    op: str
    topic: str
    value: str = ""
    """For ``config``: the ``retention.ms`` it sets."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaDone:
    """The outcome of the process's last `MetaOp`: acknowledged (``ok``) or failed."""

    kind: ClassVar[str] = "meta_done"
    time_ms: int
    process: str
    op: str
    topic: str
    ok: bool
    value: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaFinal:
    """The metadata after the heal: every topic, and ``retention.ms`` of the workers' live
    topics."""

    kind: ClassVar[str] = "meta_final"
    time_ms: int
    topics: tuple[str, ...]
    configs: dict[str, str] = field(default_factory=dict)


MetaOperation = MetaOp | MetaDone | MetaFinal

_SUCCESS_CODES: Final = {
    "create": ErrorCode.TOPIC_ALREADY_EXISTS,
    "delete": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


class MetadataWorker(threading.Thread):
    """Creates, deletes and reconfigures its own topics (see the module docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        record: Callable[[MetaOperation], None],
        clock_ms: Callable[[], int],
        *,
        seed: int,
        replication_factor: int,
        interval_s: float = 0.3,
        timeout_s: float = 15.0,
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._record = record
        self._clock_ms = clock_ms
        self._rng = random.Random(seed)
        self._replication_factor = replication_factor
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._stopping = threading.Event()
        self._admin = AdminClient(bootstrap, timeout=timeout_s, request_timeout=5.0)
        self.live: list[str] = []
        """Topics whose create was attempted and no delete since."""
        self.ops = 0
        self.acknowledged = 0
        self._next = 0

    def run(self) -> None:
        while not self._stopping.wait(self._interval_s * self._rng.uniform(0.5, 1.5)):
            roll = self._rng.random()
            if not self.live or roll < 0.45:
                self._create()
            elif roll < 0.65:
                self._delete()
            else:
                self._config()

    def _create(self) -> None:
        topic = f"{PREFIX}{self.process}-{self._next}"
        self._next += 1
        self.live.append(topic)
        self._do(
            "create",
            topic,
            "",
            lambda: self._admin.create_topic(
                topic, 1, self._replication_factor, timeout=self._timeout_s
            ),
        )

    def _delete(self) -> None:
        topic = self.live.pop(self._rng.randrange(len(self.live)))
        self._do("delete", topic, "", lambda: self._admin.delete_topic(topic))

    def _config(self) -> None:
        topic = self._rng.choice(self.live)
        value = str(3_600_000 + self.ops)
        self._do(
            "config",
            topic,
            value,
            lambda: self._admin.alter_topic_config(topic, {RETENTION_KEY: value}),
        )

    def _do(self, op: str, topic: str, value: str, call: Callable[[], Any]) -> None:
        self.ops += 1
        self._record(
            MetaOp(time_ms=self._clock_ms(), process=self.process, op=op, topic=topic, value=value)
        )
        ok, error = True, ""
        try:
            call()
        except KraftError as e:
            ok = getattr(e, "code", None) is _SUCCESS_CODES.get(op)
            error = "" if ok else f"{type(e).__name__}: {str(e)[:120]}"
        except Exception as e:  # a transport failure: indeterminate
            ok, error = False, f"{type(e).__name__}: {str(e)[:120]}"
        self.acknowledged += ok
        self._record(
            MetaDone(
                time_ms=self._clock_ms(),
                process=self.process,
                op=op,
                topic=topic,
                ok=ok,
                value=value,
                error=error,
            )
        )

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=self._timeout_s + 10)
        self._admin.close()


def read_final_metadata(
    bootstrap: str, topics_of_interest: Iterable[str], clock_ms: Callable[[], int]
) -> MetaFinal:
    """The cluster's account after the heal: every topic, and ``retention.ms`` of each topic
    of ``topics_of_interest`` that exists."""
    with AdminClient(bootstrap, timeout=60.0) as admin:
        topics = tuple(admin.list_topics())
        configs: dict[str, str] = {}
        existing = set(topics)
        for topic in sorted(set(topics_of_interest) & existing):
            for entry in admin.describe_configs("topic", topic):
                if entry.name == RETENTION_KEY:
                    configs[topic] = entry.value or ""
    return MetaFinal(time_ms=clock_ms(), topics=topics, configs=configs)


@dataclass(slots=True)
class MetadataReport:
    """What `check_metadata` found (see the module docstring)."""

    ops: int = 0
    acknowledged: int = 0
    indeterminate: int = 0
    final_topics: int = 0
    lost_creates: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    lost_configs: list[str] = field(default_factory=list)
    phantom_creates: list[str] = field(default_factory=list)

    VIOLATIONS: ClassVar[tuple[str, ...]] = (
        "lost_creates",
        "resurrected",
        "lost_configs",
        "phantom_creates",
    )

    @property
    def valid(self) -> bool:
        return all(not getattr(self, name) for name in self.VIOLATIONS)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ops": self.ops,
            "acknowledged": self.acknowledged,
            "indeterminate": self.indeterminate,
            "final_topics": self.final_topics,
            "valid": self.valid,
        }
        for name in self.VIOLATIONS:
            found: list[str] = getattr(self, name)
            data[name] = {"count": len(found), "examples": found[:20]}
        return data


@dataclass(slots=True)
class _TopicStory:
    create: bool | None = None
    """None: never attempted; True: acknowledged; False: indeterminate."""
    delete: bool | None = None
    configs: list[tuple[str, bool]] = field(default_factory=list)
    """``(value, acknowledged)`` in invocation order."""


def check_metadata(operations: Iterable[object]) -> MetadataReport:
    """Judge the metadata operations of a history (other operations are skipped)."""
    report = MetadataReport()
    stories: dict[str, _TopicStory] = defaultdict(_TopicStory)
    final: MetaFinal | None = None
    for op in operations:
        match op:
            case MetaOp():
                report.ops += 1
                story = stories[op.topic]
                if op.op == "create":
                    story.create = False
                elif op.op == "delete":
                    story.delete = False
                else:
                    story.configs.append((op.value, False))
            case MetaDone():
                story = stories[op.topic]
                if not op.ok:
                    report.indeterminate += 1
                    continue
                report.acknowledged += 1
                if op.op == "create":
                    story.create = True
                elif op.op == "delete":
                    story.delete = True
                else:
                    story.configs = [
                        (value, True) if value == op.value else (value, done)
                        for value, done in story.configs
                    ]
            case MetaFinal():
                final = op
    if final is None:
        return report
    existing = set(final.topics)
    report.final_topics = len(existing)
    for topic, story in sorted(stories.items()):
        present = topic in existing
        if story.create and story.delete is None and not present:
            report.lost_creates.append(f"{topic}: created (acknowledged), never deleted, gone")
        if story.delete and present:
            report.resurrected.append(f"{topic}: deleted (acknowledged), still there")
        if present and story.delete is None and story.configs:
            acked = [i for i, (_, done) in enumerate(story.configs) if done]
            if acked:
                allowed = {value for value, _ in story.configs[acked[-1] :]}
                value = final.configs.get(topic, "")
                if value not in allowed:
                    report.lost_configs.append(
                        f"{topic}: {RETENTION_KEY}={value or 'default'}, expected one of "
                        f"{sorted(allowed)}"
                    )
    for topic in sorted(existing):
        if topic.startswith(PREFIX) and topic not in stories:
            report.phantom_creates.append(f"{topic}: exists, never created")
    return report


__all__ = [
    "PREFIX",
    "RETENTION_KEY",
    "MetaDone",
    "MetaFinal",
    "MetaOp",
    "MetaOperation",
    "MetadataReport",
    "MetadataWorker",
    "check_metadata",
    "read_final_metadata",
]
