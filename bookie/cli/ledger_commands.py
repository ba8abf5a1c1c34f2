"""``bk shell`` ledger and bookie commands: listledgers, ledgermetadata, readledger, deleteledger,
simpletest, bookiesanity, bookieinfo; and ``bk bench write|read``.

Ledgers are named by id (``-l``), with ``--ledger-scope-id`` for 128-bit ids, or by
``--ledger-qualified-name`` (32 hex digits), as BP-35 proposes for the CLI.
"""
from __future__ import annotations

import sys
import threading

from tqdm import tqdm

from bookie.cli.cluster_conf import client
from bookie.cli.interrupts import INTERRUPTED, stop_on_interrupt
from bookie.cli.prompts import confirm
from bookie.client import benchmark
from bookie.client.bookkeeper import as_ledger_id
from bookie.client.bookkeeper_admin import SANITY_TEST_ENTRIES, BookKeeperAdmin
from bookie.exceptions import BKException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.server.conf import ConfigurationException


def add_ledger_args(parser, required: bool = True) -> None:
    parser.add_argument("-l", "--ledgerid", type=int, help="ledger id")
    parser.add_argument("--ledger-scope-id", type=int, default=0, help="scope of a 128-bit ledger id (default 0)")
    parser.add_argument("--ledger-qualified-name", help="the 128-bit ledger id as 32 hex digits")
    parser.set_defaults(ledger_required=required)


def ledger_of(args) -> LedgerId:
    if args.ledger_qualified_name:
        return LedgerId.from_qualified_name(args.ledger_qualified_name)
    if args.ledgerid is None:
        raise ConfigurationException("name a ledger: -l ID [--ledger-scope-id S] or --ledger-qualified-name HEX")
    return as_ledger_id(args.ledgerid, args.ledger_scope_id)


def register_shell(commands, add_uri_args) -> None:
    def command(name, help_text, run, ledger=False):
        parser = commands.add_parser(name, help=help_text)
        add_uri_args(parser)
        if ledger:
            add_ledger_args(parser)
        parser.set_defaults(run=run)
        return parser

    listledgers = command("listledgers", "list ledger ids (-m: with metadata)", run_listledgers)
    listledgers.add_argument("-m", "--meta", action="store_true", help="print each ledger's metadata")
    listledgers.add_argument("--ledger-scope-id", type=int, default=0, help="scope to list (default 0)")
    listledgers.add_argument("--all-scopes", action="store_true", help="list every scope")
    command("ledgermetadata", "print a ledger's metadata", run_ledgermetadata, ledger=True)
    readledger = command("readledger", "read a range of entries", run_readledger, ledger=True)
    readledger.add_argument("-fe", "--firstentryid", type=int, default=0, help="the first entry printed")
    readledger.add_argument("-le", "--lastentryid", type=int, default=-1, help="default: the last entry")
    readledger.add_argument("-m", "--msg", action="store_true", help="print payloads")
    deleteledger = command("deleteledger", "delete a ledger", run_deleteledger, ledger=True)
    deleteledger.add_argument("-f", "--force", action="store_true", help="do not ask for confirmation")
    simpletest = command("simpletest", "create a ledger, write entries, read them back", run_simpletest)
    simpletest.add_argument("-e", "--ensemble", type=int, default=3, help="ensemble size of the test ledger")
    simpletest.add_argument("-w", "--writeQuorum", type=int, default=2, help="its write quorum")
    simpletest.add_argument("-a", "--ackQuorum", type=int, default=2, help="its ack quorum")
    simpletest.add_argument("-n", "--numEntries", type=int, default=1000, help="entries written and read back")
    sanity = command("bookiesanity", "write and read entries on one bookie", run_bookiesanity)
    sanity.add_argument("-b", "--bookie", help="bookie id (default: this --conf's bookie)")
    sanity.add_argument("-e", "--entries", type=int, default=SANITY_TEST_ENTRIES,
                        help=f"entries written and read (default {SANITY_TEST_ENTRIES})")
    sanity.add_argument("-t", "--timeout", type=float, default=1.0,
                        help="seconds for each write and read (default 1, as BookKeeper's)")
    command("bookieinfo", "free and total disk of every bookie", run_bookieinfo)


