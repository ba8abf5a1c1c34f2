"""Journal files written by a SIGKILLed engine (tests/helpers/engine_ops.py), for tests that damage
and replay them: where the groups end, and which entries a restarted bookie has."""
from __future__ import annotations

import struct

from bookie.exceptions import NoEntryException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import journal
from tests.helpers.engine_ops import PASSWORD, engine_settings, payload, run_then_sigkill

KEY = generate_master_key(PASSWORD)
LEDGER = LedgerId(0, 5)


def journal_with_groups(tmp_path, groups: int):
    """A SIGKILLed engine whose journal holds ``groups`` acknowledged adds of 10 entries each."""
    settings = engine_settings(tmp_path)
    run_then_sigkill(settings, [["add", 0, 5, 10]] * groups)
    journal_dir = settings["journalDirectories"]
    (log_id,) = journal.list_journal_ids(journal_dir)
    path = journal.journal_path(journal_dir, log_id)
    return settings, path, group_ends(path)


def group_ends(path: str) -> list[int]:
    """Where each group of a journal file ends (after its padding record)."""
    with open(path, "rb") as f:
        data = f.read()
    ends = []
    pos = journal.HEADER_SIZE
    while True:
        (length,) = struct.unpack_from(">i", data, pos)
        if length == 0:
            break
        if length == journal.PADDING_MASK:
            (pad,) = struct.unpack_from(">i", data, pos + 4)
            pos += 8 + pad
            ends.append(pos)
        else:
            pos += 4 + length
    return ends


def entries_present(bookie) -> list[int]:
    """The entries of LEDGER (0..99) the bookie has, each checked against its payload."""
    digest = DigestManager(LEDGER, PASSWORD)
    present = []
    for eid in range(0, 100):
        try:
            assert digest.verify(bookie.read_entry(LEDGER, eid), eid)[1].tobytes() == payload(eid)
            present.append(eid)
        except NoEntryException:
            pass
    return present
