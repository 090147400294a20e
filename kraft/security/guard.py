"""Authorization of every call a node serves: `AccessGuard` (the decision) and `AuthorizeCalls`
(the grpc.aio server interceptor that applies it before any servicer runs).

*Who.* The principal comes from the connection: the client certificate's subject through
``ssl.principal.mapping.rules`` (`kraft.security.principals`), ``User:ANONYMOUS`` without one;
the host is the peer's IP address (``context.peer()``), as Kafka's ACL hosts are.

*What.* `kraft.security.operations` says what each RPC needs; the `Authorizer` of the node's
ACLs decides. The guard rebuilds its `Authorizer` whenever the ACL mapping of the node's image
changes (a broker's metadata image, a controller's committed image): a created or removed ACL
applies on a node as soon as that node has replayed the record.

*Refusal.* gRPC PERMISSION_DENIED with ``TOPIC_AUTHORIZATION_FAILED: ...`` (or GROUP_,
CLUSTER_); clients raise the matching `storage.errors` class (`authorization_error`). Listings
are filtered instead (`kraft.security.operations.filter_response`), and a request naming
topics of which only some are refused is answered per topic, as Kafka does: the servicer runs
without the refused ones, which get TOPIC_AUTHORIZATION_FAILED in its response
(`kraft.security.per_topic`).

*Nodes.* Node-to-node RPCs need CLUSTER_ACTION on the cluster, which super users have: over
TLS, list the nodes' certificate principals in ``super.users``. On a plaintext listener every
caller is ``User:ANONYMOUS`` and a node cannot be told from a client, so node-to-node RPCs are
let through there (else a plaintext cluster with the authorizer on could not elect a controller
or register a broker, and the ACLs themselves live in the log that Raft replicates): with
plaintext, authorization restrains well-behaved clients only; it is meaningful with TLS.

*Forwarding.* A broker checks a forwarded admin request itself, with the same ACLs (its image),
before forwarding it; the controller then sees the broker's principal. Kafka instead forwards
the client's principal in an envelope (KIP-590).

Without ``authorizer.class.name`` the interceptor does not wrap anything: no cost.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, final

import grpc
import structlog

from kraft.security.acls import ANONYMOUS, AclBinding
from kraft.security.authorizer import Authorizer
from kraft.security.operations import (
    PUBLIC_SERVICES,
    Need,
    Requirement,
    api_requirement,
    error_of,
    filter_response,
    filters,
    requirement,
    rule_key,
)
from kraft.security.per_topic import answer_refused, without
from kraft.security.principals import MappingRule, principal_of_auth_context
from kraft.security.settings import AuthorizationSettings
from storage.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    KraftError,
    TopicAuthorizationFailedError,
)

_log = structlog.get_logger("kraft.security.guard")

_QUOTE_MAX: Final = 80


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the principal, the peer's IP address, and whether over TLS."""

    principal: str
    host: str
    tls: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What the guard decided for one call: refused whole (``refusal``), or allowed with the
    named items in ``refused_topics`` answered ``code`` (per topic, per group, per key)."""

    refusal: Refusal | None = None
    refused_topics: frozenset[str] = frozenset()
    why: str = ""
    """The refused topics' message, before the topic's quoted name."""
    code: ErrorCode = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    """The refused items' error (TOPIC_ or GROUP_AUTHORIZATION_FAILED, ...)."""


_ALLOWED: Final = Decision()


def service_of(method: str) -> str:
    """``/kraft.v1.Broker/Produce`` -> ``kraft.v1.Broker``."""
    return method.lstrip("/").split("/")[0]


def peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5555`` -> ``127.0.0.1``; ``ipv6:[::1]:5555`` -> ``::1``."""
    _, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] if ":" in rest else rest
    return host.strip("[]")


_PRINCIPALS_CACHED: Final = 4096
"""Certificates whose mapped principal is remembered (parsing one costs tens of µs)."""


@functools.lru_cache(maxsize=_PRINCIPALS_CACHED)
def principal_of_certificate(certificate: bytes, rules: tuple[MappingRule, ...]) -> str:
    """The principal of a caller presenting the (verified) PEM ``certificate``: its subject
    through ``rules``, or ``User:ANONYMOUS`` when no rule maps it. gRPC calls and Kafka SSL
    connections both come here."""
    return principal_of_auth_context({"x509_pem_cert": (certificate,)}, rules)


def caller_of(context: Any, settings: AuthorizationSettings) -> Caller:
    """The `Caller` of a grpc.aio call."""
    auth = context.auth_context() or {}
    tls = b"ssl" in (auth.get("transport_security_type") or ())
    certificates = auth.get("x509_pem_cert") or ()
    principal = (
        principal_of_certificate(certificates[0], settings.principal_rules)
        if tls and certificates
        else ANONYMOUS
    )
    return Caller(principal, peer_host(str(context.peer() or "")), tls)


class ImageView(Protocol):
    """What the guard reads of a metadata image (`kraft.metadata.MetadataImage`)."""

    @property
    def acls(self) -> Mapping[str, AclBinding]: ...

    def topic_by_id(self, topic_id: str) -> Any: ...


@final
class AccessGuard:
    """Decides the calls of one node.

    Args:
        settings: the node's authorization keys.
        image: the node's current metadata image (a broker's image, a controller's committed
            image), read on every call: its ACLs, and topic names for DeleteTopics by id.
    """

    def __init__(self, settings: AuthorizationSettings, image: Callable[[], ImageView]) -> None:
        self.settings = settings
        self._image = image
        self._built_from: Mapping[str, AclBinding] | None = None
        self._authorizer = Authorizer((), settings.authorizer)

    def topic_name(self, topic_id: str) -> str | None:
        """The name of topic ``topic_id`` in the node's image (None: unknown)."""
        topic = self._image().topic_by_id(topic_id)
        return None if topic is None else str(topic.name)

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def authorizer(self) -> Authorizer:
        """The `Authorizer` of the current ACLs (rebuilt when the image's ACLs changed)."""
        acls = self._image().acls
        if acls is not self._built_from:
            self._authorizer = Authorizer(acls.values(), self.settings.authorizer)
            self._built_from = acls
        return self._authorizer

    def may(self, caller: Caller, need: Need) -> bool:
        authorizer = self.authorizer()
        if need.name is None:
            return authorizer.authorize_any(
                caller.principal, caller.host, need.operation, need.resource_type
            )
        return authorizer.authorize(
            caller.principal, caller.host, need.operation, need.resource_type, need.name
        )

    def check(self, method: str, request: Any, caller: Caller) -> Refusal | None:
        """None when ``caller`` may call ``method`` with ``request`` (perhaps with some of
        its topics refused: `decide`), else why not."""
        return self.decide(method, request, caller).refusal

    def decide(self, method: str, request: Any, caller: Caller) -> Decision:
        """Whether ``caller`` may call ``method`` with ``request``, whole or per topic."""
        if not self.enabled or method.lstrip("/").split("/")[0] in PUBLIC_SERVICES:
            return _ALLOWED
        return self._decide(method, requirement(method, request, self.topic_name), caller)

    def decide_api(self, api: str, request: Any, caller: Caller) -> Decision:
        """Whether ``caller`` may send ``request`` (a dataclass) to the Kafka API ``api``
        (``Produce``, ``CreateTopics``, ...), whole or per topic: the broker's API layer
        (`replication.broker.api`) asks this, by API name rather than gRPC method."""
        if not self.enabled:
            return _ALLOWED
        return self._decide(api, api_requirement(api, request, self.topic_name), caller)

    def _decide(self, what: str, required: Requirement | None, caller: Caller) -> Decision:
        if required is None:
            return Decision(
                Refusal(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    f"{what[:_QUOTE_MAX]} is not an authorized method",
                )
            )
        if required.node and not caller.tls:
            return _ALLOWED  # plaintext: nodes cannot be told from clients (module docstring)
        topics = required.topics or (None,) * len(required.groups)
        first: tuple[Need, Refusal] | None = None
        refused: dict[str, None] = {}
        for group, topic in zip(required.groups, topics, strict=True):
            if not any(self.may(caller, need) for need in group):
                refusal = self._refusal(caller, group[0])
                if topic is None:
                    return Decision(refusal)
                first = first or (group[0], refusal)
                refused[topic] = None
        if first is None:
            return _ALLOWED
        need, refusal = first
        if len(refused) == len({t for t in topics if t is not None}):
            return Decision(refusal)  # nothing left to answer: refused whole
        who = f"{caller.principal[:_QUOTE_MAX]} (from {caller.host})"
        why = f"{who} may not {need.operation.name} {need.resource_type.name.lower()}"
        return Decision(refused_topics=frozenset(refused), why=why, code=refusal.code)

    @staticmethod
    def _refusal(caller: Caller, need: Need) -> Refusal:
        what = (
            f"any {need.resource_type.name.lower()}"
            if need.name is None
            else f"{need.resource_type.name.lower()} {need.name[:_QUOTE_MAX]!r}"
        )
        return Refusal(
            error_of(need),
            f"{caller.principal[:_QUOTE_MAX]} (from {caller.host}) may not "
            f"{need.operation.name} {what}",
        )

    def filter(self, method: str, request: Any, response: Any, caller: Caller) -> None:
        """Hide from ``response`` what ``caller`` may not describe (listings only)."""
        if self.enabled and filters(method):
            filter_response(method, request, response, lambda need: self.may(caller, need))


