"""The few file-system calls the audits make on their output. On a classic session through Hadoop's FileSystem
API in the session's JVM: they work wherever Spark writes the tables (a local path, HDFS, S3 through s3a,
...), and ask before they read, so that nothing is logged for a path that is not there yet. On Spark Connect
(no JVM on the client) with Python's own calls on a local path the client sees as the server writes it
(connect.py; a run on Connect refuses other paths before it starts)."""
from __future__ import annotations

import glob
import os
import shutil

from spark_bookkeeper.audit.connect import client_path, is_connect


def _path(spark, path: str):
    """(FileSystem, Path) of ``path``, with the session's Hadoop configuration (credentials, endpoints)."""
    context = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(context._jsc.hadoopConfiguration()), hadoop_path


def matches(spark, pattern: str) -> bool:
    """Whether the glob ``pattern`` (``*`` and the like, or a plain path) names anything."""
    if is_connect(spark):
        return bool(glob.glob(client_path(pattern)))
    fs, path = _path(spark, pattern)
    found = fs.globStatus(path)  # null for a plain path that does not exist, empty when a glob matches nothing
    return found is not None and len(found) > 0


def exists(spark, path: str) -> bool:
    """Whether ``path`` is there."""
    if is_connect(spark):
        return os.path.exists(client_path(path))
    fs, hadoop_path = _path(spark, path)
    return bool(fs.exists(hadoop_path))


def delete(spark, path: str) -> bool:
    """Remove ``path`` and all below it; whether there was anything to remove."""
    if is_connect(spark):
        local = client_path(path)
        if not os.path.lexists(local):
            return False
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local)
        else:
            os.remove(local)
        return True
    fs, hadoop_path = _path(spark, path)
    return bool(fs.delete(hadoop_path, True))


def replace(spark, source: str, target: str) -> None:
    """Rename the directory ``source`` to ``target``, removing an earlier ``target`` first (a rename onto an
    existing directory would move ``source`` into it). One rename on HDFS and local paths; on an object store
    it is a copy, so the run is published table by table once every table is written."""
    if is_connect(spark):
        src, dst = client_path(source), client_path(target)
        delete(spark, dst)
        os.rename(src, dst)  # OSError (with both paths) if it fails
        return
    fs, src = _path(spark, source)
    _, dst = _path(spark, target)
    if fs.exists(dst):
        fs.delete(dst, True)
    if not fs.rename(src, dst):
        raise OSError(f"could not rename {source} to {target}")
