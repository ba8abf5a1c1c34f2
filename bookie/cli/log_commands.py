"""``bk shell`` commands on logs (the Spark connector's named ledger lists, bookie.meta.log_metadata):
``listlogs``, ``loginfo``, ``truncatelog``.

``truncatelog --segments N`` drops the first N segments still in the log; ``--before-segment S`` those
numbered below S; ``--older-than 7d`` those committed more than that long ago. Segment numbers are
absolute, so what stays keeps its numbers and streams' offsets.
"""
from __future__ import annotations

import re

from bookie.cli.cluster_conf import client
from bookie.client.log_truncation import truncate_log
from bookie.meta.log_metadata import LogRetention, list_logs, read_log
from bookie.server.conf import ConfigurationException

DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``15m``, ``2h``, ``7d``; a bare number is milliseconds (Kafka's retention.ms)."""
    found = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)?\s*", text)
    if not found:
        raise ConfigurationException(f"duration {text!r}: a number with ms, s, m, h or d (e.g. 7d, 12h, 500ms)")
    return int(found.group(1)) * DURATION_UNITS_MS[found.group(2) or "ms"]


def register_shell(commands, add_uri_args) -> None:
    def command(name, help_text, run):
        parser = commands.add_parser(name, help=help_text)
        add_uri_args(parser)
        parser.set_defaults(run=run)
        return parser

    command("listlogs", "list the logs written by the Spark connector", run_listlogs)
    info = command("loginfo", "a log's segments (absolute numbers), commit times and pending deletions", run_loginfo)
    info.add_argument("--log", required=True, help="log name")
    truncate = command("truncatelog", "drop a log's first segments, then delete their ledgers", run_truncatelog)
    truncate.add_argument("--log", required=True, help="log name")
    which = truncate.add_mutually_exclusive_group(required=True)
    which.add_argument("--segments", type=int, help="drop this many first segments")
    which.add_argument("--before-segment", type=int, help="drop the segments numbered below this")
    which.add_argument("--older-than", help="drop the segments committed more than this long ago (7d, 12h, 30m)")


def run_listlogs(args, conf) -> int:
    with client(args) as bk:
        for name in sorted(list_logs(bk.store)):
            print(name)
    return 0


def run_loginfo(args, conf) -> int:
    with client(args) as bk:
        log = read_log(bk.store, args.log)
    print(f"log {log.name}: segments {log.first_segment}..{log.end_segment - 1} ({len(log.segments)}), "
          f"{sum(s.entries for s in log.segments)} entries, {sum(s.bytes for s in log.segments)} bytes")
    for number, s in log.numbered():
        print(f"  segment {number}: ledger {s.ledger}, {s.entries} entries, {s.bytes} bytes, committed_ms "
              f"{s.committed_ms if s.committed_ms is not None else 'unknown'}")
    pending = log.pending_deletion()
    if pending:
        print(f"  truncated, deletion pending: ledgers {', '.join(map(str, pending))}")
    return 0


def run_truncatelog(args, conf) -> int:
    for name in ("segments", "before_segment"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise ConfigurationException(f"--{name.replace('_', '-')} must not be negative")
    with client(args) as bk:
        if args.segments is not None:
            retention = LogRetention(before_segment=read_log(bk.store, args.log).first_segment + args.segments)
        elif args.before_segment is not None:
            retention = LogRetention(before_segment=args.before_segment)
        else:
            retention = LogRetention(max_age_ms=parse_duration_ms(args.older_than))
        result = truncate_log(bk, args.log, retention)
    print(result.describe())
    return 1 if result.failed else 0
