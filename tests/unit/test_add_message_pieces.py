"""Where a batch is cut into add messages (AddMessageLimits.pieces, bookie/client/add_batch.py) when all
of it may fit one message: the C-speed check of the usual batch gives the cuts the per-payload loop
gives, up to the byte budget exactly and one byte past it. No processes."""
from __future__ import annotations

import pytest

from bookie.client.add_batch import ADD_REQUEST_RESERVE, AddMessageLimits
from bookie.exceptions import BKIncorrectParameterException
from bookie.ledger_id import LedgerId

pytestmark = pytest.mark.unit

LEDGER = LedgerId.of(7)
BUDGET = AddMessageLimits(100 + ADD_REQUEST_RESERVE, 3, 10)  # 100 bytes of frames, 3 entries, 10 per entry


def test_a_batch_exactly_filling_one_message_is_one_piece():
    assert BUDGET.pieces(LEDGER, [bytes(40), bytearray(40)]) == [0, 2]


def test_one_byte_past_the_budget_cuts_where_the_loop_cuts():
    assert BUDGET.pieces(LEDGER, [bytes(40), bytes(30), bytes(1)]) == [0, 2, 3]  # 50 + 40 + 11 > 100


def test_max_entries_in_one_message_is_one_piece_and_one_more_is_two():
    assert BUDGET.pieces(LEDGER, [b"a"] * 3) == [0, 3]
    assert BUDGET.pieces(LEDGER, [b"a"] * 4) == [0, 3, 4]


def test_a_subclass_of_bytes_is_taken_as_the_loop_takes_it():
    class Payload(bytes):
        pass

    assert BUDGET.pieces(LEDGER, [Payload(b"x"), b"y"]) == [0, 2]


@pytest.mark.parametrize("batch", [[b"ok", "text"], [b"ok", bytes(91)]])
def test_what_does_not_fit_or_is_not_bytes_is_still_refused(batch):
    with pytest.raises(BKIncorrectParameterException):
        BUDGET.pieces(LEDGER, batch)
