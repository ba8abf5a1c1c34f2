"""Range reads by BookKeeper 4.17's batch read (v2 BATCH_READ_ENTRY; BookKeeper's BatchedReadOp reads a
ledger this way): one request returns up to ``maxCount`` consecutive entries of one ledger from
``entryId`` on, and its answer's body, ``(size:i32 | entry)*``, is exactly the framed-entries buffer
(``entry_format.FRAME``) that ``DigestManager.verify_columns`` checks in bulk: no Python work per entry.

What a real BookKeeper 4.17.4 bookie does (probed over a raw socket; tests/interop/test_batched_read_java.py
keeps the facts this module relies on):

- ``maxCount`` is honoured; 0 (or less) means no limit.
- ``maxSize`` bounds the whole answer frame, its 4-byte length included: 36 bytes of headers plus
  ``4 + len(entry)`` per entry. The first entry always comes, even if it alone is larger. The bookie
  caps it further at its ``maxBatchReadSize`` (5 MiB by default: an 8 MiB ask got 5,242,364 bytes).
- The answer stops, with EOK, before the first entry the bookie cannot read, so a short answer does
  not say why it is short (the end of the range, the size limit, a missing entry or a failing disk).
  Only an entry asked for *first* is answered for: ENOENTRY / ENOLEDGER / EIO with no entries, the
  request id still present.
- Answers carry the request id; several requests may be in flight on one connection (a bookie's read
  threads may answer them out of order, so they are matched by id).
- The v2 request works on a fresh connection without an AUTH exchange (authentication disabled), and
  even after v3 requests on the same connection; this client still keeps v2 on its own sockets
  (``BatchedReadChannel``) because its v3 connection parses every frame as a v3 Response.

``BatchedRangeRead`` turns that into the stream ``read_entries`` promises: in order, every entry is
either sent or known absent up to ``lastEntryIdCovered``. After a short answer it asks again from the
first entry not sent, so an absent or unreadable entry is always answered for by itself. Batch reads
pay where the bookie holds the whole range (a fragment with WQ == E); at the first absent entry (a
striped bookie, or the end of what a bookie holds) they stop and ``rest`` tells the caller to go on with
single reads, which cost the same per absent entry and are pipelined. A bookie older than 4.17 does not
know the request (it closes the connection or answers EBADREQ): then ``rest`` is the whole range.
"""
from __future__ import annotations

import socket
import struct
from collections import deque
from dataclasses import dataclass
from typing import Iterator

from bookie.exceptions import BKBookieHandleNotAvailableException, BKTimeoutException
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format, status
from bookie.proto.native_frames import FRAME_HEADER

BATCH_WINDOW = 3  # batch reads in flight per range read: the bookie reads the next while this side verifies
_ANSWER_HEAD = struct.Struct(">iiqqq")  # packet header, rc, ledgerId, entryId, requestId
_FRAMED_HEAD = struct.Struct(">i" + _ANSWER_HEAD.format[1:])  # the same behind the frame's length
_INT32_MAX = (1 << 31) - 1


@dataclass(slots=True)
class BatchAnswer:
    request_id: int
    status: int  # v3 status of the answer's rc
    entry_id: int
    entries: bytes  # framed entries


