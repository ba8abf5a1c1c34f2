"""Scale benchmark (issue 31): the metadata walks of the data source, the Auditor and the storage audit at
10,000 and 100,000 ledgers (1,000,000 with ``--million``), each next to a bare pipelined read of the same
ledger znodes in the same run, and the driver's peak memory.

One ZooKeeper, three bookie processes (LocalBookKeeper), a local[2] SparkSession. The cluster holds
``--real`` (10,000) small closed ledgers written by the project's client (3 entries x 1 KiB, E=3 WQ=2 AQ=2)
plus one ledger of the same bytes (3 x ``--real`` entries), and, for the rest up to N, *metadata-only*
ledgers: znodes written pipelined (kazoo create_async) in the project's layout (bookie.meta.layout,
bookie.meta.ledger_metadata.serialize), each an empty closed ledger (last entry -1, length 0) on the three
real bookies: nothing is missing on any bookie and the Auditor has no entry to check for them. All in
scope 0, so the table, the plan and the audits walk every ledger. Populated once, N increasing.

For each N, a fresh driver process (so that its peak memory is its own) runs, the best of ``--runs`` after
one warm-up round (bench/spark_common.py's best_of_each):

  bare     listing (the store's ledger_ranges: one get_children per tree node) + kazoo get_async of every
           ledger znode, 1,000 in flight, no parsing: the floor of any walk of the metadata
  table    spark.read.format("bookkeeper").option("table", "ledgers").load().count()
  plan     spark_bookkeeper.reader.plan(ReadOptions.parse({metadataServiceUri, scope: "0"})) on the driver:
           what format("bookkeeper") computes for a scope read's partitions
  audit    spark_bookkeeper.audit.run_storage_audit into a fresh directory (tables as Parquet + report)
then, after the driver's peak memory over those four is taken,
  auditor  Auditor(...).check_all_ledgers() (LedgerChecker over every ledger)
  small    (smallest N only: the real ledgers are the same at every N) count() of option("ledgers", <the
           real small ledgers' ids>) next to
  one      count() of option("ledgers", <the one big ledger>): the same entries, the same bytes.

Each figure comes with the ZooKeeper requests it made (``srvr``'s Received counter before and after, as
bench/gc.py counts them; the session pings of the bookies and the driver are in it, a few per second).
Driver memory: the Python driver's peak RSS (VmHWM) over bare+table+plan+audit, and each operation's own
peak growth (VmHWM reset through /proc/self/clear_refs before each); the largest peak of the JVM's Python
workers over the same (a Python data source's ``partitions()``, e.g. the ``ledgers`` table's rows, runs in
one of them, not in the driver process); the Spark driver JVM's RSS, sampled every 0.5 s.

Targets (issue 31): table and plan <= 1.5x the bare read; small <= 3x one; auditor <= 2x the bare read;
the driver's peak at the largest N within 1.5x of that at the smallest (printed for the Python driver, the
largest worker and the JVM). The bench prints, never asserts.

    python bench/scale.py                          # 10,000 and 100,000 ledgers (the issue's sizes)
    python bench/scale.py --million                # and 1,000,000 metadata-only where the machine allows
    python bench/scale.py --ledgers 1000,2000 --real 300 --runs 1    # a quick development run
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Callable

from kazoo.client import KazooClient

from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState, serialize
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.zookeeper_server import DEFAULT_HEAP_MB, ZooKeeperServer, received_requests
from bookie.util.processes import stop_process, tail

from results import Figure, record
from spark_common import best_of_each


SIZES = (10_000, 100_000)
MILLION = 1_000_000
REAL = 10_000  # small real ledgers
ENTRIES = 3  # per small ledger
ENTRY = 1024  # bytes
E, WQ, AQ = 3, 2, 2
WINDOW = 1000  # requests in flight: the bare read's, the populating's, the store's READ_WINDOW
BATCH = 1000  # entries per append_batch of the big ledger
# Metadata-only ledgers get ids far above any the id generator hands out here: no collision with a real one.
METADATA_ONLY_BASE = 1_000_000_000
# Each ledger znode costs ZooKeeper ~0.3-0.5 KiB of heap with its path and stat: the default 256 MiB
# (bookie/testing/zookeeper_server.py) is ample for 100,000, not for a million.
MILLION_ZK_HEAP_MB = 1024
MILLION_FREE_MB = 8192  # the machine's available memory a million-ledger run needs (ZooKeeper, driver, JVM)
# Bookie sessions of 30 s: fewer pings in the request counts; no GC pass or compaction during the run.
SETTINGS = {"zkTimeout": 30000, "gcWaitTime": 3_600_000, "majorCompactionThreshold": 0.0,
            "minorCompactionThreshold": 0.0}
PASSWORD = b""  # the data source's default: the reads need no password option
TARGETS = {"table": 1.5, "plan": 1.5, "auditor": 2.0, "small": 3.0, "memory": 1.5}
PEAKS = {"driver_peak": "Python driver", "worker_peak": "largest Python worker (table rows, read plans)",
         "jvm_peak": "Spark driver JVM"}


# -- populating (the main process) --------------------------------------------------------------------------
def write_real(bk, count: int, threads: int) -> tuple[list[int], int]:
    """``count`` small closed ledgers and one ledger of the same entries: (small ids, big id)."""
    payloads = [os.urandom(ENTRY) for _ in range(ENTRIES)]

    def one(_: int) -> int:
        handle = bk.create_ledger(E, WQ, AQ, password=PASSWORD, custom_metadata={"application": b"small"})
        handle.append_batch(payloads).result(120)
        handle.close()
        return handle.ledger.ledger_id

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        small = list(pool.map(one, range(count)))
    big = bk.create_ledger(E, WQ, AQ, password=PASSWORD, custom_metadata={"application": b"big"})
    everything = payloads * count
    # A few batches in flight: the client pipelines them as the small ledgers' threads did theirs.
    futures = [big.append_batch(everything[i:i + BATCH]) for i in range(0, len(everything), BATCH)]
    for future in futures:
        future.result(300)
    big.close()
    return small, big.ledger.ledger_id


def write_metadata_only(zk: KazooClient, root: str, manager: str, first: int, count: int, bookies: list[str]) -> None:
    """``count`` empty closed ledgers' znodes from id METADATA_ONLY_BASE + ``first``, ``WINDOW`` creates in flight."""
    data = serialize(LedgerMetadata(E, WQ, AQ, ((0, tuple(bookies[:E])),), PASSWORD, state=LedgerState.CLOSED,
                                    last_entry_id=-1, length=0, custom_metadata=(("application", b"metadata-only"),)))
    paths = [layout.ledger_path(root, manager, LedgerId(0, METADATA_ONLY_BASE + i))
             for i in range(first, first + count)]
    for parent in sorted({p.rsplit("/", 1)[0] for p in paths}):  # few: one per 10,000 ledgers
        zk.ensure_path(parent)
    pending: deque = deque()
    for path in paths:
        pending.append(zk.create_async(path, data))
        if len(pending) >= WINDOW:
            pending.popleft().get(timeout=60)
    while pending:
        pending.popleft().get(timeout=60)


