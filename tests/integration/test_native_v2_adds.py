"""NativeBookieClient with ``use_v2`` (the client's ``useV2WireProtocol``) against this project's native
server (a real TCP connection to an engine in this process): adds go as v2 ADDENTRY on a connection of
their own and are answered per batch as the v3 adds are; fencing, recovery adds, and a master key v2
cannot carry (tests/unit/test_native_connection.py: the same entry sent again before its answer)."""
from __future__ import annotations

import pytest

from bookie.client.native_bookie_client import NativeBookieClient
from bookie.exceptions import BKIncorrectParameterException
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from tests.helpers.native_bookie import KEY
from tests.helpers.waiting import DEADLINE

LEDGER = LedgerId.of(31, 0)
DIGEST = DigestManager(LEDGER, b"pw")


@pytest.fixture
def client(native_bookie):
    bookie, server = native_bookie
    c = NativeBookieClient(f"127.0.0.1:{server.port}", timeout=30.0, use_v2=True)
    yield bookie, c
    c.close()


def framed(first: int, count: int) -> bytes:
    return DIGEST.build_framed(first, first - 1, 0, [b"entry %d" % e for e in range(first, first + count)])[0]


def test_a_batch_goes_as_v2_adds_and_is_answered_once_with_every_entry_stored(client):
    bookie, c = client
    answer = c.add(LEDGER, KEY, framed(0, 50)).result(DEADLINE)
    assert (answer.status, answer.firstEntryId, answer.lastEntryId, answer.entryCount) == (status.EOK, 0, 49, 50)
    answer = c.add(LEDGER, KEY, [framed(50, 5), framed(55, 5)]).result(DEADLINE)  # a batch in pieces
    assert (answer.status, answer.firstEntryId, answer.lastEntryId) == (status.EOK, 50, 59)
    stored = [bytes(DIGEST.verify(bookie.read_entry(LEDGER, e), e)[1]) for e in range(60)]
    assert stored == [b"entry %d" % e for e in range(60)]
    assert c._v2_connection is not None and c._connection is None  # adds only: no v3 connection was needed
    assert c.add(LEDGER, KEY, []).result(DEADLINE).entryCount == 0


def test_a_fenced_ledger_refuses_v2_adds_and_takes_recovery_adds(client):
    bookie, c = client
    assert c.add(LEDGER, KEY, framed(0, 3)).result(DEADLINE).status == status.EOK
    bookie.fence_ledger(LEDGER, KEY).result(DEADLINE)
    refused = c.add(LEDGER, KEY, framed(3, 2)).result(DEADLINE)
    assert refused.status == status.EFENCED and refused.message == "entry 3: EFENCED"
    recovered = c.add(LEDGER, KEY, framed(3, 2), recovery=True).result(DEADLINE)
    assert (recovered.status, recovered.entryCount) == (status.EOK, 2)


def test_a_master_key_that_v2_cannot_carry_is_refused(client):
    _, c = client
    with pytest.raises(BKIncorrectParameterException, match="master key of 20 bytes, not 3"):
        c.add(LEDGER, b"abc", framed(0, 1))
