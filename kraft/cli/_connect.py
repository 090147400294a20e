"""What the client subcommands (``topics``, ``produce``, ``consume``) share: where the cluster
is (``--bootstrap`` / ``--bootstrap-controller``, else ``KRAFT_BOOTSTRAP`` /
``KRAFT_BOOTSTRAP_CONTROLLER``), how to reach it (mTLS from ``KRAFT_SECURITY_PROTOCOL``,
``KRAFT_SSL_CAFILE``, ``KRAFT_SSL_CERTFILE``, ``KRAFT_SSL_KEYFILE``: `security`, which
``kraft cluster up --tls --detach`` prints), ``key=value`` options, and turning "nobody
answered" into one clear line instead of a hang."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Self

from kraft.arguments import positive_seconds

if TYPE_CHECKING:
    from kraft.controller.client import ControllerClient
    from kraft.controller.messages import DescribeClusterResponse, TopicMetadata
    from replication.clients import AdminClient

BOOTSTRAP_ENV = "KRAFT_BOOTSTRAP"
BOOTSTRAP_CONTROLLER_ENV = "KRAFT_BOOTSTRAP_CONTROLLER"
DEFAULT_TIMEOUT_S = 10.0


def add_bootstrap_arguments(p: argparse.ArgumentParser, *, controller: bool = True) -> None:
    """``--bootstrap`` (brokers) and, if ``controller``, ``--bootstrap-controller``."""
    p.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help=f"broker addresses (default: ${BOOTSTRAP_ENV})",
    )
    if controller:
        p.add_argument(
            "--bootstrap-controller",
            metavar="HOST:PORT[,...]",
            help=f"controller addresses instead of brokers (default: ${BOOTSTRAP_CONTROLLER_ENV})",
        )


def security() -> dict[str, str]:
    """The client's transport settings (kafka-python's names) from the ``KRAFT_*``
    variables; {} for plaintext."""
    from kraft.security.tls import client_security_from_env

    return client_security_from_env()


def add_admin_arguments(p: argparse.ArgumentParser) -> None:
    """An admin action's options: ``--bootstrap`` (brokers), ``--timeout`` and ``--json``."""
    add_bootstrap_arguments(p, controller=False)
    add_timeout_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def action_adder(actions: Any) -> Callable[..., argparse.ArgumentParser]:
    """``action(name, help, *examples)``: a subcommand's action parser on ``actions`` (from
    ``add_subparsers``), its description the help and its epilog the examples."""

    def action(name: str, help_text: str, *examples: str) -> argparse.ArgumentParser:
        return actions.add_parser(  # type: ignore[no-any-return]
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog="example:\n" + "".join(f"  {e}\n" for e in examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    return action


def print_table(header: list[str], rows: list[list[Any]]) -> None:
    """Left-aligned columns, a header line first (as Kafka's tools print)."""
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def add_timeout_argument(p: argparse.ArgumentParser, what: str = "each request") -> None:
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long {what} may take, retries included (default {DEFAULT_TIMEOUT_S:g})",
    )


def broker_bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap``, else ``$KRAFT_BOOTSTRAP``, each address checked to be HOST:PORT.

    Raises:
        ValueError: neither is set, or an address is malformed (the message names it).
    """
    flag: str | None = getattr(args, "bootstrap", None)
    if flag:
        return checked_addresses(flag, "--bootstrap")
    env = os.environ.get(BOOTSTRAP_ENV)
    if env:
        return checked_addresses(env, f"${BOOTSTRAP_ENV}")
    raise ValueError(f"no brokers given: pass --bootstrap HOST:PORT[,...] or set {BOOTSTRAP_ENV}")


def controller_bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap-controller``, else ``$KRAFT_BOOTSTRAP_CONTROLLER``, checked like
    `broker_bootstrap`.

    Raises:
        ValueError: neither is set, or an address is malformed (the message names it).
    """
    flag: str | None = getattr(args, "bootstrap_controller", None)
    if flag:
        return checked_addresses(flag, "--bootstrap-controller")
    env = os.environ.get(BOOTSTRAP_CONTROLLER_ENV)
    if env:
        return checked_addresses(env, f"${BOOTSTRAP_CONTROLLER_ENV}")
    raise ValueError(
        "no controllers given: pass --bootstrap-controller HOST:PORT[,...] "
        f"or set {BOOTSTRAP_CONTROLLER_ENV}"
    )


def checked_addresses(value: str, source: str) -> str:
    """``value`` with every address checked to be HOST:PORT, at once rather than after the
    connect deadline (``source`` names the flag or variable in the error).

    Raises:
        ValueError: an address is malformed.
    """
    from replication.clients.config import parse_bootstrap_servers

    return ",".join(parse_bootstrap_servers(value, source))


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``.

    Raises:
        ValueError: an item is not KEY=VALUE.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@contextmanager
def reachable(where: str, timeout: float) -> Iterator[None]:
    """Turn "nobody answered before the deadline" into one line naming the addresses."""
    from kraft.transport.unreachable import REFUSED_MARKER
    from storage.errors import NetworkError, NotControllerError, RequestTimedOutError

    try:
        yield
    except (NetworkError, RequestTimedOutError) as e:
        if REFUSED_MARKER in e.message:  # known at once, and says so itself
            raise NetworkError(f"cluster unreachable: {e.message}") from None
        detail = "connection refused" if "Connection refused" in e.message else e.message
        raise NetworkError(
            f"cluster unreachable: no answer from {where} within {timeout:g}s ({detail})"
        ) from None
    except NotControllerError as e:
        raise NotControllerError(
            f"no active controller reachable through {where} within {timeout:g}s ({e.message})"
        ) from None


_PROBE_TIMEOUT_S = 1.0
"""How long `refuse_controllers` waits for the bootstrap addresses to answer its probe."""


def refuse_controllers(bootstrap: str, advice: str = "use --bootstrap-controller") -> None:
    """Fail at once, naming the address, when a ``--bootstrap`` address is a kraft controller
    rather than a broker: a controller's port serves no ``Broker`` service, so the clients'
    broker RPCs there answer gRPC UNIMPLEMENTED, which they would retry until their deadline
    and then report as an unknown topic. Like Kafka since KIP-919, which points a client at
    ``bootstrap.controllers`` instead.

    One ListOffsets of nothing per address, all at once; an address that does not answer
    within `_PROBE_TIMEOUT_S`, or answers anything else, is left to the command's own call.

    Raises:
        InvalidConfigError: an address is a controller (the message ends with ``advice``).
    """
    import grpc

    from kraft.security.tls import client_tls_from_env
    from replication.clients.network import BrokerNetwork
    from replication.codec import encode
    from replication.messages import ListOffsetsRequest
    from storage.errors import InvalidConfigError

    network = BrokerNetwork(
        bootstrap, request_timeout_s=_PROBE_TIMEOUT_S, tls=client_tls_from_env()
    )
    try:
        request = encode(ListOffsetsRequest())
        probes = [
            (address, network.stub(address).ListOffsets.future(request, timeout=_PROBE_TIMEOUT_S))
            for address in network.bootstrap
        ]
        for address, probe in probes:
            try:
                probe.result()
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise InvalidConfigError(
                        f"{address} is a kraft controller, not a broker; {advice}"
                    ) from None
    finally:
        network.close()


def describe_topic_on_brokers(
    bootstrap: str, name: str, timeout: float, command: str
) -> TopicMetadata:
    """The topic a client command (``produce``, ``consume``) is about to use, after checking
    that ``bootstrap`` names brokers; one clear line when it cannot.

    Raises:
        InvalidConfigError: a bootstrap address is a controller.
        NetworkError: no broker answered within ``timeout``.
        UnknownTopicOrPartitionError: no such topic.
    """
    from replication.clients import AdminClient

    refuse_controllers(bootstrap, f"{command} needs broker addresses in --bootstrap")
    with (
        AdminClient(bootstrap, timeout=timeout, request_timeout=3.0, **security()) as admin,
        reachable(bootstrap, timeout),
    ):
        return admin.describe_topic(name)


class AdminSession:
    """An `AdminClient` on the brokers, or on the controllers with ``--bootstrap-controller``
    (whose reads then go to the active controller, so a write is visible to the next read).

    Raises:
        ValueError: no address was given.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.timeout: float = args.timeout
        request_timeout = min(self.timeout, 3.0)
        bootstrap = getattr(args, "bootstrap", None)
        controllers = getattr(args, "bootstrap_controller", None)
        if bootstrap and controllers:
            raise ValueError("give --bootstrap or --bootstrap-controller, not both")
        if bootstrap:
            bootstrap = checked_addresses(bootstrap, "--bootstrap")
        elif controllers:
            controllers = checked_addresses(controllers, "--bootstrap-controller")
        elif os.environ.get(BOOTSTRAP_ENV):
            bootstrap = checked_addresses(os.environ[BOOTSTRAP_ENV], f"${BOOTSTRAP_ENV}")
        elif os.environ.get(BOOTSTRAP_CONTROLLER_ENV):
            controllers = checked_addresses(
                os.environ[BOOTSTRAP_CONTROLLER_ENV], f"${BOOTSTRAP_CONTROLLER_ENV}"
            )
        self.where: str = bootstrap or controllers or ""
        if not self.where:
            raise ValueError(
                f"no cluster given: pass --bootstrap HOST:PORT[,...] (brokers) or "
                f"--bootstrap-controller HOST:PORT[,...], or set {BOOTSTRAP_ENV}"
            )
        if bootstrap:
            refuse_controllers(bootstrap)
        # NB: the clients (grpc, protobuf: most of a command's start) only once the addresses
        # passed: a mistake is answered before they load.
        from kraft.controller.client import ControllerClient
        from replication.clients import AdminClient

        self.admin: AdminClient = AdminClient(
            self.where, timeout=self.timeout, request_timeout=request_timeout, **security()
        )
        self._controller: ControllerClient | None = (
            ControllerClient(
                controllers,
                timeout=self.timeout,
                request_timeout=request_timeout,
                tls=self.admin.tls,
                fail_fast=True,
            )
            if controllers
            else None
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.admin.close()
        if self._controller is not None:
            self._controller.close()

    def reachable(self) -> AbstractContextManager[None]:
        return reachable(self.where, self.timeout)

    def describe_cluster(self, topic_names: Sequence[str] | None = None) -> DescribeClusterResponse:
        with self.reachable():
            if self._controller is not None:
                return self._controller.describe_cluster(topic_names=topic_names)
            return self.admin.describe_cluster(topic_names=topic_names)

    def describe_topic(self, name: str) -> TopicMetadata:
        """Raises: UnknownTopicOrPartitionError: no such topic."""
        from storage.errors import ErrorCode, error_for

        (topic,) = self.describe_cluster((name,)).topics
        if topic.error_code is not ErrorCode.NONE:
            raise error_for(topic.error_code, topic.error_message or f"unknown topic {name!r}")
        return topic
