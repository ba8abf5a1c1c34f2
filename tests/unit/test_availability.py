"""AvailabilityOfEntriesOfLedger as BookKeeper's Java bookies encode it (GetListOfEntriesOfLedger)."""
from __future__ import annotations

from bookie.proto import availability


def java_encoded(*groups: tuple[int, int, int, int]) -> bytes:
    header = availability.HEADER.pack(availability.VERSION, len(groups)).ljust(availability.HEADER_SIZE, b"\0")
    return header + b"".join(availability.GROUP.pack(*g) for g in groups)


def test_a_group_of_one_run_has_period_zero_in_javas_encoding():
    # A Java bookie with entries 0-4 and the E=3 WQ=2 stripe 7,8 10,11 13,14 after them.
    assert availability.decode(java_encoded((0, 0, 5, 0), (7, 13, 2, 3))) == [0, 1, 2, 3, 4, 7, 8, 10, 11, 13, 14]


def test_decode_reads_what_encode_writes():
    ids = [1, 2, 3, 9, 11, 12, 14, 15, 17, 18, 40]
    assert availability.decode(availability.encode(ids)) == ids


def test_count_and_ids_array_agree_with_decode():
    for data in (java_encoded((0, 0, 5, 0), (7, 13, 2, 3)), availability.encode([1, 2, 3, 9, 11, 12, 40]),
                 availability.encode([])):
        ids = availability.decode(data)
        assert availability.count(data) == len(ids)
        assert availability.ids_array(data).tolist() == ids
