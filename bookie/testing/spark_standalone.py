"""A Spark standalone cluster on the hosts of ``bookie.testing.netns``: a master on one host, a worker on each
of others, drivers on any host; Spark from the pyspark wheel (``pyspark/bin/spark-class``), this machine's Java.

``SparkStandalone(master_host, worker_hosts, base_dir).start()`` starts the master
(``org.apache.spark.deploy.master.Master --host <ip>``) and the workers
(``org.apache.spark.deploy.worker.Worker spark://<ip>:7077 --host <ip> --cores 1 --memory 1g``), and returns
once the master's JSON (``http://<ip>:8080/json/``, asked from inside the master's host, as nothing in the root
namespace may reach a host) says it is ALIVE with every worker registered ALIVE. Every daemon runs with
``SPARK_LOCAL_IP``/``SPARK_LOCAL_HOSTNAME`` = its host's address (hosts cannot resolve each other's names, and
this machine's own name is 127.0.0.1), ``SPARK_HOME`` = pyspark's directory, a ``SPARK_CONF_DIR`` of its own
(empty: no spark-defaults or spark-env from elsewhere), a small daemon heap, its work directory and log under
``base_dir``. Workers (and so their executors and Python workers) get ``PYSPARK_PYTHON`` and no
``PYTHONPATH`` of this checkout: executors import the project as installed in that Python, as on a real
cluster's nodes.

A driver on a host: ``driver_env(host)`` is the environment of a process there whose plain
``SparkSession.builder.getOrCreate()`` joins the cluster (``PYSPARK_SUBMIT_ARGS`` with ``--master``,
``spark.driver.host``/``bindAddress`` = the host's address, small memory and cores), ``driver(host, *args)``
runs ``python *args`` there with it. ``stop()`` (also at the end of a ``with``, and with the network) stops the
workers, then the master, by PID (their process groups hold their executors and Python workers).
"""
from __future__ import annotations

import http.client
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence

from bookie.exceptions import ProcessStartException
from bookie.testing.netns import Host
from bookie.util.processes import stop_process, tail

MASTER_PORT = 7077  # every host has its own ports: Spark's usual ones are free on each
MASTER_WEBUI_PORT = 8080
WORKER_PORT = 7078
WORKER_WEBUI_PORT = 8081
DAEMON_MEMORY = "256m"  # heap of the master and worker JVMs (Spark's default is 1g each)
WORKER_CORES = 1
WORKER_MEMORY = "1g"  # what a worker offers its executors
EXECUTOR_MEMORY = "512m"
DRIVER_MEMORY = "512m"
START_TIMEOUT = 120.0  # seconds: six JVMs starting on two cores take a while; a busy machine only waits longer
HTTP_TIMEOUT = 5.0


def spark_home() -> str:
    """pyspark's package directory: a Spark distribution (``bin/spark-class``, ``jars/``)."""
    try:
        import pyspark
    except ImportError:
        raise ProcessStartException("pyspark is not installed: the standalone cluster runs from its wheel") from None
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    if not os.path.exists(os.path.join(home, "bin", "spark-class")):
        raise ProcessStartException(f"no bin/spark-class in {home}")
    return home


