"""What ``kraft cluster up`` checks before it starts anything, so a mistake is one line at once
rather than a node that dies seconds later: the ports (taken ones named; stable defaults when
free), the nodes an earlier run left in the data directory, and the one line a supervisor that
failed wrote last.

Ports: with ``--base-port P`` the controllers listen on P, P+1, ..., the brokers on the ports
after them, the metrics endpoints after those, and the brokers' Kafka listeners last; every one
must be free. Without it the cluster takes the same layout placed so that the first Kafka
listener is on `DEFAULT_FIRST_BROKER_PORT` (9092, where a Kafka client looks first; without
Kafka listeners, the first broker), so the bootstrap addresses are the same at every start and a
shell that exported them once keeps working; when one of those ports is taken (another cluster
runs), it takes free ports instead and says that its addresses change at every start.
"""

from __future__ import annotations

import contextlib
import errno
import re
import socket
import sys
from pathlib import Path
from typing import Final

DEFAULT_FIRST_BROKER_PORT: Final = 9092
"""The first Kafka listener's port (or the first broker's, without Kafka listeners) when
``--base-port`` is not given and the ports are free."""
_HOST = "127.0.0.1"


def port_taken(port: int, host: str = _HOST) -> bool:
    """Whether something listens on ``host:port`` (a bind fails), as gRPC's own bind would
    find it: with SO_REUSEADDR, so a port in TIME_WAIT counts as free.

    Raises:
        OSError: the bind failed for another reason (a port below 1024, an unknown host).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def port_roles(controllers: int, brokers: int, *, metrics: bool, kafka: bool = True) -> list[str]:
    """What each port from the base port on is for, in order (``controller 1``, ...), as
    `kraft.cluster.addresses.plan_addresses` lays them out."""
    nodes = [*(f"controller {i}" for i in range(1, controllers + 1))]
    nodes += [f"broker {100 + i}" for i in range(1, brokers + 1)]
    roles = list(nodes)
    if metrics:
        roles += [f"the metrics endpoint of {n}" for n in nodes]
    if kafka:
        roles += [f"the Kafka listener of broker {100 + i}" for i in range(1, brokers + 1)]
    return roles


def choose_base_port(
    controllers: int, brokers: int, *, metrics: bool, base_port: int | None, kafka: bool = True
) -> int | None:
    """The ``--base-port`` to start with (None: free ports), after checking that its ports are
    free (see the module docstring).

    Raises:
        ValueError: ``base_port`` was given and one of its ports is taken or out of range
            (the message names the port, what it was for, and the way out).
    """
    if base_port is not None:
        roles = port_roles(controllers, brokers, metrics=metrics, kafka=kafka)
        last = base_port + len(roles) - 1
        if last > 65535:
            raise ValueError(
                f"--base-port {base_port}: the cluster needs {len(roles)} ports, up to {last}, "
                f"past 65535; give a lower --base-port"
            )
        for offset, role in enumerate(roles):
            port = base_port + offset
            try:
                taken = port_taken(port)
            except OSError as e:
                raise ValueError(
                    f"cannot listen on {_HOST}:{port} ({role}): {e.strerror}; give another "
                    "--base-port, or leave it out"
                ) from None
            if taken:
                raise ValueError(
                    f"port {port} ({role}) is taken: something already listens on "
                    f"{_HOST}:{port}; stop it, give another --base-port (this cluster needs "
                    f"{base_port}-{last}), or leave --base-port out"
                )
        return base_port
    roles = port_roles(controllers, brokers, metrics=metrics, kafka=kafka)
    first = len(roles) - brokers if kafka and brokers else controllers
    default = DEFAULT_FIRST_BROKER_PORT - first
    busy = [default + i for i in range(len(roles)) if _taken_or_forbidden(default + i)]
    if not busy:
        return default
    print(
        f"kraft cluster up: port {busy[0]} of the default ports {default}-"
        f"{default + len(roles) - 1} is taken, so this cluster listens on free ports, which "
        "change at every start: read them with kraft cluster env",
        file=sys.stderr,
    )
    return None


def _taken_or_forbidden(port: int) -> bool:
    try:
        return port_taken(port)
    except OSError:
        return True


_NODE_DIR = re.compile(r"^(controller|broker)-(\d+)$")


def check_earlier_nodes(data_dir: Path, controllers: int, brokers: int) -> None:
    """Refuse to start fewer nodes than an earlier run left data for in ``data_dir``: the
    partitions whose replicas live on a broker not started would stay offline, and a missing
    controller's vote could be the quorum's, so the cluster would wait out --wait-timeout and
    then say so. Ids are LocalCluster's: controllers 1..N, brokers 101...

    Raises:
        ValueError: ``data_dir`` holds a ``controller-N`` or ``broker-N`` directory beyond
            ``controllers`` / ``brokers`` (the message gives the command that starts them).
    """
    found: dict[str, list[int]] = {"controller": [], "broker": []}
    with contextlib.suppress(OSError):
        for entry in data_dir.iterdir():
            match = _NODE_DIR.match(entry.name)
            if match and entry.is_dir() and any(entry.iterdir()):
                found[match.group(1)].append(int(match.group(2)))
    extra_controllers = sorted(i for i in found["controller"] if i > controllers)
    extra_brokers = sorted(i for i in found["broker"] if i > 100 + brokers)
    if not extra_controllers and not extra_brokers:
        return
    had_controllers = max([controllers, *found["controller"]])
    had_brokers = max([brokers, *(i - 100 for i in found["broker"])])
    missing = [
        *(f"controller {i}" for i in extra_controllers),
        *(f"broker {i}" for i in extra_brokers),
    ]
    raise ValueError(
        f"{data_dir} holds the data of {', '.join(missing)}, which --controllers {controllers} "
        f"--brokers {brokers} would not start (their replicas and votes would be missing); "
        f"start all of them with --controllers {had_controllers} --brokers {had_brokers}, or "
        "use a new --data-dir"
    )


def supervisor_failure(log_path: Path, start: int) -> str | None:
    """The one line a failed supervisor wrote last to ``log_path`` after ``start`` (its
    ``kraft: error:`` line, without the prefix), or None."""
    try:
        with log_path.open("rb") as f:
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("kraft: error: "):
            return line.removeprefix("kraft: error: ")
    return None


def without_error_prefixes(text: str) -> str:
    """``text`` without the ``kraft: error:`` a node's last log line starts with, so a line
    that quotes it does not say it twice."""
    return text.replace("kraft: error: ", "")


__all__ = [
    "DEFAULT_FIRST_BROKER_PORT",
    "check_earlier_nodes",
    "choose_base_port",
    "port_roles",
    "port_taken",
    "supervisor_failure",
    "without_error_prefixes",
]
