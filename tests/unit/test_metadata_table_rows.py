"""The rows of the metadata tables (spark_bookkeeper/tables.py) built from metadata and bookie answers, without a
cluster: the columns people read beside the raw ones."""
from __future__ import annotations

from types import SimpleNamespace

from bookie.exceptions import BKBookieHandleNotAvailableException
from bookie.ledger_id import LedgerId
from spark_bookkeeper.tables import SCHEMAS, bookie_row, ledger_rows
from tests.helpers.sample_metadata import metadata


def _columns(table: str) -> list[str]:
    return [column.split()[0] for column in SCHEMAS[table].split(", ")]


class _Bookies:
    """bk.bookie_client(bookie).bookie_info() of bookies that answer with their disk, and of one that does not."""

    def __init__(self, disks: dict[str, tuple[int, int]]):
        self.disks = disks

    def bookie_client(self, bookie: str):
        return SimpleNamespace(bookie_info=lambda: self._info(bookie))

    def _info(self, bookie: str):
        if bookie not in self.disks:
            raise BKBookieHandleNotAvailableException(f"{bookie} does not answer")
        total, free = self.disks[bookie]
        return SimpleNamespace(totalDiskCapacity=total, freeDiskSpace=free)


def test_bookies_rows_give_the_disk_in_bytes_and_as_people_read_it():
    bk = _Bookies({"a:1": (500 * 2**30, 3 * 2**29)})
    row = dict(zip(_columns("bookies"), bookie_row(bk, "a:1", "rw")))
    assert row == {"bookie_id": "a:1", "state": "rw", "total_disk": 500 * 2**30, "free_disk": 3 * 2**29,
                   "total_disk_human": "500.0 GiB", "free_disk_human": "1.5 GiB"}
    gone = dict(zip(_columns("bookies"), bookie_row(bk, "b:1", "ro")))
    assert gone == {"bookie_id": "b:1", "state": "unavailable", "total_disk": None, "free_disk": None,
                    "total_disk_human": None, "free_disk_human": None}


def test_ledger_rows_show_custom_metadata_as_text_and_keep_the_bytes():
    md = metadata(custom_metadata=(("application", b"orders"), ("spark.batch", b"\x00\x00\x00\x07")))
    row = dict(zip(_columns("ledgers"), ledger_rows(LedgerId(0, 7), md)[0]))
    assert row["custom_metadata"] == {"application": b"orders", "spark.batch": b"\x00\x00\x00\x07"}
    assert row["custom_metadata_text"] == {"application": "orders", "spark.batch": "0x00000007"}
