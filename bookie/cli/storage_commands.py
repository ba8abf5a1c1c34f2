"""``bk shell`` commands that work on a bookie's files directly: lastmark, readjournal, readlog, listfilesondisc
(BookKeeper's ListFilesOnDiscCommand), and, on a stopped bookie, localconsistencycheck
(LocalConsistencyCheckCommand) and regenerate-interleaved-storage-index-file
(RegenerateInterleavedStorageIndexFileCommand).

    bk shell listfilesondisc --conf F [-txn] [-log] [-idx]      the journal / entry log / index files (none: all)
    bk shell localconsistencycheck --conf F                     every index entry leads to its record; exit 1 if not
    bk shell regenerate-interleaved-storage-index-file --conf F -l ID[,ID...] (-p PASSWORD | -b B64PASSWORD) [-d]

The last two refuse while the bookie is registered (it runs, or was killed less than a ZooKeeper session ago),
as the format and cookie verbs do: its directories are a running bookie's then.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import os
import time

from bookie.cli.cluster_conf import add_uri_args
from bookie.cli.cookie_commands import ensure_stopped
from bookie.cli.cluster_conf import metadata_store
from bookie.client.bookkeeper import as_ledger_id
from bookie.exceptions import (BKNoSuchLedgerExistsOnMetadataServerException, ConfigurationException,
                               EntryLogCorruptedException)
from bookie.ledger_id import LedgerId
from bookie.meta.metadata_store import MetadataStore
from bookie.proto import entry_format
from bookie.server import journal_scanner
from bookie.server.disk_files import ENTRY_LOG, INDEX, JOURNAL, disk_files
from bookie.server.entry_log_format import log_path, scan_entry_log
from bookie.server.index_rebuild import RebuildResult, rebuild_index
from bookie.server.last_log_mark import read_last_mark
from bookie.server.local_consistency_check import check_stopped_bookie

REGENERATE_INDEX = "regenerate-interleaved-storage-index-file"


def register(commands, add_conf_args) -> None:
    lastmark = commands.add_parser("lastmark", help="print the LastLogMark of each journal")
    add_conf_args(lastmark)
    lastmark.set_defaults(run=run_lastmark)

    readjournal = commands.add_parser("readjournal", help="dump the records of a journal file")
    add_conf_args(readjournal)
    readjournal.add_argument("journal", help="journal id (hex, as in the file name) or a .txn path")
    readjournal.add_argument("-m", "--msg", action="store_true", help="print payloads (as bytes)")
    readjournal.set_defaults(run=run_readjournal)

    readlog = commands.add_parser("readlog", help="dump the entries of an entry log file")
    add_conf_args(readlog)
    readlog.add_argument("entrylog", help="entry log id (hex, as in the file name) or a .log path")
    readlog.add_argument("-l", "--ledgerid", type=int, help="only this ledger")
    readlog.add_argument("-e", "--entryid", type=int, help="only this entry")
    readlog.add_argument("-m", "--msg", action="store_true", help="print payloads (as bytes)")
    readlog.set_defaults(run=run_readlog)
    register_file_verbs(commands, add_conf_args)


def register_file_verbs(commands, add_conf_args) -> None:
    """listfilesondisc, localconsistencycheck, regenerate-interleaved-storage-index-file."""
    listing = commands.add_parser("listfilesondisc", help="list the files in the journal, ledger and index "
                                                          "directories (no flag: all three)")
    add_conf_args(listing)
    listing.add_argument("-txn", "--journal", action="store_true", help="print the journal files")
    listing.add_argument("-log", "--entrylog", action="store_true", help="print the entry log files")
    listing.add_argument("-idx", "--index", action="store_true", help="print the index files")
    listing.set_defaults(run=run_listfilesondisc)

    check = commands.add_parser("localconsistencycheck", help="check that every index entry of the (stopped) "
                                                              "bookie leads to its record in an entry log")
    add_uri_args(check)  # the metadata service says whether the bookie is stopped
    check.set_defaults(run=run_localconsistencycheck)

    regenerate = commands.add_parser(REGENERATE_INDEX, help="rebuild the index files of ledgers of the (stopped) "
                                                            "bookie from its entry logs")
    add_uri_args(regenerate)
    regenerate.add_argument("-l", "-ledgerIds", "--ledgerIds", "--ledgerids", dest="ledger_ids", required=True,
                            action="extend", nargs="+", metavar="ID",
                            help="the ledgers whose index files are rebuilt, comma (or space) separated: ids, or "
                                 "32-hex-digit qualified names")
    password = regenerate.add_mutually_exclusive_group(required=True)
    password.add_argument("-p", "-password", "--password",
                          help="the ledgers' password (its master key goes in the index files; it must be the "
                               "one of the ledgers' metadata)")
    password.add_argument("-b", "-b64password", "--b64password",
                          help="the password in base64, for a password that is not UTF-8")
    regenerate.add_argument("-d", "-dryRun", "--dryRun", "--dryrun", dest="dry_run", action="store_true",
                            help="scan the entry logs and report, write nothing")
    regenerate.set_defaults(run=run_regenerate_index)


def run_lastmark(args, conf) -> int:
    count = len(conf.journal_dirs)
    for i, journal_dir in enumerate(conf.journal_dirs):
        mark = read_last_mark(conf.ledger_dirs, i, count)
        print(f"LastLogMark: Journal Id - {mark.log_id:x}({mark.log_id}.txn), Pos - {mark.offset}  [{journal_dir}]")
    return 0


def _describe(record: memoryview) -> str:
    ledger, eid, _ = entry_format.peek_meta(record, 0)
    kind = {entry_format.METAENTRY_ID_LEDGER_KEY: "ledger key", entry_format.METAENTRY_ID_FENCE_KEY: "fence",
            entry_format.METAENTRY_ID_LEDGER_EXPLICITLAC: "explicit LAC"}.get(eid)
    if kind:
        return f"Ledger: {ledger}  {kind}"
    header = entry_format.parse_header(record)
    return (f"Ledger: {ledger}  Entry: {eid}  LAC: {header.last_add_confirmed}  Length: {header.length}  "
            f"Size: {len(record)}")


def run_readjournal(args, conf) -> int:
    if os.path.exists(args.journal):
        path = args.journal
        journal_dir, log_id = os.path.dirname(os.path.dirname(path)), int(os.path.basename(path)[:-4], 16)
    else:
        journal_dir, log_id = conf.journal_dirs[0], int(args.journal, 16)
    print(f"Scan journal {log_id:x}.txn in {journal_dir}")

    def show(group: memoryview) -> None:
        for record in journal_scanner.iter_records(group):
            print(_describe(record) + (f"  Data: {bytes(record)!r}" if args.msg else ""))

    # Past a corrupt group too, so an operator sees what replay would refuse and what follows it.
    result = journal_scanner.scan_journal(journal_dir, log_id, 0, show, skip_invalid=True)
    for corruption in result.skipped:
        print(f"CORRUPT: {corruption}")
    print(f"{result.records} records in {result.groups} groups; end at offset {result.end.offset}")
    if result.torn:
        print(f"stopped early (a torn tail, never acknowledged): {result.torn}")
    return 1 if result.skipped else 0


def run_readlog(args, conf) -> int:
    path = args.entrylog if os.path.exists(args.entrylog) else log_path(conf.ledger_dirs[0], int(args.entrylog, 16))
    print(f"Scan entry log {path}")
    try:
        for offset, entry in scan_entry_log(path):
            ledger, eid, _ = entry_format.peek_meta(entry, 0)
            if (args.ledgerid is not None and ledger.ledger_id != args.ledgerid) or \
                    (args.entryid is not None and eid != args.entryid):
                continue
            print(f"--------- Lid={ledger}, Eid={eid}, ByteOffset={offset}, EntrySize={len(entry)} ---------"
                  + (f"\n{entry!r}" if args.msg else ""))
    except EntryLogCorruptedException as exc:
        print(f"entry log is corrupt: {exc}")
        return 1
    return 0


# -- listfilesondisc -----------------------------------------------------------------------------------
def run_listfilesondisc(args, conf) -> int:
    """ListFilesOnDiscCommand: each kind asked for (none: all), its files oldest first, canonical paths."""
    every = not (args.journal or args.entrylog or args.index)
    listings = [(args.journal, "Journal Files", JOURNAL), (args.entrylog, "EntryLog/Ledger Files", ENTRY_LOG),
                (args.index, "Index Files", INDEX)]
    for asked, title, kind in listings:
        if asked or every:
            print(f"--------- Printing the list of {title} ---------")
            for path in disk_files(conf, kind):
                print(path)
            print()
    return 0


# -- localconsistencycheck -----------------------------------------------------------------------------
def run_localconsistencycheck(args, conf) -> int:
    with metadata_store(args) as store:
        ensure_stopped(store, conf.bookie_id, "checking its storage")
    print("=== Performing local consistency check ===")
    report = check_stopped_bookie(conf)
    print(f"Finished localConsistencyCheck: {report.ledgers} ledgers, {report.entries} entries checked, "
          f"{len(report.problems)} errors")
    if not report.problems:
        print("=== Check passed ===")
        return 0
    print("=== Check returned errors: ===")
    for problem in report.problems:
        print(f"Ledger {problem.ledger}, entry {problem.entry_id}: {problem.problem}")
    return 1


# -- regenerate-interleaved-storage-index-file ---------------------------------------------------------
def run_regenerate_index(args, conf) -> int:
    ledgers = _ledger_ids(args.ledger_ids)
    password = _password(args)
    with metadata_store(args) as store:
        ensure_stopped(store, conf.bookie_id, "rebuilding its index files")
        _check_password(store, ledgers, password)
    names = f"[{', '.join(map(str, ledgers))}]"
    print(f"=== Rebuilding index file for {names} ===")
    start = time.monotonic()
    result = rebuild_index(conf, set(ledgers), password, args.dry_run,
                           lambda log_id, done, total: print(f"Completed scanning of log {log_id:x}.log -- "
                                                             f"{done} / {total}"))
    _print_rebuild(ledgers, result, args.dry_run)
    print(f"Total time: {_hms(time.monotonic() - start)}")
    print(f"-- Done rebuilding index file for {names} --")
    return 1 if result.unreadable_logs else 0


def _ledger_ids(values: list[str]) -> list[LedgerId]:
    """The ledgers of ``-l 1,2 3``: each once, in the order given."""
    texts = [text.strip() for value in values for text in value.split(",") if text.strip()]
    return list(dict.fromkeys(as_ledger_id(text) for text in texts))


def _password(args: argparse.Namespace) -> bytes:
    if args.password is not None:
        return args.password.encode()
    try:
        return base64.b64decode(args.b64password, validate=True)
    except binascii.Error as exc:
        raise ConfigurationException(f"-b64password {args.b64password!r} is not base64 ({exc})") from None


def _check_password(store: MetadataStore, ledgers: list[LedgerId], password: bytes) -> None:
    """The password is the one of each ledger's metadata (else its master key would lock the ledger's writer
    and recovery out of the rebuilt index); a ledger without metadata is said, and rebuilt all the same."""
    for ledger in ledgers:
        try:
            metadata = store.read_ledger(ledger).value
        except BKNoSuchLedgerExistsOnMetadataServerException:
            print(f"ledger {ledger} has no metadata (deleted?): its password cannot be checked, and the bookie's "
                  "garbage collection will delete its entries")
            continue
        if metadata.password != password:
            raise ConfigurationException(f"the password given is not ledger {ledger}'s (its metadata holds "
                                         "another): nothing was rebuilt")


def _print_rebuild(ledgers: list[LedgerId], result: RebuildResult, dry_run: bool) -> None:
    for unreadable in result.unreadable_logs:
        print(f"could not scan all of entry log {unreadable}: its entries past that point are not in the "
              "rebuilt index")
    print("Rebuilding indices done" + (" (dry run: nothing written)" if dry_run else ""))
    for ledger in ledgers:
        found = result.found.get(ledger)
        if found is None:
            print(f" {ledger} - No entries found")
        else:
            print(f" {ledger} - Found {found.entries} entries, from {found.first} to {found.last}")
    for path in result.written:
        print(f"wrote {path}")


def _hms(seconds: float) -> str:
    """DurationFormatUtils.formatDurationHMS: HH:mm:ss.SSS."""
    millis = int(seconds * 1000)
    return f"{millis // 3_600_000:02d}:{millis // 60_000 % 60:02d}:{millis // 1000 % 60:02d}.{millis % 1000:03d}"