def host_json(host: Host, address: str, port: int, path: str = "/json/", timeout: float = HTTP_TIMEOUT) -> dict:
    """``GET http://address:port/path`` as JSON, over a connection made inside ``host``."""
    conn = http.client.HTTPConnection(address, port, timeout=timeout)
    conn.sock = host.connect(address, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise OSError(f"GET http://{address}:{port}{path}: HTTP {response.status}")
        return json.loads(body)
    finally:
        conn.close()


def _without_checkout(env: dict) -> dict:
    """``env`` without PYTHONPATH: processes of the cluster import the project as installed."""
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


class SparkStandalone:
    """A standalone master on ``master``, a worker on each of ``workers``, data and logs under ``base_dir``."""

    def __init__(self, master: Host, workers: Sequence[Host], base_dir: str, python: str = sys.executable,
                 cores: int = WORKER_CORES, memory: str = WORKER_MEMORY):
        if master in workers:
            raise ValueError("the master and the workers are on hosts of their own")
        self.master = master
        self.workers = list(workers)
        self.base_dir = base_dir
        self.python = python
        self.cores = cores
        self.memory = memory
        self.home = spark_home()
        self.conf_dir = os.path.join(base_dir, "conf")
        self.procs: dict[str, subprocess.Popen] = {}  # host name -> its daemon
        self.log_paths: dict[str, str] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{self.master.address}:{MASTER_PORT}"

    def _host_env(self, host: Host) -> dict[str, str]:
        """What every Spark process on ``host`` gets: this Spark, no configuration from elsewhere, the host's
        address as its own (for binding and as its name), scratch space (shuffle, blocks) under ``base_dir``."""
        return {"SPARK_HOME": self.home, "SPARK_CONF_DIR": self.conf_dir, "SPARK_LOCAL_IP": host.address,
                "SPARK_LOCAL_HOSTNAME": host.address,
                "SPARK_LOCAL_DIRS": os.path.join(self.base_dir, f"local-{host.name}"),
                "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python}

    def _env(self, host: Host) -> dict:
        return _without_checkout(dict(os.environ, **self._host_env(host), SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
                                      PYTHONUNBUFFERED="1"))

    def _daemon(self, host: Host, role: str, main_class: str, *args: str) -> subprocess.Popen:
        directory = os.path.join(self.base_dir, f"{role}-{host.name}")
        os.makedirs(directory, exist_ok=True)
        log_path = self.log_paths[host.name] = os.path.join(directory, f"{role}.log")
        with open(log_path, "ab") as log:
            proc = host.popen([os.path.join(self.home, "bin", "spark-class"), main_class, "--host", host.address,
                               *args], env=self._env(host), cwd=directory, stdout=log, stderr=subprocess.STDOUT)
        self.procs[host.name] = proc
        return proc

    def start(self, timeout: float = START_TIMEOUT) -> "SparkStandalone":
        """Start the master, then the workers; return once the master has every worker ALIVE."""
        os.makedirs(self.conf_dir, exist_ok=True)
        try:
            master = self._daemon(self.master, "master", "org.apache.spark.deploy.master.Master",
                                  "--port", str(MASTER_PORT), "--webui-port", str(MASTER_WEBUI_PORT))
            self.master.wait_for_port(MASTER_PORT, master, timeout, "Spark master", self.log_paths[self.master.name])
            self.wait(lambda state: state.get("status") == "ALIVE", "the master ALIVE", timeout)
            for host in self.workers:
                work_dir = os.path.join(self.base_dir, f"worker-{host.name}", "work")
                os.makedirs(work_dir, exist_ok=True)
                self._daemon(host, "worker", "org.apache.spark.deploy.worker.Worker", self.master_url,
                             "--port", str(WORKER_PORT), "--webui-port", str(WORKER_WEBUI_PORT),
                             "--cores", str(self.cores), "--memory", self.memory, "--work-dir", work_dir)
            self.wait(lambda state: self.alive_workers(state) >= {h.address for h in self.workers},
                      f"{len(self.workers)} workers ALIVE at the master", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict:
        """The master's JSON (status, workers, apps), asked from the master's host."""
        return host_json(self.master, self.master.address, MASTER_WEBUI_PORT)

    @staticmethod
    def alive_workers(state: dict) -> set[str]:
        """The addresses of the workers a master state lists ALIVE."""
        return {w["host"] for w in state.get("workers", ()) if w.get("state") == "ALIVE"}

    def wait(self, condition, what: str, timeout: float = START_TIMEOUT) -> dict:
        """Poll the master's state until ``condition(state)``; fail early, with its log, if a daemon exits."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            self._check_running()
            try:
                state = self.state()
                if condition(state):
                    return state
                last = state
            except (OSError, ValueError, http.client.HTTPException) as exc:  # not listening yet, a partial answer
                last = exc
            if time.monotonic() > deadline:
                raise ProcessStartException(f"timed out after {timeout:.0f} s waiting for {what}; the master "
                                            f"said {last!r}\n{self.logs()}")
            time.sleep(0.2)

    def _check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ProcessStartException(f"the Spark daemon on {name} exited with code {proc.returncode}:\n"
                                            f"{tail(self.log_paths[name])}")

    def logs(self, lines: int = 20) -> str:
        """The last lines of every daemon's log, for a failure's message."""
        return "\n".join(f"--- {name}: {path}\n{tail(path, lines)}" for name, path in self.log_paths.items())

    # Drivers.

    def driver_conf(self, host: Host, **conf: str) -> dict[str, str]:
        """Spark settings of a driver on ``host``: this master, the host's address for the driver's RPC and
        block manager, small memory, one executor per worker; ``conf`` added (dots as in Spark's keys may be
        passed with ``**{"spark.x": ...}``)."""
        return {"spark.master": self.master_url, "spark.driver.host": host.address,
                "spark.driver.bindAddress": host.address, "spark.driver.memory": DRIVER_MEMORY,
                "spark.executor.memory": EXECUTOR_MEMORY, "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * len(self.workers)), "spark.pyspark.python": self.python,
                "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": str(len(self.workers)), **conf}

    def driver_env(self, host: Host, **conf: str) -> dict[str, str]:
        """Environment variables of a driver process on ``host`` (added to the caller's): a plain
        ``SparkSession.builder.getOrCreate()`` there joins this cluster with ``driver_conf(host, **conf)``."""
        args = [arg for key, value in self.driver_conf(host, **conf).items() for arg in ("--conf", f"{key}={value}")]
        return {**self._host_env(host), "PYSPARK_SUBMIT_ARGS": shlex.join([*args, "pyspark-shell"])}

    def driver(self, host: Host, *args: str, conf: dict | None = None, env: dict | None = None,
               **kwargs) -> subprocess.Popen:
        """``python *args`` on ``host`` as a driver of this cluster (``Host.python``: this checkout on its path);
        ``conf``: more Spark settings, ``env``: more variables. Stopped with the network if still running."""
        return host.python(*args, env={**self.driver_env(host, **(conf or {})), **(env or {})}, **kwargs)

    def stop(self) -> None:
        """Stop the workers, then the master, by PID (each one's process group: its executors too)."""
        for name in sorted(self.procs, key=lambda n: n == self.master.name):
            stop_process(self.procs[name])

    def __enter__(self) -> "SparkStandalone":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
