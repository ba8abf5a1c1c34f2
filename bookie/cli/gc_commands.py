"""``bk shell gc``: force a garbage-collection pass on bookies and watch it, report their GC state,
suspend or resume compaction (what BookKeeper offers as HTTP admin: PUT /api/v1/bookie/gc,
GET /api/v1/bookie/gc_details, PUT gc/suspend_compaction and gc/resume_compaction).

    bk shell gc -u URI                      force a pass on every bookie, wait, report what came back
    bk shell gc -u URI --bookie B --major   the same on one bookie, major compaction allowed
    bk shell gc -u URI --status             report only
    bk shell gc -u URI --suspend minor      suspend minor compaction (major / minor / all); --resume likewise
"""
from __future__ import annotations

import time

from tqdm import tqdm

from bookie.cli.cluster_conf import client
from bookie.client.bookie_client import BookieClient
from bookie.exceptions import BKException, BKIncorrectParameterException
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status

Action = pb.GarbageCollectionRequest
POLL_INTERVAL = 0.5  # seconds between status requests while a forced pass runs
COMPACTIONS = {"major": (True, False), "minor": (False, True), "all": (True, True)}


def register_shell(commands, add_uri_args) -> None:
    gc = commands.add_parser("gc", help="force a GC pass and wait for it, or report / suspend / resume GC")
    add_uri_args(gc)
    gc.add_argument("--bookie", action="append", help="this bookie only (repeatable; default: every bookie)")
    kind = gc.add_mutually_exclusive_group()
    kind.add_argument("--major", action="store_true", help="allow a major compaction in the forced pass")
    kind.add_argument("--minor", action="store_true", help="allow a minor compaction in the forced pass")
    what = gc.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="report the GC state only")
    what.add_argument("--suspend", choices=sorted(COMPACTIONS), help="suspend that compaction")
    what.add_argument("--resume", choices=sorted(COMPACTIONS), help="resume that compaction")
    gc.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for a forced pass (default 3600)")
    gc.set_defaults(run=run_gc)


def run_gc(args, conf) -> int:
    with client(args) as bk:
        bookies = args.bookie or sorted(bk.writable_bookies() + bk.readonly_bookies())
        failed = 0
        for bookie in bookies:
            transport = bk.bookie_client(bookie)
            if not isinstance(transport, BookieClient):
                print(f"{bookie}: a BookKeeper (Java) bookie, which has no GC request on its protocol: use its HTTP "
                      f"admin (PUT /api/v1/bookie/gc, GET /api/v1/bookie/gc_details)")
                failed += 1
                continue
            try:
                print(_run_on(transport, args))
            except BKException as exc:
                print(f"{bookie}: {exc}")
                failed += 1
        return 1 if failed else 0


def _run_on(client: BookieClient, args) -> str:
    if args.status:
        return describe(client.bookie_id, _checked(client.garbage_collection()))
    if args.suspend or args.resume:
        major, minor = COMPACTIONS[args.suspend or args.resume]
        action = Action.SUSPEND if args.suspend else Action.RESUME
        return describe(client.bookie_id, _checked(client.garbage_collection(action, major, minor)))
    before = _checked(client.garbage_collection())
    forced = _checked(client.garbage_collection(Action.FORCE, major=args.major, minor=args.minor))
    after = wait_for_pass(client, forced.forcedPass, args.timeout)
    return describe(client.bookie_id, after, before)


def _checked(response: pb.GarbageCollectionResponse) -> pb.GarbageCollectionResponse:
    if response.status != status.EOK:
        raise BKIncorrectParameterException(f"{status.name_of(response.status)}: {response.message}")
    return response


def wait_for_pass(client: BookieClient, pass_number: int, timeout: float) -> pb.GarbageCollectionResponse:
    """Poll the bookie until its pass ``pass_number`` is done, showing the running phase's progress."""
    deadline = time.monotonic() + timeout
    with tqdm(desc=f"{client.bookie_id} gc", unit="", leave=False, disable=None) as bar:  # off when not a terminal
        while True:
            state = _checked(client.garbage_collection())
            if state.passes >= pass_number:
                return state
            if time.monotonic() > deadline:
                raise BKException(f"pass {pass_number} on bookie {client.bookie_id} not done after {timeout:.0f} s "
                                  f"(now: {state.phase or 'waiting to start'})")
            bar.set_description(f"{client.bookie_id} gc: {state.phase or 'waiting to start'}")
            bar.total = state.phaseTotal or None
            bar.n = state.phaseDone
            bar.refresh()
            time.sleep(POLL_INTERVAL)  # an operator's progress display, not a synchronization


def describe(bookie: str, state: pb.GarbageCollectionResponse, before: pb.GarbageCollectionResponse | None = None) -> str:
    """The bookie's GC state as an operator reads it; with ``before``: what the pass just run changed."""
    lines = [f"{bookie}: {state.passes} GC passes; last started at {_clock(state.lastPassStartMs)}, "
             f"took {state.lastPassDurationMs / 1000:.1f} s"]
    if before is not None:
        lines.append(f"  this pass: {state.bytesReclaimed - before.bytesReclaimed:,} bytes reclaimed, "
                     f"{state.ledgersDeleted - before.ledgersDeleted} ledgers and "
                     f"{state.entryLogsDeleted - before.entryLogsDeleted} entry logs deleted, "
                     f"{state.majorCompactionCount - before.majorCompactionCount} major and "
                     f"{state.minorCompactionCount - before.minorCompactionCount} minor compactions")
    lines.append(f"  since start: {state.bytesReclaimed:,} bytes reclaimed, {state.ledgersDeleted} ledgers and "
                 f"{state.entryLogsDeleted} entry logs deleted; compactions: {state.majorCompactionCount} major "
                 f"(last {_clock(state.lastMajorCompactionMs)}), {state.minorCompactionCount} minor "
                 f"(last {_clock(state.lastMinorCompactionMs)})")
    suspended = [k for k, on in (("major", state.majorCompactionSuspended), ("minor", state.minorCompactionSuspended)) if on]
    if suspended:
        lines.append(f"  suspended: {' and '.join(suspended)} compaction")
    if state.passRunning:
        lines.append(f"  running now: {state.phase} ({state.phaseDone}/{state.phaseTotal})")
    total = sum(u.totalSize for u in state.entryLogs)
    remaining = sum(u.remainingSize for u in state.entryLogs)
    lines.append(f"  entry logs: {len(state.entryLogs)}, {remaining:,} of {total:,} bytes live"
                 + (f" ({remaining / total:.0%})" if total else ""))
    for u in sorted(state.entryLogs, key=lambda u: u.remainingSize / u.totalSize if u.totalSize else 0.0):
        usage = u.remainingSize / u.totalSize if u.totalSize else 0.0
        lines.append(f"    log {u.entryLogId:x}: {usage:6.1%} of {u.totalSize:,} bytes live, {u.ledgerCount} ledgers")
    for k in state.skipped:
        lines.append(f"  SKIPPED log {k.entryLogId:x} ({k.path}): {k.reason}")
    return "\n".join(lines)


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "never"
