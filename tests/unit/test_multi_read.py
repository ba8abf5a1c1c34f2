"""bookie.meta.multi_read: ZooKeeper's multiRead request and answer in jute's layout, and the server version
gate (the real server's answers are tested in tests/integration/test_zk_metadata_store.py)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.protocol.serialization import ZnodeStat, stat_struct

from bookie.meta.multi_read import MULTI_READ, MultiRead, server_version
from bookie.util.chunks import chunks

STAT = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)


def _string(s: str) -> bytes:
    return struct.pack(">i", len(s.encode())) + s.encode()


def test_the_request_is_a_multi_operation_record_of_get_data_ops():
    request = MultiRead(("/a", "/bc"))
    assert request.type == MULTI_READ == 22
    # MultiHeader(type=getData 4, done=false, err=-1), GetDataRequest(path, watch=false); then done.
    expected = (struct.pack(">iBi", 4, 0, -1) + _string("/a") + b"\0"
                + struct.pack(">iBi", 4, 0, -1) + _string("/bc") + b"\0"
                + struct.pack(">iBi", -1, 1, -1))
    assert bytes(request.serialize()) == expected


@given(st.lists(st.one_of(st.binary(max_size=40), st.none(), st.sampled_from([-101, -102])), max_size=30))
def test_the_answer_gives_each_znode_its_data_and_stat_or_its_own_error(results):
    body = b""
    for r in results:
        if isinstance(r, int):  # ErrorResult: header type -1 (OpCode.error), then ErrorResponse(err)
            body += struct.pack(">iBi", -1, 0, r) + struct.pack(">i", r)
        else:  # GetDataResult: GetDataResponse(data, stat); None data is jute's -1 length
            data = struct.pack(">i", -1) if r is None else struct.pack(">i", len(r)) + r
            body += struct.pack(">iBi", 4, 0, 0) + data + stat_struct.pack(*STAT)
    body += struct.pack(">iBi", -1, 1, -1)
    answers = MultiRead.deserialize(b"prefix" + body, len(b"prefix"))
    assert len(answers) == len(results)
    for r, answer in zip(results, answers):
        if isinstance(r, int):
            assert isinstance(answer, {-101: NoNodeError, -102: NoAuthError}[r])
        else:
            assert answer == (r, ZnodeStat(*STAT))


def test_an_answer_with_an_op_that_was_not_asked_is_refused():
    body = struct.pack(">iBi", 1, 0, 0) + _string("/made") + struct.pack(">iBi", -1, 1, -1)
    with pytest.raises(ValueError, match="only getData"):
        MultiRead.deserialize(body, 0)


@pytest.mark.parametrize("answer, version", [
    ("Zookeeper version: 3.9.5-6b5b1b5b, built on 2025-01-01\nLatency min/avg/max: 0/0/0\n", (3, 9)),
    ("Zookeeper version: 3.5.10-abc, built on ...\n", (3, 5)),
    ("srvr is not executed because it is not in the whitelist.\n", None),
    ("", None),
])
def test_server_version_from_srvr(answer, version):
    assert server_version(answer) == version


@given(st.lists(st.integers(), max_size=50), st.integers(1, 7))
def test_chunks_keep_order_and_size(items, size):
    parts = list(chunks(items, size))
    assert [x for part in parts for x in part] == items
    assert all(len(part) == size for part in parts[:-1]) and all(parts)


def test_chunks_refuse_a_size_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        list(chunks([1], 0))
