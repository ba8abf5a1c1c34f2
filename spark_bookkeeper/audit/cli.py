"""The audits' command line, shared by ``spark-submit jobs/<audit>_audit.py`` and ``bk audit <audit>``: the
arguments, the run (one progress line per phase on stderr), a one-line summary per finding, and the exit code
(result.py). Ctrl-C or a failure during the run: its Spark jobs cancelled, its staging directories removed
(staging.py), the session this command started stopped without waiting for running tasks, and one line on
stderr that says so; exit code 130 for Ctrl-C, 1 for a failure. ``--remote sc://host:port`` (or SPARK_REMOTE)
runs the audit on a Spark Connect server (connect.py)."""
from __future__ import annotations

import argparse
import math
import sys
import traceback

from spark_bookkeeper.audit import replication, storage
from spark_bookkeeper.audit.history import Run
from spark_bookkeeper.audit.result import EXIT_FAILED, EXIT_USAGE, INTERRUPTED, AuditResult, RunAborted
from spark_bookkeeper.audit.threads import on_a_fresh_connection
from spark_bookkeeper.options import BOOKIE_TIMEOUT

AUDITS = ("storage", "replication")


def add_arguments(parser: argparse.ArgumentParser, audit: str, with_uri: bool = True) -> None:
    """The audit's own arguments (``with_uri``: also -u/--metadata-service-uri, which ``bk`` adds itself)."""
    if with_uri:
        parser.add_argument("-u", "--metadata-service-uri", required=True, help="zk://host:port/ledgers")
    parser.add_argument("--output", required=True,
                        help="directory of the Parquet tables (OUTPUT/<table>/date=YYYY-MM-DD/run=…/) and reports")
    parser.add_argument("--run-at", type=Run.parse, default=None,
                        help="the run's time, YYYY-MM-DD or ISO 8601 UTC (default: now); ages are measured at it "
                             "(backfills, tests)")
    parser.add_argument("--report-dir", help="where the Markdown report and plots go (default: OUTPUT/reports/"
                                             "<audit>/date=…/run=…/; required if OUTPUT is not local)")
    parser.add_argument("--master", help="Spark master when not run by spark-submit (default: local[*])")
    parser.add_argument("--remote", help="run on this Spark Connect server (sc://host:port; default: SPARK_REMOTE "
                                         "if set); OUTPUT must then be a local path both this client and the "
                                         "server see")
    parser.add_argument("--bookie-timeout", type=float, default=BOOKIE_TIMEOUT,
                        help="seconds each bookie's answer is waited for at least, more the more entries it lists "
                             "(10 us each): a bookie slower than that is reported unavailable and its fragments "
                             "unverified (default %(default)s)")
    if audit == "storage":
        parser.add_argument("--stale-gc-passes", type=int, default=storage.DEFAULT_STALE_GC_PASSES,
                            help="bytes of a ledger the metadata lacks still on disk more than N GC passes after GC "
                                 "saw the deletion (before it has: after the run that first found them) are reported "
                                 "stale, a warning (default %(default)s)")
        parser.add_argument("--owner-key", default=",".join(storage.DEFAULT_OWNER_KEYS),
                            help="custom-metadata keys naming a ledger's owner, first present wins "
                                 "(default %(default)s; Pulsar topics: pulsar/managed-ledger)")
    else:
        parser.add_argument("--max-underreplicated", type=int, default=replication.DEFAULT_MAX_UNDERREPLICATED,
                            help="at risk when more ledgers than this are under-replicated (default %(default)s)")
        parser.add_argument("--max-underreplicated-age", type=int,
                            default=replication.DEFAULT_MAX_UNDERREPLICATED_AGE,
                            help="at risk when a ledger has been under-replicated longer than this, seconds "
                                 "(default %(default)s)")
        parser.add_argument("--silent-after", type=int, default=replication.DEFAULT_SILENT_AFTER,
                            help="an open ledger without a new entry for this long (seconds, compared with an "
                                 "earlier run) has a silent writer (default %(default)s)")


def session(master: str | None, audit: str, remote: str | None = None):
    """The SparkSession: on the Spark Connect server ``remote`` (or SPARK_REMOTE's), else spark-submit's when
    run by it, else a local one; the bookkeeper format registered."""
    import os

    from pyspark.sql import SparkSession

    import spark_bookkeeper
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        if master:
            raise ValueError("give --master or --remote, not both: a Spark Connect server has its own master")
        spark = SparkSession.builder.remote(remote).getOrCreate()
        spark_bookkeeper.register(spark)  # the server's Python needs the package all the same (its workers)
        return spark
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors need this environment's packages
    builder = SparkSession.builder.appName(f"bookkeeper-{audit}-audit")
    if not sys.stderr.isatty():  # Spark's progress bars redraw with \r: one long line of garbage in a log file
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    # spark-submit (or a pyspark shell) started the JVM and set the master: PYSPARK_GATEWAY_PORT names it.
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or "local[*]")
        if not master or master.startswith("local"):  # everything in this process: loopback only, no UI
            builder = (builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                       .config("spark.ui.enabled", "false"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark_bookkeeper.register(spark)
    return spark


def check_arguments(audit: str, args: argparse.Namespace) -> None:
    """Bad thresholds fail before Spark starts."""
    names = ("stale_gc_passes",) if audit == "storage" else (
        "max_underreplicated", "max_underreplicated_age", "silent_after")
    for name in names:
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)} must be 0 or more")
    if not 0 < args.bookie_timeout < math.inf:
        raise ValueError(f"--bookie-timeout {args.bookie_timeout} must be a finite number of seconds above 0")
    if audit == "storage" and not any(k.strip() for k in args.owner_key.split(",")):
        raise ValueError("--owner-key names no key; give custom-metadata keys, e.g. application")


