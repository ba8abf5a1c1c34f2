"""The bookie's files on disk, by kind, oldest (last modified) first, as BookieShell.listFilesAndSort lists them
for ListFilesOnDiscCommand (``bk shell listfilesondisc``) and ListDiskFilesService (/api/v1/bookie/list_disk_file):
journals (.txn) under journalDirectories, entry logs (.log) under ledgerDirectories, index files (.idx) under
indexDirectories (ledgerDirectories when unset). A running bookie may remove a file while it is listed (a
checkpoint's journal GC, a compaction): it is left out."""
from __future__ import annotations

import os

from bookie.server.conf import ServerConfiguration

# The kinds, as ListDiskFilesService's file_type names them.
JOURNAL = "journal"
ENTRY_LOG = "entrylog"
INDEX = "index"
KINDS = (JOURNAL, ENTRY_LOG, INDEX)
EXTENSIONS = {JOURNAL: ".txn", ENTRY_LOG: ".log", INDEX: ".idx"}


def directories(conf: ServerConfiguration, kind: str) -> list[str]:
    """The configured directories of ``kind``'s files (ConfigurationException when they are not set)."""
    if kind == JOURNAL:
        return conf.journal_dirs
    if kind == ENTRY_LOG:
        return conf.ledger_dirs
    if kind == INDEX:
        return conf.index_dirs
    raise ValueError(f"no disk file kind {kind!r}: the kinds are {', '.join(KINDS)}")


def disk_files(conf: ServerConfiguration, kind: str) -> list[str]:
    """The canonical paths of the bookie's ``kind`` files, oldest first."""
    return files_by_age(directories(conf, kind), EXTENSIONS[kind])


def files_by_age(dirs: list[str], extension: str) -> list[str]:
    """The files named ``*<extension>`` anywhere under the directories (each listed once), oldest (last
    modified) first, as canonical paths."""
    found: list[tuple[int, str]] = []
    for directory in dict.fromkeys(dirs):
        for root, _, names in os.walk(directory):
            for name in names:
                if name.endswith(extension):
                    path = os.path.realpath(os.path.join(root, name))
                    try:
                        found.append((os.stat(path).st_mtime_ns, path))
                    except FileNotFoundError:
                        pass  # removed meanwhile
    return [path for _, path in sorted(found)]
