"""A SparkSession that starts quickly for local jobs, tests and demos, with ``kraft`` ready.

`register` is the one line an existing session needs; `local_session` also builds the session:
``local[2]``, no UI, two shuffle partitions, quiet logs, and Python workers on this very
interpreter (``PYSPARK_PYTHON``), so they find pyarrow and this package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

FAST_LOCAL_CONFIG: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.log.level": "ERROR",
    "spark.sql.session.timeZone": "UTC",
}


def register(session: Any) -> None:
    """Register the ``kraft`` data source with ``session`` (a `pyspark.sql.SparkSession`)."""
    from spark.source import KraftDataSource

    session.dataSource.register(KraftDataSource)


def local_session(
    master: str = "local[2]",
    app_name: str = "kraft",
    config: Mapping[str, str] | None = None,
) -> Any:
    """A `SparkSession` (the active one if any) with the ``kraft`` data source registered.

    Args:
        master: ``local[N]``, or ``spark://host:port`` of a standalone cluster.
        config: extra Spark settings, applied after `FAST_LOCAL_CONFIG`.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "loopback address" warning
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**FAST_LOCAL_CONFIG, **(config or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def stop_session(session: Any, timeout: float = 15.0) -> None:
    """Stop ``session`` and the JVM this Python process launched for it, and wait for it.

    ``SparkSession.stop`` leaves the driver JVM running until the Python process exits; a
    program that promises to leave nothing running (the demo, the bench) stops it here.
    """
    import subprocess

    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()  # the JVM's PythonGatewayServer exits when its stdin closes
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


__all__ = ["FAST_LOCAL_CONFIG", "local_session", "register", "stop_session"]
