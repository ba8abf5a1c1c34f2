"""Ctrl-C during an audit run: a plain KeyboardInterrupt where the driver is, which the run turns into its
discarding (staging.py) and one line.

pyspark's own SIGINT handler calls Py4J from inside the signal handler (``cancelAllJobs``): when the driver is
itself waiting in a Py4J call, that is a reentrant call on the same connection, logged as a traceback, and the
interrupt comes late. For the length of a run the handler is Python's own instead (the run cancels Spark's
jobs itself, from its ordinary code), and Py4J's log records of the call the interrupt broke (on the root
logger and on its own) are dropped: the run says what happened. While the run is discarded, Spark's own log
is silenced: each write it cancels logs "Aborting job" with a stack trace of some eighty lines, an expected
outcome the run's last line reports.

On Spark Connect the client has no JVM: a run that ends early interrupts the session's operations
(``interruptAll``: the server cancels their jobs), and the server's log is left as it is (it is the server's,
not this client's to silence).
"""
from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from spark_bookkeeper.audit.connect import is_connect

PY4J_INTERRUPTED = "KeyboardInterrupt while sending command."  # logged by py4j.java_gateway on the root logger


def _not_py4j_interrupted(record: logging.LogRecord) -> bool:
    return record.getMessage() != PY4J_INTERRUPTED


@contextmanager
def plain_ctrl_c() -> Iterator[None]:
    """For the block: SIGINT raises KeyboardInterrupt (Python's default handler), Py4J's records of it dropped
    (its errors reach the run as exceptions all the same). Outside the main thread (where no handler can be set)
    the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    py4j_level = py4j.level
    root.addFilter(_not_py4j_interrupted)
    py4j.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        py4j.setLevel(py4j_level)
        root.removeFilter(_not_py4j_interrupted)
        signal.signal(signal.SIGINT, previous)


def cancel_jobs(spark) -> None:
    """Stop what the session runs: its jobs cancelled (classic), its operations interrupted (Spark Connect)."""
    if is_connect(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


@contextmanager
def quiet_spark_log(spark) -> Iterator[None]:
    """For the block: the session's JVM logs nothing (log4j's root level OFF), then its level as it was. On
    Spark Connect nothing changes: there is no JVM on the client."""
    if is_connect(spark):
        yield
        return
    jvm = spark.sparkContext._jvm
    configurator, root = jvm.org.apache.logging.log4j.core.config.Configurator, jvm.org.apache.logging.log4j.LogManager
    previous = root.getRootLogger().getLevel()
    configurator.setRootLevel(jvm.org.apache.logging.log4j.Level.OFF)
    try:
        yield
    finally:
        configurator.setRootLevel(previous)