def print_progress(line: str) -> None:
    """Where the command line shows an audit's phases: one line each on stderr."""
    print(line, file=sys.stderr, flush=True)


def run(audit: str, args: argparse.Namespace, spark=None) -> AuditResult:
    """Run ``audit`` as ``args`` say, on ``spark`` (default: ``session``, stopped if the run ends early)."""
    if audit not in AUDITS:
        raise ValueError(f"unknown audit {audit!r}; audits: {', '.join(AUDITS)}")
    if not args.metadata_service_uri:
        raise ValueError("no metadata service URI: give -u zk://host:port/ledgers (or --conf with metadataServiceUri)")
    check_arguments(audit, args)
    from spark_bookkeeper.audit.common import check_cluster
    check_cluster(args.metadata_service_uri)  # no cluster: exit 2 at once, before Spark starts
    if spark is not None:
        return _run(audit, args, spark)
    spark = session(args.master, audit, getattr(args, "remote", None))
    try:
        return _run(audit, args, spark)
    except RunAborted:
        on_a_fresh_connection(lambda: stop_quietly(spark))  # this thread's may be broken by the interrupt
        raise


def stop_quietly(spark) -> None:
    """Stop a session whose jobs were cancelled, without waiting for their tasks, and without their last words
    in the log (the run has said what happened). A Spark Connect session is released: the server runs on."""
    from spark_bookkeeper.audit.connect import is_connect
    if not is_connect(spark):
        spark.sparkContext.setLogLevel("OFF")
    spark.stop()


def _run(audit: str, args: argparse.Namespace, spark) -> AuditResult:
    common = dict(run=args.run_at, report_dir=args.report_dir, progress=print_progress,
                  bookie_timeout=args.bookie_timeout)
    if audit == "storage":
        keys = tuple(k.strip() for k in args.owner_key.split(",") if k.strip())
        return storage.run_storage_audit(spark, args.metadata_service_uri, args.output,
                                         stale_gc_passes=args.stale_gc_passes, owner_keys=keys, **common)
    return replication.run_replication_audit(spark, args.metadata_service_uri, args.output,
                                             max_underreplicated=args.max_underreplicated,
                                             max_underreplicated_age=args.max_underreplicated_age,
                                             silent_after=args.silent_after, **common)


def execute(audit: str, args: argparse.Namespace) -> int:
    """Run, print the summary (stdout); a run that ended early ends with the one line that says what was done
    (stderr; after the traceback of an unexpected failure). The exit code."""
    from bookie.exceptions import BKException
    try:
        result = run(audit, args)
    except RunAborted as aborted:
        if aborted.exit_code == EXIT_FAILED and not isinstance(aborted.__cause__, (BKException, OSError, ValueError)):
            traceback.print_exception(aborted.__cause__, file=sys.stderr)
        print(aborted, file=sys.stderr)
        return aborted.exit_code
    print(summary(result))
    return result.exit_code


def summary(result: AuditResult) -> str:
    lines = [f"{result.audit} audit {result.run.at:%Y-%m-%dT%H:%M:%SZ}: "
             + ("DATA AT RISK" if result.at_risk else "nothing at risk")]
    for f in result.findings:
        flag = "AT RISK " if f.at_risk and f.count else ""
        lines.append(f"  {flag}{f.kind}: {f.count} ({f.summary})")
    lines.append(f"  report: {result.report}")
    return "\n".join(lines)


def main(audit: str, argv: list[str] | None = None) -> int:
    """The job scripts' entry point: parse, run, print the summary; the exit code (result.py)."""
    from bookie.exceptions import BKException
    parser = argparse.ArgumentParser(prog=f"{audit}_audit.py",
                                     description=f"The {audit} audit of a BookKeeper cluster (Spark job)")
    add_arguments(parser, audit)
    args = parser.parse_args(argv)
    try:
        return execute(audit, args)
    except (BKException, ValueError, OSError) as exc:
        print(f"{audit} audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # outside the run (Spark starting, or stopping): nothing of the run was written
        print(f"{audit} audit: interrupted; nothing of the run was kept", file=sys.stderr)
        return INTERRUPTED
