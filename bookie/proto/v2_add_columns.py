"""Runs of v2 ADDENTRY requests and their answers as columns (numpy), not one message at a time.

A client that keeps many adds of one ledger in flight (BookKeeper's Java client with useV2WireProtocol, as
Pulsar runs it; this project's client with the same key) sends frames that differ only in their entry:
``[length][header][master key: 20][entry]``. When entries have one size, such frames sit at a fixed stride
and a run of them (``native_frames.FrameRun``) is read with one strided view: the bookie checks that every
frame is an add of the same ledger, key and flags, takes the entries out framed as its storage keeps them,
``(size:i32 | entry)*``, with one copy, and answers the whole run with one encoded buffer. The client
builds its requests from a framed batch the same way. Anything else (another op, mixed ledgers or keys, a
frame too short to hold an entry's ids) is not a run of adds: the caller takes those frames one by one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.exceptions import BadRequestException
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import entry_format

_HEAD = 4 + v2.MASTER_KEY_LENGTH  # an ADDENTRY payload's header and master key, before the entry
_FRAMED_HEAD = 4 + _HEAD  # the same behind the frame's length
_ANSWER = np.dtype([("length", ">i4"), ("header", ">i4"), ("rc", ">i4"), ("ledger", ">i8"), ("entry", ">i8")])
_MIN_ENTRY = 16  # an entry starts with its ledger id and entry id


@dataclass
class V2AddRun:
    """A run of v2 adds of one ledger: what the bookie stores and answers."""
    version: int
    flags: int
    master_key: bytes
    ledger_id: int
    entry_ids: np.ndarray  # int64, in the order the requests came
    framed: bytes  # the entries, framed as the storage keeps them

    @property
    def recovery(self) -> bool:
        return bool(self.flags & v2.FLAG_RECOVERY_ADD)

    @property
    def count(self) -> int:
        return len(self.entry_ids)

    def encode_answers(self, code: int) -> bytes:
        """The framed answers to every add of the run, all with the v3 status ``code`` (as its v2 code)."""
        return encode_add_answers(self.version, v2.to_v2_status(code), self.ledger_id, self.entry_ids)


def scan_add_run(block: bytes, payload_size: int, count: int) -> V2AddRun | None:
    """The adds in ``count`` frames of ``payload_size`` bytes each, back to back in ``block``; None unless every
    one is a v2 ADDENTRY of the same ledger (not negative), master key and flags, holding an entry's ids."""
    entry_size = payload_size - _HEAD
    if entry_size < _MIN_ENTRY:
        return None
    rows = np.frombuffer(block, dtype=np.uint8, count=count * (payload_size + 4)).reshape(count, payload_size + 4)
    heads = rows[:, 4:_FRAMED_HEAD]  # header and master key
    if not (heads == heads[0]).all():
        return None
    header = int.from_bytes(block[4:8], "big", signed=True)
    version, op, flags = v2.unpack_header(header)
    if op != v2.ADDENTRY or version == 0:
        return None
    ids = rows[:, _FRAMED_HEAD:_FRAMED_HEAD + 16].copy().view(">i8")  # (ledger id, entry id) per row
    ledger_id = int(ids[0, 0])
    if ledger_id < 0 or not (ids[:, 0] == ledger_id).all():
        return None
    framed = np.empty((count, entry_format.FRAME_LEN + entry_size), dtype=np.uint8)
    framed[:, :entry_format.FRAME_LEN] = np.frombuffer(entry_format.FRAME.pack(entry_size), dtype=np.uint8)
    framed[:, entry_format.FRAME_LEN:] = rows[:, _FRAMED_HEAD:]
    return V2AddRun(version, flags, bytes(block[8:_FRAMED_HEAD]), ledger_id, ids[:, 1].astype(np.int64),
                    framed.tobytes())


def encode_add_answers(version: int, rc: int, ledger_id: int, entry_ids: np.ndarray) -> bytes:
    """The framed v2 answers to adds of ``entry_ids`` of one ledger, all with return code ``rc``: what
    ``encode_add_response`` gives each, framed, in one buffer."""
    answers = np.empty(len(entry_ids), dtype=_ANSWER)
    answers["length"] = v2.RESPONSE_HEADERS_SIZE
    answers["header"] = v2.pack_header(version, v2.ADDENTRY)
    answers["rc"] = rc
    answers["ledger"] = ledger_id
    answers["entry"] = entry_ids
    return answers.tobytes()


def encode_add_requests(head: bytes, framed: bytes, min_rows: int = 1) -> tuple[bytes, list[int]] | None:
    """The framed v2 ADDENTRY requests of a framed batch (``(size:i32 | entry)*``) whose entries all have one
    size, each request ``head`` (``add_request_head``) and the entry, and the entries' ids; None if the sizes
    differ or there are fewer than ``min_rows`` entries."""
    rows = entry_format.framed_rows(framed, min_rows)
    if rows is None:
        return None
    size = rows.shape[1] - entry_format.FRAME_LEN
    out = np.empty((len(rows), 4 + len(head) + size), dtype=np.uint8)
    out[:, :4] = np.frombuffer(entry_format.FRAME.pack(len(head) + size), dtype=np.uint8)
    out[:, 4:4 + len(head)] = np.frombuffer(head, dtype=np.uint8)
    out[:, 4 + len(head):] = rows[:, entry_format.FRAME_LEN:]
    return out.tobytes(), entry_format.row_entry_ids(rows).tolist()


def decode_add_answers(block: bytes, payload_size: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(return codes, ledger ids, entry ids) of ``count`` framed v2 answers back to back in ``block``;
    BadRequestException unless every one is an ADDENTRY answer."""
    if payload_size != v2.RESPONSE_HEADERS_SIZE:
        raise BadRequestException(f"a v2 ADDENTRY answer is {v2.RESPONSE_HEADERS_SIZE} bytes, got {payload_size}")
    answers = np.frombuffer(block, dtype=_ANSWER, count=count)
    ops = (answers["header"] >> 16) & 0xFF
    if not ((ops == v2.ADDENTRY) & (answers["header"] >> 24 != 0)).all():
        raise BadRequestException("not a v2 ADDENTRY answer among a run of answers")
    return answers["rc"], answers["ledger"], answers["entry"]