def authorization_error(detail: str) -> KraftError:
    """The client's error for a PERMISSION_DENIED answer (``CODE_NAME: message``)."""
    name = detail.partition(":")[0].strip()
    classes: dict[str, type[KraftError]] = {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED.name: TopicAuthorizationFailedError,
        ErrorCode.GROUP_AUTHORIZATION_FAILED.name: GroupAuthorizationFailedError,
    }
    return classes.get(name, ClusterAuthorizationFailedError)(detail)


async def _refuse(context: Any, refusal: Refusal, method: str, caller: Caller) -> None:
    _log.info(
        "call_refused",
        method=method,
        principal=caller.principal[:_QUOTE_MAX],
        host=caller.host,
        error=refusal.code.name,
    )
    detail = f"{refusal.code.name}: {refusal.message}"
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, detail)


async def _answer_per_topic(
    guard: AccessGuard,
    behaviour: Callable[[Any, Any], Awaitable[Any]],
    method: str,
    request: Any,
    context: Any,
    caller: Caller,
    decision: Decision,
) -> Any:
    """Run ``behaviour`` without the refused topics, then answer those TOPIC_AUTHORIZATION_
    FAILED in its response (`kraft.security.per_topic`)."""
    key, refused = rule_key(method), decision.refused_topics
    _log.info(
        "topics_refused",
        method=method,
        principal=caller.principal[:_QUOTE_MAX],
        host=caller.host,
        topics=sorted(t[:_QUOTE_MAX] for t in refused)[:10],
    )
    response = await behaviour(without(key, request, refused, guard.topic_name), context)
    answer_refused(
        key,
        request,
        refused,
        response,
        lambda topic: f"{decision.why} {topic[:_QUOTE_MAX]!r}",
        guard.topic_name,
    )
    guard.filter(method, request, response, caller)
    return response


@final
class AuthorizeCalls(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Applies an `AccessGuard` to every async method of the server (see the module doc)."""

    def __init__(self, guard: AccessGuard, skip: Collection[str] = ()) -> None:
        """``skip``: the services (``kraft.v1.Broker``) whose API layer authorizes its own
        requests (a broker's `replication.broker.api`); their calls pass unchecked here."""
        self._guard = guard
        self._skip = frozenset(skip)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        guard, method = self._guard, handler_call_details.method
        if handler is None or not guard.enabled or service_of(method) in self._skip:
            return handler
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            behaviour = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                caller = caller_of(context, guard.settings)
                decision = guard.decide(method, request, caller)
                if decision.refusal is not None:
                    await _refuse(context, decision.refusal, method, caller)
                if decision.refused_topics:
                    return await _answer_per_topic(
                        guard, behaviour, method, request, context, caller, decision
                    )
                response = await behaviour(request, context)
                guard.filter(method, request, response, caller)
                return response

            return grpc.unary_unary_rpc_method_handler(
                unary, handler.request_deserializer, handler.response_serializer
            )
        if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
            stream_behaviour = handler.stream_stream

            async def stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                caller = caller_of(context, guard.settings)
                refusal = guard.check(method, None, caller)
                if refusal is not None:
                    await _refuse(context, refusal, method, caller)
                async for response in stream_behaviour(requests, context):
                    yield response

            return grpc.stream_stream_rpc_method_handler(
                stream, handler.request_deserializer, handler.response_serializer
            )
        return handler  # sync (health) or shapes kraft does not serve


__all__ = [
    "AccessGuard",
    "AuthorizeCalls",
    "Caller",
    "Decision",
    "Refusal",
    "authorization_error",
    "caller_of",
    "peer_host",
    "principal_of_certificate",
    "service_of",
]
