"""A Spark Connect server on this machine, for tests and benches: Spark from the pyspark wheel
(``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``, the connect jar is in
its ``jars/``), this machine's Java.

``SparkConnectServer(base_dir).start()`` runs the server on 127.0.0.1 on a free port (``local[2]``, the settings
of ``spark_bookkeeper.local_session``: Arrow batches of WRITE_ARROW_BATCH_ROWS rows to Python writers, two
shuffle partitions, no UI), in a process group of its own, its output in ``base_dir/connect-server.log``, an
empty ``SPARK_CONF_DIR`` of its own (no spark-defaults from elsewhere), and returns once it accepts sessions: a
session made on ``url`` answers a query. Its Python workers (data source readers and writers, foreachBatch
functions) run ``python`` (default: this interpreter), which must have the project installed: the server finds
``format("bookkeeper")`` by itself (the ``pyspark_bookkeeper`` module). ``session()`` is a remote SparkSession
on it; ``stop()`` (also at the end of a ``with``, and when ``start`` fails) ends the process group by PID.

A process with a classic session and a Connect one: pyspark picks Connect's or classic's implementation of
``pyspark.sql.functions`` (``F.col``, ``F.expr``, ...) by whether SPARK_CONNECT_MODE_ENABLED is in the
environment, which making a remote session sets for good. ``session()`` leaves the environment as it found
it; build a Connect DataFrame inside ``connect_mode(True)`` and a classic one outside it (a DataFrame, once
made, runs with either).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bookie.exceptions import ProcessStartException
from bookie.util.processes import free_port, stop_process, tail, wait_for_port
from bookie.testing.spark_standalone import spark_home
from spark_bookkeeper.spark_versions import has

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_MEMORY = "1g"  # the server is the driver; as a local session's default heap
START_TIMEOUT = 180.0  # seconds: a JVM starting on two busy cores; a healthy start takes ~20 s
READY_POLL_SECONDS = 0.5
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"  # pyspark.sql.utils.is_remote: which functions pyspark.sql gives


@contextmanager
def connect_mode(enabled: bool = True) -> Iterator[None]:
    """For the block: pyspark.sql's functions are Spark Connect's (``enabled``) or classic's; then as before."""
    before = os.environ.get(CONNECT_MODE)
    if enabled:
        os.environ[CONNECT_MODE] = "1"
    else:
        os.environ.pop(CONNECT_MODE, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before


def server_conf(port: int, python: str) -> dict[str, str]:
    """The server's Spark settings: loopback only, and those of ``local_spark_session``."""
    from spark_bookkeeper.local_session import WRITE_ARROW_BATCH_ROWS
    return {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(WRITE_ARROW_BATCH_ROWS),
            "spark.pyspark.python": python, "spark.pyspark.driver.python": python,
            **FOREACH_BATCH_WORKAROUND}


# Spark 4.0's foreachBatch runner on Connect (StreamingPythonRunner) turns the Python daemon off in the live
# SparkConf; a task starting a Python worker afterwards, as a data source write inside the function does,
# fails with "key not found: PythonWorker" (PythonWorkerFactory.create). Off from the start, nothing changes
# under the tasks. 4.1 no longer needs it.
FOREACH_BATCH_WORKAROUND = {} if has((4, 1)) else {"spark.python.use.daemon": "false"}


class SparkConnectServer:
    """A Spark Connect server (``local[2]`` by default) on 127.0.0.1:``port`` (default: a free one)."""

    def __init__(self, base_dir: str, port: int = 0, master: str = "local[2]", python: str = sys.executable,
                 driver_memory: str = DRIVER_MEMORY):
        self.base_dir = base_dir
        self.port = port or free_port()
        self.master = master
        self.python = python
        self.driver_memory = driver_memory
        self.log_path = os.path.join(base_dir, "connect-server.log")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        conf = [arg for key, value in server_conf(self.port, self.python).items() for arg in ("--conf", f"{key}={value}")]
        return [os.path.join(spark_home(), "bin", "spark-submit"), "--class", SERVER_CLASS,
                "--name", "Spark Connect server", "--master", self.master, "--driver-memory", self.driver_memory,
                *conf]

    def env(self) -> dict[str, str]:
        conf_dir = os.path.join(self.base_dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        return dict(os.environ, SPARK_HOME=spark_home(), SPARK_CONF_DIR=conf_dir, SPARK_LOCAL_IP="127.0.0.1",
                    SPARK_LOCAL_DIRS=os.path.join(self.base_dir, "local"), PYSPARK_PYTHON=self.python,
                    PYSPARK_DRIVER_PYTHON=self.python, PYTHONUNBUFFERED="1")

    def start(self, timeout: float = START_TIMEOUT) -> "SparkConnectServer":
        """Start the server; return once a session on it answers a query. On failure (the process exited, or
        the deadline passed) the process group is stopped and ProcessStartException says why, with the log's
        tail."""
        if self.proc is not None:
            raise ProcessStartException(f"the Spark Connect server is running already (pid {self.proc.pid})")
        os.makedirs(self.base_dir, exist_ok=True)
        deadline = time.monotonic() + timeout
        with open(self.log_path, "ab") as log:
            # spark-submit execs Java: the PID is the server's, and its group holds its Python workers too.
            self.proc = subprocess.Popen(self.command(), env=self.env(), cwd=self.base_dir, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for_port(self.port, self.proc, timeout, "the Spark Connect server", self.log_path)
            self._wait_answering(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_answering(self, deadline: float) -> None:
        """Until a session on the server runs a query (the port may listen before sessions are served)."""
        last: Exception | None = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise ProcessStartException(f"the Spark Connect server exited with code {code}:\n"
                                            f"{tail(self.log_path, 40)}")
            try:
                session = self.session()
                try:
                    with connect_mode():
                        if session.range(1).count() == 1:
                            return
                finally:
                    session.stop()  # this client's session only: the server runs on
            except Exception as exc:  # noqa: BLE001 - gRPC and Spark errors alike while it starts
                last = exc
            if time.monotonic() > deadline:
                raise ProcessStartException(f"the Spark Connect server on {self.url} answered no query in time "
                                            f"(last error: {last!r}):\n{tail(self.log_path, 40)}")
            time.sleep(READY_POLL_SECONDS)

    def session(self):
        """A new remote SparkSession on this server (``stop()`` it when done: the server runs on); the
        environment left as it was (see the module docstring)."""
        from pyspark.sql import SparkSession
        with connect_mode(CONNECT_MODE in os.environ):  # create() sets it: undone on the way out
            return SparkSession.builder.remote(self.url).create()

    def stop(self) -> None:
        """Stop the server's process group by PID (SIGTERM, then SIGKILL)."""
        if self.proc is not None:
            stop_process(self.proc, timeout=30.0)
            self.proc = None

    def __enter__(self) -> "SparkConnectServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
