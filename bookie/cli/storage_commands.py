"""``bk shell`` commands that read a bookie's files directly: lastmark, readjournal, readlog."""
from __future__ import annotations

import os

from bookie.exceptions import EntryLogCorruptedException
from bookie.proto import entry_format
from bookie.server import journal_scanner
from bookie.server.entry_log_format import log_path, scan_entry_log
from bookie.server.last_log_mark import read_last_mark


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
