"""`RequestContext`: who asks, from where, through which listener, with which API and version."""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a transport knows of a request besides its body (Kafka's ``RequestContext``).

    ``principal`` is ``User:...`` (the client certificate's subject mapped through
    ``ssl.principal.mapping.rules``, or ``User:ANONYMOUS``); ``client_host`` the peer's IP
    address, as Kafka's ACL hosts are; ``listener`` the listener's name (``PLAINTEXT``,
    ``SSL``, ...); ``client_id`` the client's ``client.id`` (a Kafka request header's, or the
    ``kafka-client-id`` metadata of a gRPC call); ``api`` Kafka's API name (``Produce``,
    ``Fetch``, ``CreateTopics``, ...); ``api_version`` the version the client sent (-1 where a
    transport has none, as gRPC); ``file_regions`` whether the transport sends a consumer
    Fetch's records from `storage.file_region.FileRegion`s (a plaintext Kafka listener, with
    ``sendfile``) rather than bytes.
    """

    principal: str = ANONYMOUS
    client_host: str = ""
    listener: str = ""
    client_id: str = ""
    api: str = ""
    api_version: int = -1
    security_protocol: str = "PLAINTEXT"
    file_regions: bool = False
