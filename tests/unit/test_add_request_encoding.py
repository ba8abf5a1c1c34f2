"""The add stream's hand-encoded AddRequest is what protobuf itself writes, and parses back the same."""
from __future__ import annotations

import pytest

from bookie.client.bookie_client import ADD_ENTRIES, encode_add_request
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_pb2_grpc as pb_grpc


@pytest.mark.parametrize("txn_id", [1, 127, 128, 300, 2 ** 40, 2 ** 64 - 1])
@pytest.mark.parametrize("ledger", [LedgerId.of(0), LedgerId.of(7), LedgerId.of(2 ** 63 - 1), LedgerId.of(5, 3),
                                    LedgerId.of(2 ** 62, 2 ** 63 - 1)])
@pytest.mark.parametrize("recovery", [False, True])
@pytest.mark.parametrize("entries", [b"", b"x", bytes(range(256)) * 600])
def test_bytes_equal_protobufs_own(txn_id, ledger, recovery, entries):
    key = b"k" * 20
    expected = pb.AddRequest(txnId=txn_id, ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, masterKey=key,
                             entries=entries, flag=pb.AddRequest.RECOVERY_ADD if recovery else pb.AddRequest.NONE)
    encoded = encode_add_request(txn_id, ledger, key, recovery, entries)
    assert encoded == expected.SerializeToString()
    assert pb.AddRequest.FromString(encoded) == expected


def test_an_empty_master_key_is_left_out_as_protobuf_does():
    assert encode_add_request(9, LedgerId.of(1), b"", False, b"e") == \
        pb.AddRequest(txnId=9, ledgerId=1, entries=b"e").SerializeToString()


def test_the_method_path_is_the_generated_stubs():
    class Channel:
        def stream_stream(self, path, **kwargs):
            self.path = path

        unary_unary = unary_stream = stream_unary = lambda self, *a, **k: None

    channel = Channel()
    pb_grpc.BookieStub(channel)
    assert channel.path == ADD_ENTRIES


@pytest.mark.parametrize("cuts", [[], [0], [5], [1, 2, 3], [10, 10, 20]])
def test_pieces_encode_as_the_joined_buffer(cuts):
    entries = bytes(range(256)) * 3
    bounds = [0, *cuts, len(entries)]
    parts = [entries[a:b] for a, b in zip(bounds, bounds[1:])]
    ledger = LedgerId.of(42)
    assert encode_add_request(3, ledger, b"key", False, parts) == encode_add_request(3, ledger, b"key", False, entries)


def test_no_pieces_are_no_entries():
    assert encode_add_request(3, LedgerId.of(42), b"key", False, []) == \
        pb.AddRequest(txnId=3, ledgerId=42, masterKey=b"key").SerializeToString()
