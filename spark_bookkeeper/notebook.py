"""What the notebooks in ``notebooks/`` share: the cluster they look at and a SparkSession.

``cluster_uri()`` is ``METADATA_SERVICE_URI`` from the environment or, when it is not set, a local cluster
(LocalBookKeeper: a real ZooKeeper and four bookie processes on 127.0.0.1) started once per interpreter with
sample data that gives every table and plot something to show, and stopped by PID when the interpreter
exits. ``add_sample_data`` writes that data into any cluster (the notebook tests use it on theirs).
``audit_output`` and ``latest_run`` give the storage and replication notebooks an audit's tables: from
``AUDIT_OUTPUT`` (where scheduled runs write) or from a run made on the spot.
"""
from __future__ import annotations

import atexit
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from bookie.client import BookKeeper
from bookie.client.ledger_handle import LedgerHandle
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import bookkeeper_pb2 as pb
from bookie.replication.auditor import bookie_ledger_index, ledgers_to_mark, lost_bookies

URI_VARIABLE = "METADATA_SERVICE_URI"
AUDIT_VARIABLE = "AUDIT_OUTPUT"  # an audit output directory (bk audit ... --output DIR) the notebooks read
AUDITS = ("storage", "replication")
OWNER_KEY = "application"  # the custom-metadata key the sample ledgers name their owner with
SAMPLE_BOOKIES = 4
# Small entry logs, so the sample fills several and the storage tables have finished logs to show; no
# timed GC pass (only the forced one below), and the index flushed every second so the pass sees the logs.
SAMPLE_BOOKIE_SETTINGS = {"entryLogSizeLimit": 64 * 1024, "gcWaitTime": 3_600_000, "flushInterval": 1000}
# (owner, ledgers, ensemble, write quorum, ack quorum): a few applications with different quorums.
SAMPLE_OWNERS = (("orders", 4, 3, 2, 2), ("payments", 3, 3, 3, 2), ("clickstream", 3, 2, 2, 1),
                 ("audit-log", 2, 4, 2, 2))


@dataclass
class SampleData:
    """What ``add_sample_data`` made: the ledgers by kind, the bookie it killed, and the open writer."""

    closed: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    two_fragments: int | None = None
    open_ledger: int | None = None
    lost_bookie: str | None = None
    underreplicated: list[int] = field(default_factory=list)
    writer: LedgerHandle | None = None  # the open ledger's handle: the writer stays alive, silent


_local: dict = {}  # this interpreter's local cluster, its client, sample and watchdogs, once started


def cluster_uri() -> str:
    """The cluster to look at: ``METADATA_SERVICE_URI``, or a local cluster with sample data started once
    per interpreter (it takes ~10-20 s) and stopped, by PID, when the interpreter exits."""
    uri = os.environ.get(URI_VARIABLE)
    if uri:
        return uri
    if "cluster" not in _local:
        from bookie.testing.local_bookkeeper import LocalBookKeeper
        logging.getLogger("kazoo.client").setLevel(logging.ERROR)  # connection chatter while ZooKeeper starts
        cluster = LocalBookKeeper(SAMPLE_BOOKIES, bookie_settings=SAMPLE_BOOKIE_SETTINGS).start()
        _local["cluster"] = cluster
        atexit.register(_stop_local)
        _local["watchdog"] = _watchdog(cluster.base_dir, cluster_pids(cluster))
        _local["client"] = BookKeeper(cluster.metadata_service_uri)
        _local["sample"] = add_sample_data(_local["client"], kill=lambda bookie: cluster.kill_bookie(
            next(b.index for b in cluster.bookies if b.bookie_id == bookie), signal.SIGKILL))
    return _local["cluster"].metadata_service_uri


def cluster_pids(cluster) -> list[int]:
    """The PIDs of a LocalBookKeeper's running processes: ZooKeeper and the bookies."""
    procs = [cluster.zookeeper.proc, *(b.proc for b in cluster.bookies)]
    return [p.pid for p in procs if p is not None and p.poll() is None]


