"""A real Apache ZooKeeper server, from the jars inside the pyspark wheel, run with this machine's Java.

Binds 127.0.0.1 only, admin server off. ``stop()`` ends it by PID (SIGTERM, then SIGKILL).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from bookie.exceptions import ProcessStartException
from bookie.util.processes import free_port, stop_process, wait_for_port


def zookeeper_classpath() -> str:
    try:
        import pyspark
    except ImportError:
        raise ProcessStartException("pyspark is not installed: the embedded ZooKeeper runs from its jars") from None
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not any(name.startswith("zookeeper-") for name in os.listdir(jars)):
        raise ProcessStartException(f"no zookeeper-*.jar in {jars}")
    return os.path.join(jars, "*")


class ZooKeeperServer:
    def __init__(self, data_dir: str, port: int = 0, tick_time: int = 2000):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.tick_time = tick_time
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, "zookeeper.log")

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        java = shutil.which("java")
        if java is None:
            raise ProcessStartException("java is not on PATH: the embedded ZooKeeper needs Java 17+ (PySpark's own "
                                       "requirement), e.g. apt-get install openjdk-17-jre-headless")
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        cfg = os.path.join(self.data_dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_time}\ndataDir={os.path.join(self.data_dir, 'data')}\n"
                    f"clientPort={self.port}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [java, "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-cp", zookeeper_classpath(),
                 "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for_port(self.port, self.proc, timeout, "ZooKeeper", self.log_path)
        except ProcessStartException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
