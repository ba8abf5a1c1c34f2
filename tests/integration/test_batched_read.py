"""NativeBookieClient's range reads against this project's native server (a real TCP connection to an
engine in this process): contiguous ranges by v2 BATCH_READ_ENTRY on a pooled socket of their own,
single reads from the first absent entry on, striped ranges by single reads."""
from __future__ import annotations

import pytest

from bookie.client.native_bookie_client import NativeBookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from tests.helpers.native_bookie import KEY

LEDGER = LedgerId.of(21, 0)
DIGEST = DigestManager(LEDGER, b"pw")


@pytest.fixture
def client(native_bookie):  # noqa: F811
    bookie, server = native_bookie
    c = NativeBookieClient(f"127.0.0.1:{server.port}", timeout=30.0)
    yield bookie, c
    c.close()


def store(bookie, entry_ids, size: int = 1000) -> None:
    for e in entry_ids:
        bookie.add_entries(LEDGER, KEY, DIGEST.build_framed(e, e - 1, 0, [b"%06d" % e * (size // 6)])[0]).result(30)


def read(c, first, last, **kwargs) -> tuple[list[int], list]:
    messages = list(c.read_entries(LEDGER, first, last, **kwargs))
    got = [int(p) for m in messages for p in (bytes(x[:6]) for _, x in DIGEST.verify_frames(m.entries))]
    return got, messages


def test_a_contiguous_range_comes_by_batch_reads_on_a_reused_socket(client):
    bookie, c = client
    store(bookie, range(300))
    got, messages = read(c, 10, 289, max_bytes=64 * 1024)  # ~60 entries an answer: several batches
    assert got == list(range(10, 290)) and len(messages) > 3 and messages[-1].lastEntryIdCovered == 289
    assert all(m.status == status.EOK for m in messages)
    channel = c._idle_batch_channels[-1]  # the v2 socket went back to the pool, clean
    assert read(c, 0, 299)[0] == list(range(300)) and c._idle_batch_channels == [channel]


def test_entries_after_a_hole_come_by_single_reads_and_absent_ones_are_covered(client):
    bookie, c = client
    store(bookie, [e for e in range(120) if e not in (40, 41, 100)])
    got, messages = read(c, 0, 130, max_bytes=32 * 1024)
    assert got == [e for e in range(120) if e not in (40, 41, 100)]
    assert messages[-1].lastEntryIdCovered == 130 and all(m.status == status.EOK for m in messages)


def test_a_striped_range_and_an_unknown_ledger(client):
    bookie, c = client
    store(bookie, range(30))
    assert read(c, 0, 29, stride=3, offset=1)[0] == list(range(1, 30, 3))
    _, messages = read(c, 0, 9, max_bytes=1 << 20)
    other = list(c.read_entries(LedgerId.of(22, 0), 0, 9))
    assert [(m.status, m.entryCount, m.lastEntryIdCovered) for m in other] == [(status.EOK, 0, 9)]
    assert messages[0].entryCount == 10