def register_bench(commands, add_uri_args) -> None:
    bench = commands.add_parser("bench", help="throughput/latency benchmarks (BenchThroughputLatency)")
    kinds = bench.add_subparsers(dest="bench_command", required=True)
    write = kinds.add_parser("write", help="append for a while; entries/s, MB/s, latency percentiles")
    add_uri_args(write)
    write.add_argument("--entry-size", "-entrysize", type=int, default=1024, help="bytes per entry")
    write.add_argument("--ensemble", "-ensemble", type=int, default=3, help="ensemble size of each ledger")
    write.add_argument("--quorum", "-quorum", type=int, default=2, help="write quorum")
    write.add_argument("--ack-quorum", "-ackQuorum", type=int, default=2, help="acknowledgements an entry waits for")
    write.add_argument("--throttle", "-throttle", type=int, default=10000, help="appends in flight")
    write.add_argument("--time", "-time", type=float, default=10.0, help="seconds")
    write.add_argument("--ledgers", "-ledgers", type=int, default=1, help="ledgers the entries go to, round robin")
    write.set_defaults(run=run_bench_write)
    read = kinds.add_parser("read", help="read a ledger from start to end; entries/s, MB/s")
    add_uri_args(read)
    add_ledger_args(read)
    read.add_argument("--password", default="benchPasswd", help="the ledger's password (bk bench write's)")
    read.set_defaults(run=run_bench_read)


def describe(ledger: LedgerId, md: LedgerMetadata) -> str:
    lines = [f"ledgerID: {ledger}", f"  state: {md.state.name}, lastEntryId: {md.last_entry_id}, length: {md.length}",
             f"  ensembleSize: {md.ensemble_size}, writeQuorumSize: {md.write_quorum_size}, "
             f"ackQuorumSize: {md.ack_quorum_size}, digestType: {md.digest_type.name}, ctime: {md.ctime}"]
    lines += [f"  ensemble from entry {first}: {', '.join(bookies)}" for first, bookies in md.ensembles]
    lines += [f"  customMetadata {k}: {v!r}" for k, v in md.custom_metadata]
    return "\n".join(lines)


def run_listledgers(args, conf) -> int:
    with client(args) as bk:
        for ledger in bk.list_ledgers(None if args.all_scopes else args.ledger_scope_id):
            print(describe(ledger, bk.ledger_metadata(ledger)) if args.meta else f"ledgerID: {ledger}")
    return 0


def run_ledgermetadata(args, conf) -> int:
    ledger = ledger_of(args)
    with client(args) as bk:
        print(describe(ledger, bk.ledger_metadata(ledger)))
    return 0


def run_readledger(args, conf) -> int:
    ledger = ledger_of(args)
    with client(args) as bk:
        handle = BookKeeperAdmin(bk).open_ledger_no_recovery(ledger)
        end = handle.last_add_confirmed
        # As BookKeeperAdmin.readEntries: a range past the ledger's end prints what there is, then says where it ends.
        for entry in BookKeeperAdmin.read_entries(handle, args.firstentryid, args.lastentryid):
            print(f"--------- Lid={ledger}, Eid={entry.entry_id}, Length={entry.length} ---------")
            if args.msg:
                print(entry.payload.decode("utf-8", "backslashreplace"))
        if args.lastentryid > end or args.firstentryid > end:
            state = "closed" if handle.metadata.is_closed else "open, last add confirmed"
            print(f"ledger {ledger} ends at entry {end} ({state}): no entries past it", file=sys.stderr)
    return 0


def run_deleteledger(args, conf) -> int:
    ledger = ledger_of(args)
    if not args.force and not confirm(f"Are you sure to delete ledger {ledger}?", "deleteledger"):
        print("not deleted")
        return 1
    with client(args) as bk:
        bk.delete_ledger(ledger)
    print(f"deleted ledger {ledger}")
    return 0


