"""What an audit does on a Spark Connect session (``sc://``), where the client has no JVM of its own.

A classic session drives the run from Python through Py4J: Hadoop's FileSystem for the staging directories,
``cancelAllJobs`` to stop the writes of a run that ends early, log4j to silence what Spark logs of them. On
Spark Connect the client has only the session's DataFrame API, so:

- the tables are read through the data source (common.read_tables), as on a classic session;
- the output must be a local path (or ``file:``) that the client sees as the server writes it (the same host,
  or a shared mount): the client lists, renames and removes the run's directories with Python's own calls
  (hadoop_fs), and checks after each table is written that it sees it (a server writing elsewhere fails the
  run at once, before anything is published). HDFS, S3 and other Hadoop paths need the JVM: refused at the
  start of the run on Connect;
- a run that ends early interrupts the session's operations (``SparkSession.interruptAll``) in place of
  cancelling jobs; the server's log is the server's (nothing to silence on the client);
- ``bk audit --remote sc://host:port`` (or SPARK_REMOTE) runs an audit on a Connect server.
"""
from __future__ import annotations

import os

FILE_SCHEME = "file:"


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (pyspark.sql.connect), not a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def local_path(path: str) -> str | None:
    """The local path ``path`` names (a plain path, ``file:/x`` or ``file:///x``), None for another scheme."""
    if path.startswith(FILE_SCHEME):
        rest = path[len(FILE_SCHEME):]
        return "/" + rest.lstrip("/") if rest.startswith("/") else rest
    return None if "://" in path else path


def client_path(path: str) -> str:
    """``local_path(path)``, or ValueError saying why a Connect run cannot use ``path``."""
    local = local_path(path)
    if local is None:
        raise ValueError(f"output {path} is not a local path: on Spark Connect the audit stages and publishes its "
                         "run with the client's own file calls, so OUTPUT must be a local (or file:) path that this "
                         "client sees as the server writes it (a shared mount); run it on a classic session "
                         "(spark-submit) for HDFS or an object store")
    return os.path.abspath(local)