def _stop_local() -> None:
    client = _local.pop("client", None)
    if client is not None:
        client.close()  # the open sample ledger stays open in the metadata, as a crashed writer's
    _local.pop("cluster").stop()


def _watchdog(base_dir: str, pids: list[int]) -> subprocess.Popen:
    """A process that stops ``pids`` (a cluster's processes) and removes ``base_dir`` once this interpreter
    is gone, however it ended: a kernel shut down or killed runs no atexit handler. It waits for the end of
    its stdin, a pipe only this interpreter holds open (so the Popen must stay referenced)."""
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, base_dir, *map(str, pids)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


# Plain Python (no import of this package: it must start fast and outlive it). A PID is signalled only while
# its command line still names the cluster's directory, so a PID reused since is left alone.
_WATCHDOG = """
import os, shutil, signal, sys, time
base_dir, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
sys.stdin.buffer.read()
def ours(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return base_dir.encode() in f.read()
    except OSError:
        return False
for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 30.0)):
    alive = [pid for pid in pids if ours(pid)]
    for pid in alive:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while any(ours(pid) for pid in alive) and time.monotonic() < deadline:
        time.sleep(0.1)
shutil.rmtree(base_dir, ignore_errors=True)
"""


def spark_session(app_name: str = "spark-bookkeeper-notebook"):
    """A local[2] SparkSession (loopback only, quiet) with ``format("bookkeeper")`` registered."""
    from spark_bookkeeper import register
    from spark_bookkeeper.local_session import local_spark_session
    session = local_spark_session(app_name)
    register(session)
    return session


def audit_output(spark, uri: str, audit: str) -> str:
    """The directory the notebook reads ``audit``'s tables from: when ``AUDIT_OUTPUT`` is set, ``AUDIT_OUTPUT/<audit>``
    or ``AUDIT_OUTPUT`` itself, whichever holds the audit's runs (``bk audit`` or the jobs wrote them; nothing is
    run); else a temporary directory the audit has just run into."""
    if audit not in AUDITS:
        raise ValueError(f"unknown audit {audit!r}; the audits are {', '.join(AUDITS)}")
    given = os.environ.get(AUDIT_VARIABLE)
    if given:
        # Each audit writes its own --output directory: AUDIT_OUTPUT is one of them, or the directory above both.
        for output in (os.path.join(given, audit), given):
            if latest_run(spark, output, f"findings_{audit}") is not None:
                return output
        raise FileNotFoundError(f"{AUDIT_VARIABLE}={given} holds no run of the {audit} audit (nor does "
                                f"{os.path.join(given, audit)}): run `bk audit {audit} -u URI --output "
                                f"{os.path.join(given, audit)}` first, or unset {AUDIT_VARIABLE} to run one into a "
                                "temporary directory")
    output = tempfile.mkdtemp(prefix=f"bk-{audit}-audit-")
    _local.setdefault("cleaners", []).append(_watchdog(output, []))  # removed when the kernel ends
    from spark_bookkeeper.audit import run_replication_audit, run_storage_audit
    (run_storage_audit if audit == "storage" else run_replication_audit)(spark, uri, output)
    return output


def latest_run(spark, output: str, table: str):
    """The last run's rows of an audit table under ``output`` (its ``date`` and ``run`` columns kept), or None
    when no run wrote it."""
    from pyspark.sql import functions as F

    from spark_bookkeeper.audit.history import read_history
    history = read_history(spark, output, table)
    if history is None:
        return None
    last = history.agg(F.max(F.col("run").cast("string"))).first()[0]
    return history.where(F.col("run").cast("string") == last)


