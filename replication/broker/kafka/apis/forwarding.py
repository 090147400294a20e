"""Admin requests from the Kafka listener to the controller, with Kafka's per-resource errors.

The broker API's ``forward`` (`replication.broker.api.BrokerApi.forward`) authorizes an admin
request and sends it to the active controller (KIP-590); it raises for a request refused whole
(TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED) or a controller out of reach. A Kafka client
expects an answer instead, with a code per topic or resource: `forward` gives an `Outcome`,
and `forward_parts` sends a refused request of several resources again one resource at a time,
so each resource gets its own answer, as Kafka authorizes per resource.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from replication.broker.api import RequestContext
from replication.broker.kafka.api import KafkaBrokerApi
from replication.messages import MetadataRequest, MetadataTopic
from storage.errors import ErrorCode, KraftError

T = TypeVar("T")

REFUSALS: Final = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
)
"""The codes of a request refused whole by the broker API's authorization."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A forwarded request's answer, or why there is none (``response`` None)."""

    response: Any
    code: ErrorCode = ErrorCode.NONE
    message: str = ""


async def forward(api: KafkaBrokerApi, request: object, ctx: RequestContext) -> Outcome:
    """``request`` to the controller; a refusal or a failure as its code (a retriable one,
    the controller out of reach, the client retries)."""
    try:
        return Outcome(await api.forward(request, ctx))
    except KraftError as e:
        return Outcome(None, e.code, e.message)


async def forward_parts(
    api: KafkaBrokerApi,
    ctx: RequestContext,
    parts: Sequence[T],
    request_of: Callable[[Sequence[T]], object],
) -> list[tuple[Sequence[T], Outcome]]:
    """``parts`` forwarded as one request; refused whole, each part as its own request (a
    resource refused gets its code, the others their answers). No request for no parts."""
    if not parts:
        return []
    whole = await forward(api, request_of(parts), ctx)
    if whole.response is not None or whole.code not in REFUSALS or len(parts) == 1:
        return [(parts, whole)]
    return [((p,), await forward(api, request_of((p,)), ctx)) for p in parts]


def error(code: int, message: str | None) -> dict[str, Any]:
    """A response's ``error_code`` and ``error_message`` (null when there is none)."""
    return {"error_code": code, "error_message": message or None}


METADATA_WAIT_MAX_S: Final = 10.0
"""The longest a topic change waits to show in this broker's metadata."""
METADATA_POLL_S: Final = 0.02


async def await_metadata(
    api: KafkaBrokerApi,
    ctx: RequestContext,
    shown: Mapping[str, Callable[[MetadataTopic | None], bool]],
    timeout_s: float,
) -> None:
    """Until ``shown[name](topic)`` holds for every topic in this broker's metadata (None for
    a topic it does not know), or ``timeout_s`` (at most `METADATA_WAIT_MAX_S`) passes.

    The controller answers a topic change once committed; the broker learns it a moment
    later. A Kafka client describes or produces right after its create and expects the topic
    (Kafka's ZooKeeper-era broker waited for its metadata cache the same way), so the answer
    waits for this broker's image. A timeout is no error: the change is made.
    """
    if not shown:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(timeout_s, 0.0), METADATA_WAIT_MAX_S)
    names = tuple(sorted(shown))
    while True:
        answer = await api.metadata(MetadataRequest(topics=names), ctx)
        known = {t.name: t for t in answer.topics if t.error_code == ErrorCode.NONE}
        # NB: a topic hidden from the caller (TOPIC_AUTHORIZATION_FAILED) is not waited for.
        hidden = {
            t.name
            for t in answer.topics
            if t.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        }
        if all(name in hidden or check(known.get(name)) for name, check in shown.items()):
            return
        if loop.time() >= deadline:
            return
        await asyncio.sleep(METADATA_POLL_S)


__all__ = ["REFUSALS", "Outcome", "await_metadata", "error", "forward", "forward_parts"]
