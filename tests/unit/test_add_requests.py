"""bookie/client/add_requests.py: a part of a batch is encoded once for every bookie it goes to (by the part
object, for what the encoding depends on), and the requests are those of BookKeeper's protocol."""
from __future__ import annotations

from bookie.client import add_requests
from bookie.client.add_requests import RecentEncodings, TxnIds
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import entry_format
from bookie.proto.native_frames import FrameDecoder, encode_frames

KEY = generate_master_key(b"pw")
DIGEST = DigestManager(LedgerId(0, 9), b"pw")


def bodies(first: int, count: int, size: int = 10) -> list[bytes]:
    """Entries of ledger 9 whose payloads are ``size`` words."""
    return [DIGEST.build_entry(e, e - 1, 0, e.to_bytes(4, "big") * size) for e in range(first, first + count)]


def test_recent_encodings_encode_a_part_object_once():
    recent, calls = RecentEncodings(size=2), []

    def encode(tag):
        return lambda: calls.append(tag) or (tag, len(calls))
    framed = entry_format.frame(bodies(0, 3))
    first = recent.get(framed, "head", encode("a"))
    assert recent.get(framed, "head", encode("b")) is first  # the same object: not encoded again
    assert recent.get(framed, "other head", encode("c")) == ("c", 2)  # another key: encoded for it
    equal = bytes(bytearray(framed))  # equal bytes, another object: encoded again
    assert recent.get(equal, "head", encode("d")) == ("d", 3)
    assert recent.get(framed, "other head", encode("e"), again=True) == ("e", 4)  # again: encoded anew
    assert len(recent._recent) == 2 and calls == ["a", "c", "d", "e"]  # the oldest went


def test_v2_requests_of_a_part_are_a_head_before_each_entry():
    head = v2.add_request_head(KEY)
    for entries in (bodies(40, 20), bodies(40, 3) + bodies(43, 1, size=11)):  # by columns; one at a time
        block, ids = add_requests.v2_add_requests(entry_format.frame(entries), head)
        assert bytes(block) == encode_frames([head + e for e in entries]) and ids == list(range(40, 40 + len(entries)))


def test_v3_requests_of_mixed_sizes_carry_consecutive_txn_ids(monkeypatch):
    txn_ids = TxnIds()
    txn_ids._next = 700
    monkeypatch.setattr(add_requests, "TXN_IDS", txn_ids)
    entries = bodies(40, 3) + bodies(43, 1, size=11)
    first, block, ids = add_requests.v3_add_requests(entry_format.frame(entries), 9, b"key", 0, False)
    requests = [v3.Request.FromString(p) for p in FrameDecoder().feed(bytes(block))]
    assert first == 700 and ids == [40, 41, 42, 43]
    assert [(r.header.txnId, r.addRequest.entryId, r.addRequest.body) for r in requests] == \
        [(700 + k, 40 + k, e) for k, e in enumerate(entries)]