class BatchedReadChannel:
    """One v2 socket to a bookie, used by one range read at a time; the reading thread sends and
    receives itself (no reader thread, no Future per request)."""

    def __init__(self, bookie_id: str, address: str, timeout: float, max_frame_size: int, connect_timeout: float):
        self.bookie_id = bookie_id
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        host, _, port = address.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as exc:
            raise BKBookieHandleNotAvailableException(
                f"bookie {bookie_id} is not reachable at {address} ({exc})") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self._head = bytearray(_FRAMED_HEAD.size)
        self.next_request_id = 1
        self.outstanding = 0  # requests sent and not yet answered: a channel is reused only at 0

    def ask(self, ledger_id: int, entry_id: int, max_count: int, max_size: int) -> int:
        request_id, self.next_request_id = self.next_request_id, self.next_request_id + 1
        payload = v2.encode_request(v2.BatchedReadRequest(v2.CURRENT_PROTOCOL_VERSION, v2.FLAG_NONE, ledger_id,
                                                          entry_id, request_id, max_count, max_size))
        try:
            self.sock.sendall(FRAME_HEADER.pack(len(payload)) + payload)
        except OSError as exc:
            raise self._lost(exc) from None
        self.outstanding += 1
        return request_id

    def receive(self) -> BatchAnswer:
        """The next answer; the entries are read straight into their own buffer."""
        head = self._head
        self._read_into(memoryview(head))
        length, header, rc, _, entry_id, request_id = _FRAMED_HEAD.unpack_from(head)
        if v2.unpack_header(header)[1] != v2.BATCH_READ_ENTRY or not _ANSWER_HEAD.size <= length <= self.max_frame_size:
            raise self._lost(ValueError(f"not a BATCH_READ_ENTRY answer (header {header:#x}, {length} bytes)"))
        body = bytearray(length - _ANSWER_HEAD.size)
        self._read_into(memoryview(body))
        self.outstanding -= 1
        return BatchAnswer(request_id, v2.to_v3_status(rc), entry_id, bytes(body))

    def _read_into(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            try:
                n = self.sock.recv_into(view[got:])
            except socket.timeout:
                self.close()
                raise BKTimeoutException(f"batch read on bookie {self.bookie_id} timed out ({self.timeout} s)") from None
            except OSError as exc:
                raise self._lost(exc) from None
            if not n:
                raise self._lost(ConnectionError("the bookie closed the connection"))
            got += n

    def _lost(self, exc: Exception) -> BKBookieHandleNotAvailableException:
        self.close()
        return BKBookieHandleNotAvailableException(f"batch-read connection to bookie {self.bookie_id} lost: {exc}")

    def close(self) -> None:
        self.outstanding = -1  # never reused
        self.sock.close()


class BatchedRangeRead:
    """The entries of ``[first, last]`` of one ledger from one bookie by batch reads, as
    ``ReadRangeResponse``s (one per answer). Afterwards ``rest`` is the first entry id left for the
    caller's single reads (None: the range is done), ``channel_reusable`` whether the socket is clean."""

    def __init__(self, channel: BatchedReadChannel, ledger: LedgerId, first: int, last: int, max_size: int):
        self.channel, self.ledger, self.first, self.last = channel, ledger, first, last
        self.max_size = max_size
        self.rest: int | None = None

    @property
    def channel_reusable(self) -> bool:
        return self.channel.outstanding == 0

    def __iter__(self) -> Iterator[pb.ReadRangeResponse]:
        channel, lid, last = self.channel, self.ledger.ledger_id, self.last
        # In output order: (request id, first entry asked, last entry asked or None while the chunk
        # size is unknown). The first request asks for the whole range within max_size; its answer
        # sets how many entries a request asks for from then on.
        pending: deque[tuple[int, int, int | None]] = deque()
        answers: dict[int, BatchAnswer] = {}
        pending.append((channel.ask(lid, self.first, min(last - self.first + 1, _INT32_MAX), self.max_size),
                        self.first, None))
        chunk, next_id, answered = 0, last + 1, False
        while pending:
            request_id, a, b = pending.popleft()
            try:
                while request_id not in answers:
                    answer = channel.receive()
                    answers[answer.request_id] = answer
            except BKBookieHandleNotAvailableException:
                if answered:
                    raise
                self.rest = self.first  # the bookie may not know the request (< 4.17): single reads decide
                return
            answer = answers.pop(request_id)
            if answer.status != status.EOK:
                if answer.status == status.ENOLEDGER:  # nothing of the ledger here: all of the range is absent
                    yield pb.ReadRangeResponse(status=status.EOK, lastEntryIdCovered=last, maxLAC=-1)
                elif answer.status == status.ENOENTRY or (answer.status == status.EBADREQ and not answered):
                    self.rest = a  # an absent entry, or no batch reads here: single reads go on from it
                else:
                    yield pb.ReadRangeResponse(status=answer.status, lastEntryIdCovered=a - 1, message=(
                        f"batch read of entry {a} on bookie {channel.bookie_id}: {status.name_of(answer.status)}"))
                return
            answered = True
            try:
                ids, _, max_lac = entry_format.scan_batch(answer.entries, self.ledger, channel.max_frame_size)
            except ValueError as exc:
                yield pb.ReadRangeResponse(status=status.EIO, lastEntryIdCovered=a - 1, message=(
                    f"batch read of entry {a} on bookie {channel.bookie_id}: bad answer ({exc})"))
                return
            n = len(ids)
            end = a + n - 1
            if not n or ids[0] != a or ids[-1] != end or (b is not None and end > b):
                yield pb.ReadRangeResponse(status=status.EIO, lastEntryIdCovered=a - 1, message=(
                    f"batch read of entry {a} on bookie {channel.bookie_id}: answered entries "
                    f"{ids[:1].tolist()}..{ids[-1:].tolist()}, not consecutive from {a}"))
                return
            if b is None:  # the first answer: as many entries per request from now on
                chunk, next_id = n, end + 1
            elif end < b:  # cut short (size, or an entry it could not read): ask again from there, first
                pending.appendleft((channel.ask(lid, end + 1, b - end, self.max_size), end + 1, b))
            while len(pending) < BATCH_WINDOW and next_id <= last:
                b_next = min(last, next_id + chunk - 1)
                pending.append((channel.ask(lid, next_id, b_next - next_id + 1, self.max_size), next_id, b_next))
                next_id = b_next + 1
            yield pb.ReadRangeResponse(status=status.EOK, entries=answer.entries, entryCount=n,
                                       lastEntryIdCovered=end, maxLAC=max_lac)
