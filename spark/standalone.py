"""A Spark standalone cluster on loopback (one master, one worker), for tests and examples.

The pip ``pyspark`` ships no ``start-master.sh``/``start-worker.sh``, but its
``sbin/spark-daemon.sh`` starts the same daemons::

    spark-daemon.sh start org.apache.spark.deploy.master.Master 1 --host 127.0.0.1 --port P
    spark-daemon.sh start org.apache.spark.deploy.worker.Worker 1 spark://127.0.0.1:P

`StandaloneCluster` runs exactly that, with its pid files, logs and the worker's scratch space
in a temporary directory, waits until the worker has registered (the master's ``/json``
page), and stops both daemons on exit, whatever happened. Executors run this interpreter
(``PYSPARK_PYTHON``), so they import kraft and pyarrow from the same environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Self

from kraft.cluster.ports import free_ports

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """``$SPARK_HOME``, else the installed pyspark package (which has ``sbin/``)."""
    env = os.environ.get("SPARK_HOME")
    if env:
        return Path(env)
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A master and one worker on 127.0.0.1, stopped on exit.

    Args:
        cores, memory: what the worker offers (``--cores``, ``--memory``).
        start_timeout_s: how long the worker may take to register.

    Raises:
        TimeoutError: (on enter) the worker did not register in time; the daemons are stopped
            and the message names their logs.
    """

    def __init__(self, *, cores: int = 2, memory: str = "1g", start_timeout_s: float = 60.0):
        self.cores = cores
        self.memory = memory
        self.start_timeout_s = start_timeout_s
        self.home = spark_home()
        self.dir = Path(tempfile.mkdtemp(prefix="kraft-spark-standalone-"))
        port, ui_port, worker_ui_port = free_ports(3)
        self.master_url = f"spark://127.0.0.1:{port}"
        self._port, self._ui_port, self._worker_ui_port = port, ui_port, worker_ui_port
        self._started: list[str] = []

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_PID_DIR=str(self.dir / "pids"),
            SPARK_LOG_DIR=str(self.dir / "logs"),
            SPARK_IDENT_STRING=f"kraft{os.getpid()}",
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
        )
        return env

    def _daemon(self, action: str, cls: str, *args: str) -> None:
        subprocess.run(
            ["bash", str(self.home / "sbin" / "spark-daemon.sh"), action, cls, "1", *args],
            env=self._env(),
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        self._daemon(
            "start",
            MASTER_CLASS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self._port),
            "--webui-port",
            str(self._ui_port),
        )
        self._started.append(MASTER_CLASS)
        self._daemon(
            "start",
            WORKER_CLASS,
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(self._worker_ui_port),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(self.dir / "work"),
            self.master_url,
        )
        self._started.append(WORKER_CLASS)
        deadline = time.monotonic() + self.start_timeout_s
        while self.alive_workers() < 1:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no worker registered with {self.master_url} within "
                    f"{self.start_timeout_s}s; logs: {self.dir / 'logs'}"
                )
            time.sleep(0.2)

    def alive_workers(self) -> int:
        """Workers the master counts as alive (0 while it does not answer yet)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self._ui_port}/json", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self) -> None:
        """Stop the daemons this cluster started (worker first) and remove its directory."""
        for cls in reversed(self._started):
            try:
                self._daemon("stop", cls)
            except (subprocess.SubprocessError, OSError) as e:
                print(f"stopping {cls} failed: {e}", file=sys.stderr)
        self._started.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = ["StandaloneCluster", "spark_home"]
