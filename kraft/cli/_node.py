"""What ``kraft controller`` and ``kraft broker`` share: the node flags and how they override
a Kafka-style properties file."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path

PID_FILE = "kraft.pid"
"""Written into a node's data directory while it runs: how ``kraft cluster status`` and
``kraft cluster down`` find a node that was restarted by hand (not by the supervisor)."""

LOCK_FILE = ".lock"
"""Kafka's data-directory lock file: held (``flock``) by the node that runs on the directory,
for its whole life, so a second process never opens the same logs."""

_held_locks: list[int] = []
"""Descriptors of the locks this process holds: never closed, so the kernel releases them only
when the process ends (however it ends)."""

_DATA_DIR_KEYS = ("log.dirs", "log.dir", "metadata.log.dir")
"""The properties that name data directories (Kafka's; ``log.dirs`` is a comma list)."""


def add_node_arguments(
    p: argparse.ArgumentParser, *, node_id_help: str, listen_help: str, data_dir_help: str
) -> None:
    """``--config``, ``--node-id``, ``--controller-quorum-voters``, ``--listen``, ``--data-dir``
    (``--override`` is added by `add_override_argument`, after any node-specific flag)."""
    p.add_argument("--config", metavar="FILE", help="a Kafka-style properties file")
    p.add_argument("--node-id", type=int, help=node_id_help)
    p.add_argument(
        "--controller-quorum-voters",
        metavar="ID@HOST:PORT,...",
        help="controller.quorum.voters, e.g. 1@127.0.0.1:9091,2@127.0.0.1:9092",
    )
    p.add_argument("--listen", metavar="HOST:PORT", help=listen_help)
    p.add_argument("--data-dir", metavar="DIR", help=data_dir_help)


def add_role_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--broker-config`` and ``--controller-config KEY=VALUE`` (repeatable): a property for
    every node of that role, as `kraft cluster up` and `kraft peer kafka up` take them."""
    for role in ("broker", "controller"):
        p.add_argument(
            f"--{role}-config",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a property for every {role} (repeatable)",
        )


def add_override_argument(p: argparse.ArgumentParser, *, example: str) -> None:
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"set any property (repeatable), e.g. {example}",
    )


def node_properties(
    args: argparse.Namespace,
    extra_flags: Mapping[str, str | None] | None = None,
    *,
    data_dir_replaces: tuple[str, ...] = (),
) -> dict[str, str]:
    """The ``--config`` file's properties, overridden by the flags, then by ``--override``;
    ``--data-dir`` also drops the file's ``data_dir_replaces`` keys (before the overrides).

    Raises:
        ValueError: an ``--override`` is not KEY=VALUE, or a data directory is a file.
    """
    from kraft.properties import load_properties

    props = load_properties(args.config) if args.config else {}
    listen: str | None = args.listen
    entries = [e.strip() for e in props.get("listeners", "").split(",") if e.strip()]
    scheme, sep, _ = entries[0].partition("://") if entries else ("", "", "")
    if listen and "://" not in listen and sep:
        listen = f"{scheme.strip()}://{listen}"  # --listen HOST:PORT keeps the file's SSL://
    if listen and len(entries) > 1:  # --listen moves the first (gRPC) listener; others stay
        listen = ",".join([listen, *entries[1:]])
    flags: dict[str, str | None] = {
        "node.id": None if args.node_id is None else str(args.node_id),
        "controller.quorum.voters": args.controller_quorum_voters,
        "listeners": listen,
        "log.dirs": args.data_dir,
        **(extra_flags or {}),
    }
    props.update({k: v for k, v in flags.items() if v is not None})
    if args.data_dir is not None:
        for key in data_dir_replaces:
            props.pop(key, None)
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    for key in _DATA_DIR_KEYS:
        where = (
            "--data-dir" if args.data_dir is not None and props.get(key) == args.data_dir else key
        )
        check_directories((d for d in props.get(key, "").split(",") if d.strip()), where)
    return props


def check_directories(paths: Iterable[str | Path], what: str) -> None:
    """Refuse, with one line naming ``what`` (``--data-dir``, ``log.dirs``), a data directory
    that is a file or lies under one: otherwise creating it fails deep inside a server.

    Raises:
        ValueError: ``path`` or one of its parents exists and is not a directory.
    """
    for path in paths:
        p = Path(str(path).strip()).expanduser()
        for existing in (p, *p.parents):
            if existing.exists():
                if not existing.is_dir():
                    where = f"{what} {p}" + ("" if existing == p else f": {existing}")
                    raise ValueError(f"{where} is not a directory")
                break


def check_ports_free(listen: str, metrics_port: int, more_listeners: Iterable[str] = ()) -> None:
    """Refuse, in one line naming the port and its key, to start a node whose port something
    else listens on: gRPC's own bind error comes later and says only "Failed to bind".

    Raises:
        OSError: ``listen`` or one of ``more_listeners`` (``listeners``), or ``metrics_port``
            (``metrics.port``) is taken.
    """
    from kraft.cli._cluster_start import port_taken

    def split(address: str) -> tuple[str, str]:
        host, _, port = address.rpartition(":")
        return host.strip("[]") or "0.0.0.0", port

    host = split(listen)[0]
    wanted = [
        ("listeners", where, int(port))
        for where, port in map(split, (listen, *more_listeners))
        if port.isdigit() and int(port) > 0
    ]
    if metrics_port > 0:
        wanted.append(("metrics.port", host, metrics_port))
    for key, where, number in wanted:
        try:
            taken = port_taken(number, where)
        except OSError:  # not an address of this machine: gRPC's bind says so
            continue
        if taken:
            raise OSError(
                f"cannot listen on {where}:{number} ({key}): the port is taken, something else "
                f"listens there; stop it or set {key} to a free port"
            )


def claim_data_dir(directory: Path) -> None:
    """Take ``directory``'s lock, then record this process's pid in it: what a node does before
    it opens anything there (Kafka's ``LogManager`` locks each log directory the same way).

    Raises:
        OSError: another process holds the lock (a node already runs on this directory): one
            line naming the directory and that process's pid.
    """
    lock_data_dir(directory)
    write_pid_file(directory)


def lock_data_dir(directory: Path) -> None:
    """Take an exclusive ``flock`` on ``directory/.lock`` and hold it until this process ends.

    Raises:
        OSError: another process holds it.
    """
    import fcntl
    import os

    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pid = read_pid_file(directory)
        owner = f"pid {pid}" if pid is not None else "another process"
        raise OSError(
            f"data directory {directory} is in use by {owner} (it holds {LOCK_FILE}): a node "
            "already runs on it; stop that one first"
        ) from None
    _held_locks.append(fd)


def write_pid_file(directory: Path) -> None:
    """Record this process's pid in ``directory`` (atomically), and remove it at exit if it
    still names this process. Call it only with the directory's lock held (`claim_data_dir`):
    then no other live process can own the file."""
    import atexit
    import os

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PID_FILE
    tmp = directory / f"{PID_FILE}.{os.getpid()}.tmp"
    tmp.write_text(f"{os.getpid()}\n")
    os.replace(tmp, path)
    atexit.register(_remove_pid_file, path, os.getpid())


def _remove_pid_file(path: Path, pid: int) -> None:
    if read_pid_file(path.parent) == pid:
        path.unlink(missing_ok=True)


def read_pid_file(directory: Path) -> int | None:
    """The pid a node recorded in ``directory``, or None."""
    try:
        text = (directory / PID_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
