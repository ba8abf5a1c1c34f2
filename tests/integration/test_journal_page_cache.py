"""journalRemoveFromPageCache: once a group is fsynced its whole pages leave the page cache (replay is
their only reader), and the page the next group continues stays. Residency is read with mincore(2)."""
from __future__ import annotations

import pytest

from bookie.proto.checksum import DigestManager
from tests.helpers.engine_ops import PASSWORD
from tests.helpers.journal_files import KEY, LEDGER
from tests.helpers.page_cache import PAGE, resident_pages
from tests.helpers.waiting import wait_for


def add_groups(bookie, groups: int) -> None:
    """``groups`` adds of 64 x 1 KiB, each waited for (its fsync) before the next: one group each."""
    digest = DigestManager(LEDGER, PASSWORD)
    for g in range(groups):
        blob, _ = digest.build_framed(g * 64, g * 64 - 1, 0, [bytes([g]) * 1024] * 64)
        bookie.add_entries(LEDGER, KEY, blob).result(10)


@pytest.mark.parametrize("remove", [True, False])
def test_fsynced_journal_pages_leave_the_page_cache(make_bookie, remove):
    bookie = make_bookie(journalRemoveFromPageCache=remove, journalFlushWhenQueueEmpty=True)
    add_groups(bookie, 8)
    channel = bookie.journals[0]._channel
    synced = bookie.journals[0].last_log_mark.offset  # every group's callback ran: all of it is fsynced
    assert synced == channel.position and synced > 8 * 64 * 1024
    if remove:
        # The force-write thread drops a group's pages just after running its callbacks (off the ack
        # path), so the last group's may still be on their way out when its add completes.
        wait_for(lambda: not any(resident_pages(channel.path, synced)[:-1]),
                 "fsynced journal pages to leave the page cache")
        resident = resident_pages(channel.path, synced)
        assert resident[-1] or synced % PAGE == 0, "the page the next group continues was dropped too"
    else:
        assert all(resident_pages(channel.path, synced)), \
            "the control: written pages are in the page cache when nothing drops them"
