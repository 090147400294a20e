"""The Kafka listener's table: every API served, by key, with its versions and handler (Kafka's
``KafkaApis.handle`` match on the API key), and the two APIs answered from the table itself:
ApiVersions, which advertises exactly these rows, and SaslHandshake.

Versions start at Kafka 4.0's floors (KIP-896) and end where this adapter stops understanding
the schema (ListOffsets' -5 and timeouts, ...): see docs/kafka-compatibility.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import structlog
from kio.schema.errors import ErrorCode as KioErrorCode

from kraft.metadata.features import SUPPORTED_FEATURES
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.admin import ADMIN_HANDLERS
from replication.broker.kafka.apis.classic_groups import CLASSIC_HANDLERS
from replication.broker.kafka.apis.fetch import handle_fetch
from replication.broker.kafka.apis.groups import GROUP_HANDLERS
from replication.broker.kafka.apis.metadata import handle_describe_cluster, handle_metadata
from replication.broker.kafka.apis.offsets import handle_list_offsets
from replication.broker.kafka.apis.produce import handle_init_producer_id, handle_produce
from replication.broker.kafka.apis.txn import TXN_HANDLERS
from replication.broker.kafka.frames import Request
from storage.errors import ErrorCode

_log = structlog.get_logger("replication.broker.kafka")

# -- ApiVersions, SaslHandshake -------------------------------------------------------------------


async def handle_api_versions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    epoch, finalized = api.finalized_features()
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": key, "min_version": spec.min_version, "max_version": spec.max_version}
            for key, spec in sorted(HANDLERS.items())
        ],
        # KIP-584: the features this broker runs and the levels the controller finalized
        # (`kraft.metadata.features`); below v4 a feature whose minimum is 0 is left out, as
        # Kafka does (older clients refuse a 0 minimum).
        "supported_features": [
            {"name": name, "min_version": low, "max_version": high}
            for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
            if low > 0 or request.api_version >= 4
        ],
        "finalized_features_epoch": epoch,
        "finalized_features": [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(finalized.items())
            if level > 0
        ],
    }


async def handle_sasl_handshake(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    """A listener without SASL: no mechanism is enabled. The broker says why in its log, as it
    does for a TLS handshake on a plaintext listener (kafka-python only times out)."""
    _log.warning(
        "kafka_sasl_refused",
        listener=ctx.listener,
        peer=ctx.client_host,
        mechanism=str(request.body.mechanism),
        reason="a SASL handshake on a listener without SASL; kraft authenticates Kafka clients "
        "by TLS client certificate: use security.protocol=SSL (or PLAINTEXT), not SASL_*",
    )
    return {"error_code": KioErrorCode.unsupported_sasl_mechanism, "mechanisms": []}


HANDLERS: Final[Mapping[int, ApiSpec]] = {
    0: ApiSpec("Produce", 3, 13, handle_produce),
    1: ApiSpec("Fetch", 4, 18, handle_fetch),
    2: ApiSpec("ListOffsets", 1, 8, handle_list_offsets),
    3: ApiSpec("Metadata", 0, 12, handle_metadata),
    17: ApiSpec("SaslHandshake", 0, 1, handle_sasl_handshake),
    18: ApiSpec("ApiVersions", 0, 4, handle_api_versions),
    22: ApiSpec("InitProducerId", 0, 5, handle_init_producer_id),
    60: ApiSpec("DescribeCluster", 0, 1, handle_describe_cluster),
    **GROUP_HANDLERS,
    **ADMIN_HANDLERS,
    **CLASSIC_HANDLERS,
    **TXN_HANDLERS,
}
"""API key -> name, the versions served, the handler: the dispatch table and ApiVersions."""

SUPPORTED_VERSIONS: Final[Mapping[int, tuple[int, int]]] = {
    key: (spec.min_version, spec.max_version) for key, spec in HANDLERS.items()
}

__all__ = ["HANDLERS", "SUPPORTED_VERSIONS"]
