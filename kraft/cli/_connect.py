"""What the client subcommands (``topics``, ``produce``, ``consume``) share: where the cluster
is (``--bootstrap`` / ``--bootstrap-controller``, else ``KRAFT_BOOTSTRAP`` /
``KRAFT_BOOTSTRAP_CONTROLLER``), ``key=value`` options, and turning "nobody answered" into one
clear line instead of a hang."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from kraft.controller.client import ControllerClient
    from kraft.transport.controller_codec import DescribeClusterResponse, TopicMetadata
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


def add_timeout_argument(p: argparse.ArgumentParser, what: str = "each request") -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long {what} may take, retries included (default {DEFAULT_TIMEOUT_S:g})",
    )


def broker_bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap``, else ``$KRAFT_BOOTSTRAP``.

    Raises:
        ValueError: neither is set.
    """
    bootstrap: str | None = getattr(args, "bootstrap", None) or os.environ.get(BOOTSTRAP_ENV)
    if not bootstrap:
        raise ValueError(
            f"no brokers given: pass --bootstrap HOST:PORT[,...] or set {BOOTSTRAP_ENV}"
        )
    return bootstrap


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
    from storage.errors import NetworkError, NotControllerError, RequestTimedOutError

    try:
        yield
    except (NetworkError, RequestTimedOutError) as e:
        detail = "connection refused" if "Connection refused" in e.message else e.message
        raise NetworkError(
            f"cluster unreachable: no answer from {where} within {timeout:g}s ({detail})"
        ) from None
    except NotControllerError as e:
        raise NotControllerError(
            f"no active controller reachable through {where} within {timeout:g}s ({e.message})"
        ) from None


class AdminSession:
    """An `AdminClient` on the brokers, or on the controllers with ``--bootstrap-controller``
    (whose reads then go to the active controller, so a write is visible to the next read).

    Raises:
        ValueError: no address was given.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        from kraft.controller.client import ControllerClient
        from replication.clients import AdminClient

        self.timeout: float = args.timeout
        request_timeout = min(self.timeout, 3.0)
        bootstrap = getattr(args, "bootstrap", None)
        controllers = getattr(args, "bootstrap_controller", None)
        if not bootstrap and not controllers:
            bootstrap = os.environ.get(BOOTSTRAP_ENV)
            controllers = None if bootstrap else os.environ.get(BOOTSTRAP_CONTROLLER_ENV)
        if bootstrap and controllers:
            raise ValueError("give --bootstrap or --bootstrap-controller, not both")
        self.where: str = bootstrap or controllers or ""
        if not self.where:
            raise ValueError(
                f"no cluster given: pass --bootstrap HOST:PORT[,...] (brokers) or "
                f"--bootstrap-controller HOST:PORT[,...], or set {BOOTSTRAP_ENV}"
            )
        self.admin: AdminClient = AdminClient(
            self.where, timeout=self.timeout, request_timeout=request_timeout
        )
        self._controller: ControllerClient | None = (
            ControllerClient(controllers, timeout=self.timeout, request_timeout=request_timeout)
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
