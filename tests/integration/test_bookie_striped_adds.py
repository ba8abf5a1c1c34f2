"""A bookie's share of a striped ledger (WQ < E: entry ids with gaps) arrives as one batch whose index
slots are filled page by page (LedgerCache.put); every stored entry reads back, every gap is "no such
entry", across index pages, after a checkpoint too. Batches out of id order take the per-entry path."""
from __future__ import annotations

import pytest

from bookie.exceptions import NoEntryException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from tests.helpers.engine_ops import PASSWORD

KEY = generate_master_key(PASSWORD)
LEDGER = LedgerId(0, 21)


def framed(ids: list[int]) -> bytes:
    """One framed batch of ``ids`` in the given order (equal sizes: the bookie's uniform scan)."""
    digest = DigestManager(LEDGER, PASSWORD)
    return b"".join(digest.build_framed(e, -1, 0, [b"%06d" % e])[0] for e in ids)


@pytest.mark.parametrize("order", ["increasing", "decreasing"])
def test_a_striped_share_reads_back_across_index_pages(make_bookie, order):
    bookie = make_bookie(pageSize=64)  # 8 entries per index page: the share spans seven pages
    stored = [e for e in range(56) if e % 3 != 1]  # bookie 0 and 2 of E=3 WQ=2 hold these
    ids = stored if order == "increasing" else stored[::-1]
    assert bookie.add_entries(LEDGER, KEY, framed(ids)).result(10) == ids
    for _ in ("before a checkpoint", "after it"):
        for e in range(56):
            if e in stored:
                assert bookie.read_entry(LEDGER, e).endswith(b"%06d" % e)
            else:
                with pytest.raises(NoEntryException):
                    bookie.read_entry(LEDGER, e)
        bookie.checkpoint()
