"""``kraft cluster up --detach``: the supervisor (``kraft cluster up --supervise``) started in
its own session, its output appended to ``DIR/cluster.log``; the command returns once the
supervisor wrote ``DIR/cluster.json`` (the cluster is healthy), or says in one line why not."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def supervisor_argv(args: argparse.Namespace, data_dir: Path) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "kraft.cli",
        "cluster",
        "up",
        "--supervise",
        "--controllers",
        str(args.controllers),
        "--brokers",
        str(args.brokers),
        "--data-dir",
        str(data_dir),
        "--wait-timeout",
        str(args.wait_timeout),
        "--node-log-level",
        args.node_log_level,
    ]
    if args.base_port is not None:
        argv += ["--base-port", str(args.base_port)]
    if args.tls:
        argv.append("--tls")
    if getattr(args, "tls_clients", ""):
        argv += ["--tls-clients", args.tls_clients]
    if getattr(args, "authorizer", False):
        argv.append("--authorizer")
    if not args.metrics:
        argv.append("--no-metrics")
    for item in args.broker_config:
        argv += ["--broker-config", item]
    for item in args.controller_config:
        argv += ["--controller-config", item]
    return argv


def detach(args: argparse.Namespace, data_dir: Path) -> int:
    from kraft.cli._cluster_start import supervisor_failure
    from kraft.cli.cluster import CLUSTER_FILE, LOG_FILE, _lock_data_dir, _preflight
    from kraft.cli.cluster_env import identity_note
    from kraft.cluster.process import PARENT_PID_ENV
    from kraft.security.tls import security_exports

    os.close(_lock_data_dir(data_dir))  # fail early; the supervisor takes the lock for good
    _preflight(args, data_dir)
    log_path = data_dir / LOG_FILE
    # NB: the supervisor must not die with us: drop any parent pid we inherited ourselves.
    env = {k: v for k, v in os.environ.items() if k != PARENT_PID_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    with log_path.open("ab") as log:
        start = log.tell()
        supervisor = subprocess.Popen(
            supervisor_argv(args, data_dir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + args.wait_timeout + 15.0
    try:
        info = wait_for_info(data_dir, supervisor, deadline)
    except KeyboardInterrupt:
        stop_supervisor(supervisor)
        raise
    if info is None:
        code = supervisor.poll()
        if code is None:
            stop_supervisor(supervisor)
            why = f"the cluster was not healthy within {args.wait_timeout:g}s"
        else:
            failure = supervisor_failure(log_path, start)
            if failure is not None:  # its one line says what is wrong and what to do
                raise OSError(f"{failure} (see {log_path})")
            why = f"the cluster supervisor exited with code {code}"
        print_tail(log_path, start)
        raise OSError(f"{why}; see {log_path}")
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(
        f"Cluster up in the background: {len(info['controllers'])} controllers, "
        f"{len(info['brokers'])} brokers (supervisor pid {info['supervisor_pid']}).\n"
        f"  bootstrap:            {info['bootstrap']}\n"
        f"  controller bootstrap: {info['controller_bootstrap']}\n"
        + (
            f"  Kafka bootstrap:      {info['kafka_bootstrap']} (any Kafka client)\n"
            if info.get("kafka_bootstrap")
            else ""
        )
        + f"  status and pids:      {data_dir / CLUSTER_FILE}\n"
        f"  log:                  {log_path}\n"
        f"Use it with:\n"
        f"  export KRAFT_BOOTSTRAP={info['bootstrap']}\n"
        f"  export KRAFT_BOOTSTRAP_CONTROLLER={info['controller_bootstrap']}\n"
        + (
            f"  export KAFKA_BOOTSTRAP_SERVERS={info['kafka_bootstrap']}\n"
            if info.get("kafka_bootstrap")
            else ""
        )
        + "".join(f"  export {line}\n" for line in security_exports(info.get("security", {})))
        + identity_note(info, data_dir)
        + "Stop it with:\n"
        f"  kraft cluster down --data-dir {data_dir}"
    )
    return 0


def wait_for_info(
    data_dir: Path, supervisor: subprocess.Popen[bytes], deadline: float
) -> dict[str, Any] | None:
    """cluster.json once the supervisor wrote it; None if it exited or time ran out."""
    from kraft.cli.cluster import CLUSTER_FILE

    path = data_dir / CLUSTER_FILE
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            info: dict[str, Any] = json.loads(path.read_text())
            if info.get("supervisor_pid") == supervisor.pid:
                return info
        if supervisor.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def stop_supervisor(supervisor: subprocess.Popen[bytes]) -> None:
    supervisor.terminate()
    try:
        supervisor.wait(timeout=40)
    except subprocess.TimeoutExpired:
        supervisor.kill()
        supervisor.wait()


def print_tail(log_path: Path, start: int, lines: int = 20) -> None:
    with contextlib.suppress(OSError):
        with log_path.open("rb") as f:
            f.seek(start)
            tail = f.read().decode(errors="replace").splitlines()[-lines:]
        for line in tail:
            print(f"  | {line}", file=sys.stderr)