# -- the driver (a process of its own per N) -------------------------------------------------------------------
def _status(pid: int | str, key: str) -> int:
    """A /proc/<pid>/status field in bytes (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        out[int(pid)] = (int(stat[stat.rindex(")") + 2:].split()[1]), stat[stat.index("(") + 1:stat.rindex(")")])
    return out


def spark_jvm_pid() -> int | None:
    """The Spark driver JVM: the java child of this process."""
    return next((pid for pid, (parent, comm) in _processes().items() if parent == os.getpid() and comm == "java"), None)


class Memory:
    """The driver's peak RSS (VmHWM, reset with clear_refs before each operation where the kernel allows); the
    Spark JVM's and its Python workers' RSS, sampled every SAMPLE_S. The workers matter: a Python data source's
    ``partitions()`` (the ``ledgers`` table's rows, a read's plan) runs in a worker the JVM starts, not here."""

    SAMPLE_S = 0.5  # each sample walks /proc: seldom, so as to take little from the measured work

    def __init__(self, jvm_pid: int | None):
        self.jvm_pid = jvm_pid
        self.resettable = self._clear_refs()
        self.jvm_peak = 0
        self.worker_peak = 0  # the largest peak (VmHWM) of any one Python worker seen
        self._op = {"jvm": 0, "workers": 0}  # the current operation's sampled peaks
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True, name="spark-rss")
        self._sampler.start()

    @staticmethod
    def _clear_refs() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # 5: reset the peak RSS (VmHWM) to the current RSS
            return True
        except OSError:
            return False

    def _workers(self) -> list[int]:
        """The Python processes under the JVM (pyspark's daemon and the workers it forks)."""
        processes, tree, found = _processes(), {self.jvm_pid}, []
        grew = True
        while grew:  # a few rounds: the daemon's children are the JVM's grandchildren
            grew = False
            for pid, (parent, comm) in processes.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
                    if comm.startswith("python"):
                        found.append(pid)
        return found

    def _take(self) -> None:
        """One sample: the JVM's RSS, each worker's RSS and lifetime peak."""
        if self.jvm_pid is None:
            return
        jvm = _status(self.jvm_pid, "VmRSS")
        workers = self._workers()
        self._op["jvm"] = max(self._op["jvm"], jvm)
        self._op["workers"] = max([self._op["workers"]] + [_status(w, "VmRSS") for w in workers])
        self.jvm_peak = max(self.jvm_peak, jvm)
        self.worker_peak = max([self.worker_peak] + [_status(w, "VmHWM") for w in workers])

    def _sample(self) -> None:
        while not self._stop.wait(self.SAMPLE_S):
            self._take()

    def measured(self, fn: Callable[[], object], into: dict) -> Callable[[], None]:
        """``fn`` recording into ``into`` (the max over its calls): the driver's peak RSS and its growth over
        the RSS before; the JVM's and its largest Python worker's sampled peaks."""
        def run() -> None:
            if self.resettable:
                self._clear_refs()
            before = _status("self", "VmRSS")
            self._op = {"jvm": 0, "workers": 0}
            self._take()  # at both ends too: an operation may be shorter than SAMPLE_S
            fn()
            self._take()
            peak = _status("self", "VmHWM")
            into["peak"] = max(into.get("peak", 0), peak)
            into["growth"] = max(into.get("growth", 0), peak - before) if self.resettable else None
            into["jvm_peak"] = max(into.get("jvm_peak", 0), self._op["jvm"])
            into["workers_peak"] = max(into.get("workers_peak", 0), self._op["workers"])
        return run

    def close(self) -> None:
        self._stop.set()
        self._sampler.join()


def bare_read(zk: KazooClient, store, figures: dict) -> None:
    """Listing (the store's ledger_ranges) then kazoo get_async of every ledger znode, WINDOW in flight."""
    start = time.perf_counter()
    paths = [store.ledger_path(LedgerId(0, i)) for r in store.ledger_ranges(0) for i in sorted(r.ledgers)]
    listed = time.perf_counter()
    pending: deque = deque()
    for path in paths:
        pending.append(zk.get_async(path))
        if len(pending) >= WINDOW:
            pending.popleft().get(timeout=60)
    while pending:
        pending.popleft().get(timeout=60)
    figures.update(listing=listed - start, reads=time.perf_counter() - listed, ledgers=len(paths))


def driver(config_path: str) -> None:
    """One N's driver work; its figures as JSON next to ``config_path``."""
    with open(config_path) as f:
        config = json.load(f)
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    from spark_bookkeeper.notebook import spark_session
    spark = spark_session("bench-scale")  # before any gRPC thread of this process: the JVM is forked
    from bookie.client import BookKeeper
    from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
    from bookie.meta.zk_metadata_store import ZKMetadataStore
    from bookie.replication.auditor import Auditor
    from bookie.server.conf import ServerConfiguration
    from spark_bookkeeper.audit import run_storage_audit
    from spark_bookkeeper.options import ReadOptions
    from spark_bookkeeper.reader import plan

    uri, port, runs = config["uri"], config["zk_port"], config["runs"]
    memory = Memory(spark_jvm_pid())
    figures: dict[str, dict] = {}
    zk = KazooClient(config["zk_hosts"], timeout=30)
    zk.start()
    store = ZKMetadataStore(uri, zk_timeout_ms=30000)
    bk = BookKeeper(uri)
    outputs = iter(range(1_000_000))

    def contender(name: str, fn: Callable[[], object]) -> Callable[[], None]:
        """``fn`` measured: memory, and the ZooKeeper requests of its last call."""
        into = figures.setdefault(name, {})

        def counted() -> None:
            before = received_requests(port)
            fn()
            into["zk_requests"] = received_requests(port) - before
        return memory.measured(counted, into)

    def count(option: str, value: str) -> Callable[[], int]:
        return lambda: (spark.read.format("bookkeeper").option("metadataServiceUri", uri)
                        .option(option, value).load().count())

    try:
        partitions = []
        best = best_of_each(runs, {
            "bare": contender("bare", lambda: bare_read(zk, store, figures["bare"])),
            "table": contender("table", count("table", "ledgers")),
            "plan": contender("plan", lambda: partitions.append(len(plan(ReadOptions.parse(
                {"metadataServiceUri": uri, "scope": "0"}))))),
            "audit": contender("audit", lambda: run_storage_audit(
                spark, uri, os.path.join(config["output"], f"audit-{next(outputs)}"))),
        })
        # The peaks over bare (a window of answers), table, plan and audit (clear_refs resets ru_maxrss too);
        # a worker's VmHWM is its lifetime's: taken now, before the reads of data below.
        peak, worker_peak = max(figures[name]["peak"] for name in best), memory.worker_peak
        auditor = Auditor("bench-scale", store, LedgerUnderreplicationManager(store, "bench-scale"),
                          ServerConfiguration({"auditorPeriodicCheckInterval": 0}), client=lambda: bk)
        later = {"auditor": contender("auditor", auditor.check_all_ledgers)}
        if config["small"]:
            later["small"] = contender("small", count("ledgers", ",".join(map(str, config["small"]))))
            later["one"] = contender("one", count("ledgers", str(config["big"])))
        best.update(best_of_each(runs, later))
        for name, seconds in best.items():
            figures[name]["seconds"] = seconds
        figures["plan"]["partitions"] = partitions[-1]
        result = {"figures": figures, "driver_peak": peak, "worker_peak": worker_peak, "jvm_peak": memory.jvm_peak,
                  "small": len(config["small"] or ()), "real": config["real"]}
    finally:
        memory.close()
        bk.close()
        store.close()
        zk.stop()
        zk.close()
        spark.stop()
    with open(config["result"], "w") as f:
        json.dump(result, f)


def run_driver(base: str, config: dict, timeout: float) -> dict:
    """The driver work of one N in a fresh process (its own process group, stopped by PID); its figures."""
    config = {**config, "result": os.path.join(base, f"result-{config['n']}.json"),
              "output": os.path.join(base, f"audit-{config['n']}")}
    path = os.path.join(base, f"driver-{config['n']}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    log_path = os.path.join(base, f"driver-{config['n']}.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--driver", path], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        code = stop_process(proc)  # a no-op once it has exited; else its group, the Spark JVM with it
    if code != 0 or not os.path.exists(config["result"]):
        why = f"was stopped after --timeout {timeout:.0f} s" if timed_out else f"ended with code {code}"
        raise RuntimeError(f"the driver of N={config['n']:,} {why}:\n{tail(log_path)}")
    with open(config["result"]) as f:
        return json.load(f)


# -- report -----------------------------------------------------------------------------------------------------
def verdict(ratio: float, target: float) -> str:
    return f"{ratio:5.2f}x (target <= {target}x: {'met' if ratio <= target else 'MISSED'})"


def mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:,.0f} MB"


def report(n: int, result: dict) -> None:
    f = result["figures"]
    bare = f["bare"]["seconds"]
    ledgers = f["bare"]["ledgers"]

    def row(label: str, name: str, extra: str = "", per: int = ledgers) -> None:
        x = f[name]
        requests = x["zk_requests"]
        growth = "" if x["growth"] is None else f"driver +{mb(x['growth'])}, "
        print(f"  {label:36s} {x['seconds']:8.2f} s {requests:9,} ZK requests ({requests / per:5.2f}/ledger); "
              f"{growth}worker {mb(x['workers_peak'])}, JVM {mb(x['jvm_peak'])}  {extra}")

    print(f"N = {n:,} ledgers ({ledgers:,} listed):")
    if bare < 1:  # a Spark job alone costs ~0.3-1 s here
        print("  (the bare read takes under a second: the ratios below measure fixed costs more than the walks)")
    row("bare: listing + get_async x1000", "bare",
        f"(listing {f['bare']['listing']:.2f} s, reads {f['bare']['reads']:.2f} s)")
    row("table=ledgers count()", "table", verdict(f["table"]["seconds"] / bare, TARGETS["table"]))
    row(f"plan of scope 0 ({f['plan']['partitions']} partitions)", "plan",
        verdict(f["plan"]["seconds"] / bare, TARGETS["plan"]))
    row("Auditor.check_all_ledgers", "auditor", verdict(f["auditor"]["seconds"] / bare, TARGETS["auditor"])
        + f" ({result['real']:,} ledgers with entries; the rest empty)")
    row("storage audit", "audit", f"({f['audit']['seconds'] / f['table']['seconds']:.1f}x the table; "
                                  f"{f['audit']['seconds'] / bare:.1f}x the bare read; no target here)")
    if "small" in f:
        row(f"count() of the {result['small']:,} small ledgers", "small", per=result["small"])
        row("count() of the one big ledger", "one", per=1)
        print(f"  {'small / one':36s} {verdict(f['small']['seconds'] / f['one']['seconds'], TARGETS['small'])}")
    print(f"  peak RSS over bare+table+plan+audit: Python driver {mb(result['driver_peak'])}, largest Python worker "
          f"{mb(result['worker_peak'])}; Spark driver JVM (sampled, whole run) {mb(result['jvm_peak'])}", flush=True)


def heap_mb(pid: int) -> int | None:
    """The -Xmx of a running JVM, in MiB (None: not given)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        args = f.read().decode().split("\0")
    for arg in reversed(args):  # the last -Xmx counts
        if arg.startswith("-Xmx"):
            size = arg[4:].lower()
            unit = {"k": 1 / 1024, "m": 1, "g": 1024}.get(size[-1])
            return int(int(size[:-1]) * unit) if unit else int(size) >> 20
    return None


def million_refusal(zk_heap: int | None) -> str | None:
    """Why 1,000,000 ledgers cannot run here, or None."""
    if zk_heap is not None and zk_heap < MILLION_ZK_HEAP_MB:
        return (f"ZooKeeper runs with -Xmx{zk_heap}m, too small for a million ledger znodes "
                f"(~{MILLION_ZK_HEAP_MB} MB needed; --million gives it that)")
    with open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) // 1024 for line in f if line.startswith("MemAvailable:"))
    if available < MILLION_FREE_MB:
        return f"{available:,} MB of memory available, {MILLION_FREE_MB:,} MB needed"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", default=",".join(map(str, SIZES)), help="sizes N, comma separated")
    parser.add_argument("--million", action="store_true", help="and 1,000,000 ledgers where the machine allows")
    parser.add_argument("--real", type=int, default=REAL, help="small real ledgers (the rest up to N: metadata only)")
    parser.add_argument("--runs", type=int, default=1, help="timed runs after the warm-up round (best kept)")
    parser.add_argument("--threads", type=int, default=16, help="writer threads of the setup")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds one N's driver may take")
    parser.add_argument("--driver", help=argparse.SUPPRESS)  # the driver process of one N (internal)
    args = parser.parse_args()
    if args.driver:
        driver(args.driver)
        return
    sizes = sorted({int(s) for s in args.ledgers.split(",") if s.strip()})
    if sizes[0] < args.real:
        parser.error(f"--ledgers: each N at least --real = {args.real:,} (N counts the small real ledgers; the big "
                     "one comes on top)")
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    base = tempfile.mkdtemp(prefix="bk-bench-scale-", dir=os.environ.get("BENCH_DIR"))
    zookeeper = ZooKeeperServer(os.path.join(base, "zookeeper"),
                                heap_mb=MILLION_ZK_HEAP_MB if args.million else DEFAULT_HEAP_MB)
    cluster = LocalBookKeeper(3, base_dir=os.path.join(base, "cluster"), zookeeper=zookeeper,
                              bookie_settings=SETTINGS)
    zk = None
    results = {}
    try:
        zookeeper.start()
        cluster.start()
        zk_heap = heap_mb(cluster.zookeeper.proc.pid)
        refusal = million_refusal(zk_heap)
        if args.million and refusal is None:
            sizes = sorted(set(sizes) | {MILLION})
        from bookie.client import BookKeeper
        with BookKeeper(cluster.metadata_service_uri) as bk:
            start = time.perf_counter()
            small, big = write_real(bk, args.real, args.threads)
            written = time.perf_counter() - start
            root, manager, bookies = bk.store.root, bk.store.manager, sorted(bk.writable_bookies())
        print(f"setup: {args.real:,} small ledgers ({ENTRIES} x {ENTRY} B, E={E} WQ={WQ} AQ={AQ}) and one of "
              f"{ENTRIES * args.real:,} entries (the same bytes) written by the client in {written:.1f} s "
              f"({args.threads} threads)", flush=True)
        zk = KazooClient(cluster.zookeeper.connect_string, timeout=30)
        zk.start()
        made = 0  # metadata-only ledgers so far
        for n in sizes:
            wanted = max(0, n - args.real - 1)  # at N = --real: the small ones and the big one, none more
            start = time.perf_counter()
            write_metadata_only(zk, root, manager, made, wanted - made, bookies)
            print(f"N = {n:,}: {wanted - made:,} metadata-only ledgers added in {time.perf_counter() - start:.1f} s "
                  "(empty closed ledgers on the 3 bookies: nothing to check on a bookie); driver running...",
                  flush=True)
            made = wanted
            config = {"n": n, "uri": cluster.metadata_service_uri, "zk_port": cluster.zookeeper.port,
                      "zk_hosts": cluster.zookeeper.connect_string, "runs": args.runs,
                      "small": small if n == sizes[0] else None, "big": big, "real": args.real + 1}
            results[n] = run_driver(base, config, args.timeout)
            report(n, results[n])
    finally:
        if zk is not None:
            zk.stop()
            zk.close()
        cluster.stop()
        zookeeper.stop()
        shutil.rmtree(base, ignore_errors=True)
    conditions = f"3 bookies, one ZooKeeper (-Xmx{zk_heap}m), local[2], best of {args.runs} after a warm-up"
    if MILLION in results:
        million = "1,000,000 ledgers: ran"
    elif args.million:
        million = f"1,000,000 ledgers: not run: {refusal}"
    else:
        million = ("1,000,000 ledgers: not run (no --million)"
                   + (f"; it could not run here: {refusal}" if refusal else ""))
    print(f"scale bench: {conditions}")
    print(f"  {million}")
    if len(results) > 1:
        low, high = min(results), max(results)
        for key, label in PEAKS.items():
            ratio = results[high][key] / max(1, results[low][key])
            print(f"  peak RSS of the {label} at {high:,} vs {low:,} ledgers: {mb(results[high][key])} vs "
                  f"{mb(results[low][key])}: {verdict(ratio, TARGETS['memory'])}")
    record_figures(results, notes=[conditions, million])


def record_figures(results: dict[int, dict], notes: list[str]) -> None:
    """The summary as data (bench/results.py): each walk against the bare read of its N, small against one,
    the peaks at the largest N against those at the smallest."""
    figures = []
    for n, result in results.items():
        f = result["figures"]
        for key, label in (("table", "table"), ("plan", "plan"), ("auditor", "auditor"), ("audit", "storage audit")):
            figures.append(Figure(f"{label}, {n:,} ledgers", f[key]["seconds"], "s",
                                  baseline=f"bare read, {n:,} ledgers", baseline_value=f["bare"]["seconds"],
                                  target=f"<= {TARGETS[key]}" if key in TARGETS else None))
        if "small" in f:
            figures.append(Figure("count() of the small ledgers", f["small"]["seconds"], "s",
                                  baseline="count() of one ledger of the same entries",
                                  baseline_value=f["one"]["seconds"], target=f"<= {TARGETS['small']}"))
    if len(results) > 1:
        low, high = min(results), max(results)
        for key, label in PEAKS.items():
            label = label.partition(" (")[0]  # the name without the print's aside
            figures.append(Figure(f"peak RSS, {label}, {high:,} ledgers", results[high][key] / 2**20, "MB",
                                  baseline=f"{label}, {low:,} ledgers", baseline_value=results[low][key] / 2**20,
                                  target=f"<= {TARGETS['memory']}"))
    record("scale", figures, notes)


if __name__ == "__main__":
    main()
