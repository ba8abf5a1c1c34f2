"""The journal's force-write thread: what runs on the ack path and what after it."""
from __future__ import annotations

import threading

from bookie.proto import entry_format
from bookie.server import journal
from bookie.server.conf import ServerConfiguration
from tests.helpers.engine_ops import engine_settings
from tests.helpers.journal_files import LEDGER


def test_adds_are_answered_before_their_pages_leave_the_cache(tmp_path, monkeypatch):
    events: list[str] = []
    dropped = threading.Event()
    real_drop = journal.JournalChannel.drop_synced_pages

    def drop(channel, synced: int) -> None:
        events.append("drop")
        real_drop(channel, synced)
        dropped.set()

    monkeypatch.setattr(journal.JournalChannel, "drop_synced_pages", drop)
    conf = ServerConfiguration(engine_settings(tmp_path, journalRemoveFromPageCache=True))
    j = journal.Journal(conf.journal_dirs[0], conf)
    j.start()
    try:
        errors: list = []
        j.log(entry_format.meta_record(LEDGER, entry_format.METAENTRY_ID_FENCE_KEY),
              lambda error: (errors.append(error), events.append("ack")))
        assert dropped.wait(10), "the synced group's pages were never dropped"
    finally:
        j.shutdown()
    assert errors == [None]
    assert events[:2] == ["ack", "drop"], f"{events}: the page-cache advice ran before the add was answered"
