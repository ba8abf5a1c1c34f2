"""A Spark driver on a host of a standalone cluster (``bookie.testing.spark_standalone``), which the test drives.

Run on a host by ``SparkStandalone.driver(host, "-m", "tests.helpers.spark_cluster_job", EXECUTORS)``: a plain
``SparkSession.builder.getOrCreate()`` (the environment makes it a driver of the cluster), then it waits until
EXECUTORS executors have registered and answers commands, one JSON object a line on stdin, one JSON answer a
line on its stdout (everything else the process prints goes to stderr). End of stdin: it stops the session.

``ClusterDriver`` is the test's side. Commands: ``hosts`` (where tasks ran), ``write`` / ``read`` (batch, through
``format("bookkeeper")``), ``stream`` (a log streamed into another with ``Trigger.AvailableNow``). Rows carry
the address of the host whose executor made or read them (``here``): executors import only the installed
package, so the functions they run are defined here, in ``__main__``, and travel by value.
"""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import traceback

DEADLINE = 120.0  # seconds a command may take: generous, a busy two-core machine only makes it slower


def here(peer: str) -> str:
    """The address this process's host has towards ``peer`` (a UDP connect sends nothing): which host runs it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((peer, 9))
        return sock.getsockname()[0]


# -- the driver process --------------------------------------------------------------------------------
def executor_hosts(spark) -> list[str]:
    """The hosts of the registered executors (the driver's own block manager left out)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    driver = spark.conf.get("spark.driver.host")
    hosts = [info.host() for info in infos]
    hosts.remove(driver)
    return sorted(hosts)


def op_hosts(spark, partitions: int) -> dict:
    driver = spark.conf.get("spark.driver.host")
    ran = (spark.sparkContext.parallelize(range(partitions), partitions)
           .mapPartitionsWithIndex(lambda index, _: [(index, here(driver))]).collect())
    return {"tasks": sorted(ran), "executors": executor_hosts(spark)}


def op_write(spark, uri: str, log: str, rows: int, partitions: int, mode: str = "append") -> dict:
    """Rows ``<i>@<host that made and wrote them>``, written into ``log``."""
    driver = spark.conf.get("spark.driver.host")

    def tagged(items):
        address = here(driver)
        return ((f"{i}@{address}",) for i in items)

    df = spark.createDataFrame(spark.sparkContext.parallelize(range(rows), partitions).mapPartitions(tagged),
                               "payload string")
    (df.write.format("bookkeeper").mode(mode).option("metadataServiceUri", uri).option("log", log)
     .option("ensembleSize", 3).option("writeQuorum", 2).option("ackQuorum", 2).save())
    return {}


def op_read(spark, uri: str, log: str) -> dict:
    """Every entry of ``log`` as [payload, ledger, entry, the host whose executor read it]."""
    driver = spark.conf.get("spark.driver.host")

    def located(rows):
        address = here(driver)
        return ((bytes(r.payload).decode(), r.ledger_id, r.entry_id, address) for r in rows)

    df = spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", log).load()
    return {"rows": df.rdd.mapPartitions(located).collect(), "partitions": df.rdd.getNumPartitions()}


def op_stream(spark, uri: str, source: str, sink: str, checkpoint: str, per_trigger: int) -> dict:
    """``source`` streamed into ``sink`` until caught up (AvailableNow, ``per_trigger`` entries a micro-batch),
    each payload tagged ``|<host>`` by the executor that carries it to the sink."""
    from pyspark.sql import functions as F
    driver = spark.conf.get("spark.driver.host")
    tag = F.udf(lambda payload: f"{bytes(payload).decode()}|{here(driver)}", "string")
    query = (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", source)
             .option("maxEntriesPerTrigger", per_trigger).load()
             .select(tag("payload").alias("payload"))
             .writeStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    if not query.awaitTermination(DEADLINE):
        query.stop()
        raise TimeoutError(f"the stream into {sink} did not catch up within {DEADLINE:.0f} s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return {"batches": [p["numInputRows"] for p in query.recentProgress]}


OPS = {"hosts": op_hosts, "write": op_write, "read": op_read, "stream": op_stream}


def serve(executors: int) -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # Spark's and anyone's prints go to stderr; stdout carries answers only
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("spark-cluster-job").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    def answer(**message) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    deadline = time.monotonic() + DEADLINE
    while len(executor_hosts(spark)) < executors:  # registration is asynchronous; tasks must meet them all
        if time.monotonic() > deadline:
            answer(error=f"{executors} executors did not register within {DEADLINE:.0f} s: {executor_hosts(spark)}")
            return
        time.sleep(0.1)
    answer(ready=executor_hosts(spark), master=spark.conf.get("spark.master"))
    for line in sys.stdin:
        command = json.loads(line)
        try:
            answer(result=OPS[command.pop("op")](spark, **command))
        except Exception:
            answer(error=traceback.format_exc())
    spark.stop()


# -- the test's side ------------------------------------------------------------------------------------
class ClusterDriver:
    """The driver process on ``host`` of ``cluster``, its output (stderr) in ``log_path``; ``call(op, **args)``
    returns a command's result or fails with its error and the log's tail. ``close()`` ends it by PID."""

    def __init__(self, cluster, host, log_path: str, timeout: float = DEADLINE):
        from bookie.util.processes import tail
        self.log_path = log_path
        self._tail = tail
        self._logs = f"\n(the daemons' logs and the executors' work directories are under {cluster.base_dir})"
        with open(log_path, "ab") as log:
            self.proc = cluster.driver(host, "-m", "tests.helpers.spark_cluster_job", str(len(cluster.workers)),
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self._answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name="spark-cluster-job-answers").start()
        try:
            ready = self._receive(timeout, "its executors")
            self.executors, self.master = ready["ready"], ready["master"]
        except BaseException:
            self.close()
            raise

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._answers.put(json.loads(line))
        self._answers.put(None)  # the process ended

    def _receive(self, timeout: float, what: str) -> dict:
        try:
            message = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the driver did not answer within {timeout:.0f} s ({what}):\n"
                                 f"{self._tail(self.log_path, 40)}{self._logs}") from None
        if message is None:
            raise AssertionError(f"the driver exited with code {self.proc.wait()} ({what}):\n"
                                 f"{self._tail(self.log_path, 40)}{self._logs}")
        if "error" in message:
            raise AssertionError(f"the driver failed ({what}):\n{message['error']}{self._logs}")
        return message

    def call(self, op: str, timeout: float = DEADLINE + 30, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._receive(timeout, op)["result"]

    def close(self, timeout: float = 30.0) -> None:
        """End of stdin stops the session; the process group is stopped by PID if it is not gone by ``timeout``."""
        from bookie.util.processes import stop_process
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            pass
        stop_process(self.proc)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
