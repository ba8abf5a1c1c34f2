"""``bk audit storage|replication``: the Spark audit jobs (spark_bookkeeper.audit) from the ``bk`` command, on a
local Spark unless --master says otherwise. The exit code is the job's: 0 nothing at risk, 3 data at risk, 2 bad
arguments or no cluster, 1 the run failed, 130 Ctrl-C (nothing of the run is kept either way).

Every other ``bk`` command starts without importing Spark: the audit's own arguments are parsed when the
command runs (``bk audit storage --help`` lists them).
"""
from __future__ import annotations

import argparse

from bookie.cli.cluster_conf import add_uri_args, load_conf

AUDITS = {"storage": "live vs garbage bytes per bookie, what compaction would reclaim, orphans, space by owner",
          "replication": "under-replicated ledgers with reasons and age, short fragments, single-bookie ledgers, "
                         "silent writers"}


def register_top(commands, add_uri_args) -> None:
    audit = commands.add_parser("audit", help="storage or replication audit of the cluster (a Spark job); "
                                              "bk audit storage|replication --help lists its arguments",
                                description="Audits: " + "; ".join(f"{k}: {v}" for k, v in sorted(AUDITS.items()))
                                + ". bk audit AUDIT --help lists an audit's arguments.")
    audit.add_argument("audit", choices=sorted(AUDITS), help="the audit to run")
    audit.add_argument("audit_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    audit.set_defaults(run=run_audit)


def parser(audit: str) -> argparse.ArgumentParser:
    """The arguments of ``bk audit <audit>`` (imports Spark's audit module, so only when it runs)."""
    from spark_bookkeeper.audit import cli
    out = argparse.ArgumentParser(prog=f"bk audit {audit}", description=AUDITS[audit])
    add_uri_args(out, dirs=False)
    cli.add_arguments(out, audit, with_uri=False)
    return out


def parse(audit: str, argv: list[str]) -> argparse.Namespace:
    args = parser(audit).parse_args(argv)
    load_conf(args)  # fills in the cluster from $METADATA_SERVICE_URI or the configuration
    return args


def run_audit(args, conf) -> int:
    """The audit's exit code; Ctrl-C during its run: 130, after one line saying nothing of the run was kept."""
    from spark_bookkeeper.audit import cli
    return cli.execute(args.audit, parse(args.audit, args.audit_args))