def add_sample_data(bk: BookKeeper, kill, seed: int = 14) -> SampleData:
    """Ledgers of a few owners (custom metadata ``application``), two of them deleted and their bytes left for
    compaction (a forced GC pass notices them), one ledger whose bookie ``kill(bookie_id)`` crashes mid-write
    (two fragments), and that bookie's ledgers marked under-replicated as BookKeeper's Auditor would; one
    ledger left open by a writer that keeps its handle. Needs at least four writable bookies."""
    bookies = sorted(bk.writable_bookies())
    if len(bookies) < SAMPLE_BOOKIES:
        raise ValueError(f"the sample needs {SAMPLE_BOOKIES} writable bookies; the cluster has {len(bookies)}: "
                         f"{', '.join(bookies) or 'none'}")
    rng = random.Random(seed)
    sample = SampleData()
    # The first ledger of each owner is deleted below: its bigger entries leave most logs under the major
    # compaction threshold (0.8), a few under the minor one.
    writers = [(bk.create_ledger(ensemble, write_quorum, ack_quorum, custom_metadata={OWNER_KEY: owner.encode()}),
                4096 if i == 0 else rng.choice((256, 1024)), rng.randrange(2, 12))
               for owner, count, ensemble, write_quorum, ack_quorum in SAMPLE_OWNERS for i in range(count)]
    for _ in range(10):  # in turns, so each entry log holds several ledgers (deleting one leaves garbage)
        for handle, size, batch in writers:
            handle.append_batch([rng.randbytes(size) for _ in range(batch)]).result(60)
    for handle, _, _ in writers:
        handle.close()
        sample.closed.append(handle.ledger.ledger_id)
    # Deleted ledgers: their bytes stay in the entry logs (garbage) until compaction.
    firsts = [sum(owner[1] for owner in SAMPLE_OWNERS[:i]) for i in range(len(SAMPLE_OWNERS))]
    sample.deleted = [sample.closed[i] for i in firsts]
    sample.closed = [ledger for ledger in sample.closed if ledger not in sample.deleted]
    for ledger in sample.deleted:
        bk.delete_ledger(ledger)
    # A writer whose bookie dies mid-ledger: the client replaces it (ensemble change), two fragments.
    victim = bookies[-1]
    handle = bk.create_ledger(3, 2, 2, custom_metadata={OWNER_KEY: b"orders"}, bookies=[*bookies[:2], victim])
    handle.append_batch([rng.randbytes(512) for _ in range(60)]).result(60)
    kill(victim)
    handle.append_batch([rng.randbytes(512) for _ in range(60)]).result(60)
    handle.close()
    sample.two_fragments, sample.lost_bookie = handle.ledger.ledger_id, victim
    # A writer that stays: its ledger open, growing no more (the audits' silent writer).
    sample.writer = bk.create_ledger(3, 2, 2, custom_metadata={OWNER_KEY: b"clickstream"})
    sample.writer.append_batch([rng.randbytes(256) for _ in range(10)]).result(60)
    sample.open_ledger = sample.writer.ledger.ledger_id
    # The lost bookie's ledgers marked as the Auditor's bookie check marks them, once its registration has
    # expired with its ZooKeeper session (no worker runs here, so they stay marked).
    _wait(lambda: victim not in bk.writable_bookies(), f"the registration of the killed bookie {victim} to expire")
    index = bookie_ledger_index(bk.store.ledgers_with_metadata(None))  # each ledger read once, pipelined
    manager = LedgerUnderreplicationManager(bk.store, "notebook-sample")
    for ledger, missing in sorted(ledgers_to_mark(index, lost_bookies(index, bk.writable_bookies(),
                                                                      bk.readonly_bookies())).items()):
        manager.mark_ledger_underreplicated(ledger, sorted(missing))
        sample.underreplicated.append(ledger.ledger_id)
    for bookie in bk.writable_bookies():
        _forced_gc_pass(bk, bookie)
    return sample


def _forced_gc_pass(bk: BookKeeper, bookie: str) -> None:
    """A GC pass on ``bookie``, waited for, with compaction suspended meanwhile (a forced pass compacts):
    the deleted ledgers' bytes stay for the storage tables, the next compaction's candidates."""
    client = bk.bookie_client(bookie)
    client.garbage_collection(pb.GarbageCollectionRequest.SUSPEND, major=True, minor=True)
    target = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
    _wait(lambda: client.garbage_collection().passes >= target, f"GC pass {target} of bookie {bookie}")
    client.garbage_collection(pb.GarbageCollectionRequest.RESUME, major=True, minor=True)


def _wait(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.1)
