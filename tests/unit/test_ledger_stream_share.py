"""How a micro-batch's maxEntriesPerTrigger is shared among tailed ledgers (ledger_stream_reader.share)."""
from __future__ import annotations

from spark_bookkeeper.ledger_stream_reader import share


def test_no_budget_takes_everything():
    assert share({"12": 5, "13": 0}, None) == {"12": 5, "13": 0}


def test_equal_shares_and_what_one_cannot_use_goes_to_the_others():
    assert share({"12": 1000, "13": 1000}, 200) == {"12": 100, "13": 100}
    assert share({"12": 1000, "13": 30, "14": 0}, 200) == {"12": 170, "13": 30, "14": 0}


def test_a_budget_smaller_than_the_ledgers_goes_in_order_and_is_never_exceeded():
    assert share({"12": 5, "13": 5, "14": 5}, 2) == {"12": 1, "13": 1, "14": 0}
    assert share({"12": 3, "13": 4}, 100) == {"12": 3, "13": 4}
    assert sum(share({str(i): 7 * i for i in range(1, 20)}, 333).values()) == 333
