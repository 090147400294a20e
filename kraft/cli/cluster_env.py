"""The client side of a ``kraft cluster up`` cluster's security: which certificates it makes
(``--tls-clients``), who is a super user (``--authorizer``), what cluster.json says about them,
and ``kraft cluster env``, which prints the ``export`` lines that point the other commands at the
cluster as one of its client identities::

    eval "$(kraft cluster env --data-dir /tmp/kc)"                 # the default identity
    eval "$(kraft cluster env --data-dir /tmp/kc --client alice)"  # alice's certificate

cluster.json holds ``security`` (the default client settings, kafka-python's names: the
``admin`` certificate's with ``--authorizer``, a super user, so an operator's commands work at
once; the ``client`` certificate's with ``--tls`` alone), ``clients`` (the settings of every
client certificate, by name) and ``super_users``. A Kafka client on ``kafka_bootstrap`` (SSL
with ``--tls``) takes the same files: kafka-python and aiokafka the ``security`` settings as
they are, librdkafka ``security.protocol``, ``ssl.ca.location``, ``ssl.certificate.location``
and ``ssl.key.location`` (`kraft.security.tls.KAFKA_CLIENT_ENV`).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster

_EPILOG = """\
examples:
  eval "$(kraft cluster env --data-dir /tmp/kraft)"
  eval "$(kraft cluster env --data-dir /tmp/kraft --client alice)"

Prints KRAFT_BOOTSTRAP, KRAFT_BOOTSTRAP_CONTROLLER, KAFKA_BOOTSTRAP_SERVERS (the brokers'
Kafka listeners, for any Kafka client) and, for a --tls cluster,
KRAFT_SECURITY_PROTOCOL and KRAFT_SSL_CAFILE / _CERTFILE / _KEYFILE, and the same identity
for a Kafka client on the (SSL) Kafka listeners: KAFKA_SECURITY_PROTOCOL=SSL,
KAFKA_SSL_CA_LOCATION, KAFKA_SSL_CERTIFICATE_LOCATION, KAFKA_SSL_KEY_LOCATION (librdkafka's
ssl.ca.location ...; kafka-python's ssl_cafile ...), as export lines, from the cluster's
cluster.json. Without --client: the default identity (with --authorizer, "admin",
a super user; else "client"). With --client NAME: that client certificate's (client, admin,
or one made by --tls-clients).
"""


def check_security_arguments(args: argparse.Namespace) -> None:
    """Refuse ``--authorizer`` and ``--tls-clients`` without ``--tls``, in one line.

    Raises:
        ValueError: one of them is given without ``--tls``.
    """
    if getattr(args, "authorizer", False) and not args.tls:
        raise ValueError(
            "--authorizer needs --tls: without client certificates every caller is "
            "User:ANONYMOUS (kraft has no SASL), so no principal could be granted anything"
        )
    if tls_client_names(args) and not args.tls:
        raise ValueError("--tls-clients needs --tls (they are TLS client certificates)")


def tls_client_names(args: argparse.Namespace) -> tuple[str, ...]:
    """``--tls-clients a,b`` -> ``("a", "b")``."""
    text: str = getattr(args, "tls_clients", "") or ""
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def security_info(cluster: LocalCluster) -> dict[str, Any]:
    """cluster.json's ``security``, ``clients`` and ``super_users`` (see the module doc)."""
    names = [] if cluster.certs is None else [c.name for c in cluster.certs.clients]
    return {
        "security": cluster.admin_security,
        "clients": {name: cluster.client_security_of(name) for name in names},
        "super_users": cluster.super_users if cluster.authorizer else [],
    }


def identity_note(info: dict[str, Any], data_dir: Path) -> str:
    """A line for ``up --detach`` naming the identity its exports give (with an authorizer)."""
    if not info.get("super_users"):
        return ""
    others = sorted(n for n in info.get("clients", {}) if n != "admin")
    return (
        "  (the admin certificate: a super user; as another client, one of "
        f"{', '.join(others)}:\n"
        f'   eval "$(kraft cluster env --data-dir {data_dir} --client NAME)")\n'
    )


def add_parser(csub: Any, data_dir_argument: Callable[[argparse.ArgumentParser], None]) -> None:
    p = csub.add_parser(
        "env",
        help="print export lines for the other commands (bootstrap, TLS identity)",
        description="Print the KRAFT_* variables that point the other commands at the "
        "cluster in --data-dir, as one of its client identities.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data_dir_argument(p)
    p.add_argument(
        "--client",
        metavar="NAME",
        help="the client certificate to use (default: cluster.json's security)",
    )
    p.set_defaults(handler=env)


def env(args: argparse.Namespace) -> int:
    from kraft.cli.cluster import _read_info
    from kraft.security.tls import security_exports

    data_dir = Path(args.data_dir).resolve()
    info = _read_info(data_dir)
    settings: dict[str, str] = info.get("security") or {}
    if args.client is not None:
        clients: dict[str, dict[str, str]] = info.get("clients") or {}
        if not clients:
            raise ValueError(
                f"the cluster in {data_dir} has no client certificates (started without --tls)"
            )
        if args.client not in clients:
            raise ValueError(
                f"no client certificate {args.client[:40]!r} in {data_dir}; there are: "
                f"{', '.join(sorted(clients))} (more with kraft cluster up --tls-clients)"
            )
        settings = clients[args.client]
    lines = [
        f"KRAFT_BOOTSTRAP={info['bootstrap']}",
        f"KRAFT_BOOTSTRAP_CONTROLLER={info['controller_bootstrap']}",
        *(
            [f"KAFKA_BOOTSTRAP_SERVERS={info['kafka_bootstrap']}"]
            if info.get("kafka_bootstrap")
            else []
        ),
        *security_exports(settings),
    ]
    for line in lines:
        name, _, value = line.partition("=")
        print(f"export {name}={shlex.quote(value)}")
    return 0