def run_simpletest(args, conf) -> int:
    with client(args) as bk:
        with stop_on_interrupt() as stop:  # from before the ledger exists: it is never left open
            lh = bk.create_ledger(args.ensemble, args.writeQuorum, args.ackQuorum, password=b"")
            print(f"created ledger {lh.ledger_id} on {', '.join(lh.ensemble)}")
            write_numbered(lh, args.numEntries, stop)
            lh.close()  # after every sent entry is acknowledged
        if stop.is_set():
            print(f"interrupted: ledger {lh.ledger_id} closed with {lh.last_add_confirmed + 1} of {args.numEntries} "
                  "entries; nothing was read back")
            return INTERRUPTED
        read = bk.open_ledger(lh.ledger_id, password=b"")
        entries = read.read(0, read.last_add_confirmed) if read.last_add_confirmed >= 0 else []
        bad = [e.entry_id for e in entries if e.payload != b"%d" % e.entry_id]
        if len(entries) != args.numEntries or bad:
            print(f"FAILED: read {len(entries)} entries, {len(bad)} differ")
            return 1
        print(f"{args.numEntries} entries written to ledger {lh.ledger_id} and read back")
    return 0


def write_numbered(lh, count: int, stop: threading.Event) -> None:
    """Entries "0", "1", ... appended until ``count`` or ``stop``, and waited for (simpletest's writes), with a
    progress bar on a terminal."""
    with tqdm(total=count, desc="write", unit=" entries", unit_scale=True, file=sys.stderr,
              disable=None if count >= 10_000 else True) as bar:
        futures = []
        for i in range(count):
            if stop.is_set():
                break
            futures.append(lh.append_async(b"%d" % i))
            if i % 1000 == 999:
                bar.update(1000)
        for f in futures:
            f.result()
        bar.update(len(futures) - bar.n)


def run_bookiesanity(args, conf) -> int:
    """SanityTestCommand (BookKeeperAdmin.sanity_test) on this --conf's bookie, or the one named. The bookie is
    never replaced (maxNumEnsembleChanges=0): a bookie that does not take the writes fails the test, naming it."""
    bookie = args.bookie or conf.bookie_id
    if args.entries < 1:
        raise ConfigurationException(f"--entries {args.entries}: the test writes at least one entry")
    client_conf = {"addEntryTimeout": args.timeout, "readTimeout": args.timeout, "maxNumEnsembleChanges": 0}
    with client(args, client_conf) as bk:
        error = BookKeeperAdmin(bk).sanity_test(bookie, args.entries)
    if error:
        print(f"bookie sanity test FAILED on {bookie}: {error}")
        return 1
    print(f"bookie sanity test succeeded on {bookie}: {args.entries} entries written and read back")
    return 0


def run_bookieinfo(args, conf) -> int:
    with client(args) as bk:
        for bookie, info in BookKeeperAdmin(bk).bookie_info().items():
            if isinstance(info, BKException):
                print(f"{bookie}:\tunavailable ({info})")
            else:
                print(f"{bookie}:\tFree: {info.freeDiskSpace}({info.freeDiskSpace / 1e9:.1f}GB)\t"
                      f"Total: {info.totalDiskCapacity}({info.totalDiskCapacity / 1e9:.1f}GB)"
                      + ("\tread-only" if info.readOnly else ""))
    return 0


def run_bench_write(args, conf) -> int:
    with client(args) as bk, tqdm(desc="acknowledged", unit=" entries", unit_scale=True, file=sys.stderr,
                                   disable=None) as bar, stop_on_interrupt() as stop:
        def progress(done: int) -> None:
            bar.update(done - bar.n)
        result = benchmark.write_throughput(bk, args.time, args.entry_size, args.ensemble, args.quorum, args.ack_quorum,
                                            args.throttle, args.ledgers, progress, stop=stop)
    if result.interrupted:
        print(f"interrupted after {result.seconds:.1f} of {args.time:g} s: the figures are of what was written by "
              "then; the ledgers are closed")
    print(f"{result.entries} entries in {result.seconds:.1f} s: {result.rate:,.0f} entries/s, {result.mb_per_s:.1f} MB/s; "
          f"latency p50 {result.percentile(50):.2f} ms, p95 {result.percentile(95):.2f} ms, p99 {result.percentile(99):.2f} ms "
          f"(ledgers {', '.join(map(str, result.ledger_ids))})")
    return INTERRUPTED if result.interrupted else 0


def run_bench_read(args, conf) -> int:
    ledger = ledger_of(args)
    with client(args) as bk:
        entries, size, seconds = benchmark.read_throughput(bk, ledger, args.password.encode())
    print(f"read {entries} entries ({size / 1e6:.1f} MB) of ledger {ledger} in {seconds:.2f} s: "
          f"{entries / seconds:,.0f} entries/s, {size / seconds / 1e6:.1f} MB/s")
    return 0
