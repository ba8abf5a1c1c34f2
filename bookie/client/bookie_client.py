"""One gRPC channel to one bookie (BookKeeper's PerChannelBookieClient). Thread-safe.

Adds go on one bidirectional stream per bookie, opened on first use and reopened after a failure;
each ``add`` returns a future completed by the bookie's response for that batch (matched by txnId).
Other requests are unary calls, and range reads a server stream. Transport failures surface as
BKBookieHandleNotAvailableException or BKTimeoutException naming the bookie; bookie answers are
returned as they are (with their status) for the caller to interpret.

A client given the address a bookie id was resolved to names that id on every call (metadata
``bk-bookie-id``); a bookie that is another one refuses, and the call fails with BKWrongBookieException
naming both ids. A client given only an address (benches, a bare servicer) names no bookie.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
from concurrent.futures import Future
from typing import Iterator

import grpc

from bookie.exceptions import (BKBookieHandleNotAvailableException, BKClientClosedException,
                               BKMessageTooLargeException, BKReadException, BKTimeoutException,
                               BKWrongBookieException, from_status)
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BOOKIE_ID_KEY
from bookie.proto import availability, status
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_pb2_grpc as pb_grpc
from bookie.proto.range_columns import RangeColumns

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 << 20
CONNECT_TIMEOUT = 2.0  # seconds (BookKeeper's clientConnectTimeoutMillis is 10 s; a writer should move on sooner)
# gRPC's default reconnect backoff grows to 120 s: a bookie that restarts would stay unreachable.
CHANNEL_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE),
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000)]
_CLOSE = object()
ADD_ENTRIES = f"/{pb.DESCRIPTOR.services_by_name['Bookie'].full_name}/AddEntries"


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # an int64 below zero is its two's complement, as protobuf writes it
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_add_request(txn_id: int, ledger: LedgerId, master_key: bytes, recovery: bool,
                       entries: bytes | list[bytes]) -> bytes:
    """An ``AddRequest`` as protobuf serializes it (fields in number order, defaults left out), built by
    hand: the framed entries (one buffer, or consecutive pieces of it) are copied once, into the message,
    instead of joined, copied into a message object and copied again when gRPC serializes it."""
    parts = [entries] if isinstance(entries, (bytes, bytearray, memoryview)) else entries
    head = [b"\x08", _varint(txn_id)]
    if ledger.scope_id:
        head += (b"\x10", _varint(ledger.scope_id))
    if ledger.ledger_id:
        head += (b"\x18", _varint(ledger.ledger_id))
    if master_key:
        head += (b"\x22", _varint(len(master_key)), master_key)
    if recovery:
        head += (b"\x28", _varint(pb.AddRequest.RECOVERY_ADD))
    size = sum(map(len, parts))
    if size:
        head += (b"\x3a", _varint(size), *parts)
    return b"".join(head)


def _refused_as(exc: grpc.RpcError) -> str | None:
    """The bookie id a bookie that refused a call as meant for another one gave (trailing metadata)."""
    try:
        trailing = exc.trailing_metadata() or ()
    except Exception:  # an error raised before the call had any
        return None
    return next((value for key, value in trailing if key == BOOKIE_ID_KEY), None)


def transport_error(bookie_id: str, what: str, exc: grpc.RpcError, address: str | None = None):
    code = exc.code() if hasattr(exc, "code") else None
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    actual = _refused_as(exc) if code == grpc.StatusCode.FAILED_PRECONDITION else None
    if actual is not None:
        return BKWrongBookieException(
            f"{what} on bookie {bookie_id} refused: the bookie at {address or bookie_id} is bookie {actual}, not "
            f"{bookie_id} (bookie {bookie_id}'s registration points at another bookie's endpoint)", bookie_id, actual)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return BKTimeoutException(f"{what} on bookie {bookie_id} timed out")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (detail or ""):
        return BKMessageTooLargeException(
            f"{what} on bookie {bookie_id}: the bookie refused the message as too large ({code.name} {detail}); a "
            "bookie takes at most its nettyMaxFrameSizeBytes a message: set the client's no higher than the bookies'")
    return BKBookieHandleNotAvailableException(f"{what} on bookie {bookie_id} failed: {code.name if code else ''} {detail}")


class _AddStream:
    """The bidirectional add stream: a queue feeds requests, a thread completes futures."""

    def __init__(self, client: "BookieClient"):
        self.client = client
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.pending: dict[int, Future] = {}
        self.lock = threading.Lock()
        self.broken: Exception | None = None
        # Requests go as bytes already encoded (encode_add_request): no serializer.
        add_entries = client.channel.stream_stream(ADD_ENTRIES, request_serializer=None,
                                                   response_deserializer=pb.AddResponses.FromString)
        self.responses = add_entries(iter(self.requests.get, _CLOSE), metadata=client.metadata)
        self.thread = threading.Thread(target=self._receive, name=f"add-stream-{client.bookie_id}", daemon=True)
        self.thread.start()

    def send(self, txn_id: int, request: bytes, future: Future) -> None:
        with self.lock:
            if self.broken is not None:
                raise self.broken
            self.pending[txn_id] = future
        self.requests.put(request)

    def _receive(self) -> None:
        error: Exception | None = None
        try:
            for message in self.responses:
                for response in message.responses:
                    with self.lock:
                        future = self.pending.pop(response.txnId, None)
                    if future is not None:
                        future.set_result(response)
            error = BKBookieHandleNotAvailableException(f"add stream to bookie {self.client.bookie_id} ended")
        except grpc.RpcError as exc:
            error = transport_error(self.client.bookie_id, "add", exc, self.client.address)
        with self.lock:
            self.broken = error
            pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        self.requests.put(_CLOSE)
        self.responses.cancel()


class BookieClient:
    def __init__(self, bookie_id: str, timeout: float = 5.0, address: str | None = None):
        self.bookie_id = bookie_id
        self.timeout = timeout
        # The registered grpc endpoint when there is one (it may differ from the bookie id); the bookie found
        # there must be ``bookie_id``.
        self.address = address or bookie_id
        self.metadata = ((BOOKIE_ID_KEY, bookie_id),) if address is not None else None
        self.channel = grpc.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        self.stub = pb_grpc.BookieStub(self.channel)
        self._txn = itertools.count(1)
        self._stream: _AddStream | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- adds ----------------------------------------------------------------------------------------
    def add(self, ledger: LedgerId, master_key: bytes, entries: bytes | list[bytes], recovery: bool = False) -> Future:
        """Send a framed batch of ``ledger``'s entries (one buffer, or its pieces in order); the future gets
        the AddResponse."""
        txn_id = next(self._txn)
        request = encode_add_request(txn_id, ledger, master_key, recovery, entries)
        future: Future = Future()
        for attempt in (1, 2):
            stream = self._add_stream()
            try:
                stream.send(txn_id, request, future)
                return future
            except Exception as exc:
                with self._lock:  # a broken stream: open a new one once (not at a bookie that is another one)
                    if self._stream is stream:
                        self._stream = None
                if attempt == 2 or isinstance(exc, BKWrongBookieException):
                    raise
        return future

    def _add_stream(self) -> _AddStream:
        with self._lock:
            if self._closed:
                raise BKClientClosedException(f"client of bookie {self.bookie_id} is closed")
            if self._stream is None or self._stream.broken is not None:
                wait = min(self.timeout, CONNECT_TIMEOUT)
                try:  # connect first, briefly: a writer replaces a bookie it cannot reach
                    grpc.channel_ready_future(self.channel).result(timeout=wait)
                except grpc.FutureTimeoutError:
                    raise BKBookieHandleNotAvailableException(
                        f"bookie {self.bookie_id} is not reachable at {self.address} (no connection within "
                        f"{wait:.1f} s)") from None
                self._stream = _AddStream(self)
            return self._stream

    # -- unary requests ------------------------------------------------------------------------------
    def _call(self, method, request, what: str, timeout: float | None = None):
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise transport_error(self.bookie_id, what, exc, self.address) from None

    def _call_async(self, method, request, what: str, timeout: float | None = None) -> Future:
        out: Future = Future()
        call = method.future(request, timeout=timeout or self.timeout, metadata=self.metadata)

        def done(c):
            try:
                out.set_result(c.result())
            except grpc.RpcError as exc:
                out.set_exception(transport_error(self.bookie_id, what, exc, self.address))
        call.add_done_callback(done)
        return out

    def read_entry_async(self, ledger: LedgerId, entry_id: int, *, fence: bool = False, master_key: bytes = b"",
                         previous_lac: int | None = None, timeout_ms: int = 0, piggyback: bool = False,
                         timeout: float | None = None) -> Future:
        flag = pb.ReadRequest.FENCE_LEDGER if fence else pb.ReadRequest.ENTRY_PIGGYBACK if piggyback else pb.ReadRequest.NONE
        request = pb.ReadRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, entryId=entry_id, flag=flag,
                                 masterKey=master_key, timeOut=timeout_ms)
        if previous_lac is not None:
            request.previousLAC = previous_lac
        wait = (timeout or self.timeout) + timeout_ms / 1000.0
        return self._call_async(self.stub.ReadEntry, request, f"read of ledger {ledger} entry {entry_id}", wait)

    def read_entry(self, ledger: LedgerId, entry_id: int, **kwargs) -> pb.ReadResponse:
        return self.read_entry_async(ledger, entry_id, **kwargs).result()

    def read_entries(self, ledger: LedgerId, first: int, last: int, max_bytes: int = 0, stride: int = 0,
                     offset: int = 0, timeout: float | None = None) -> Iterator[pb.ReadRangeResponse]:
        request = pb.ReadRangeRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, firstEntryId=first,
                                      lastEntryId=last, maxBytesPerMessage=max_bytes, stride=stride, offset=offset)
        try:
            yield from self.stub.ReadEntries(request, timeout=timeout or self.timeout * 12, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise transport_error(self.bookie_id, f"read of ledger {ledger} entries {first}..{last}", exc,
                                  self.address) from None

    def read_entries_of_ledgers(self, ranges: RangeColumns | list[pb.ReadRangeRequest], max_bytes: int = 0,
                                timeout: float | None = None) -> Iterator[pb.ReadRangesResponse]:
        """What the bookie stores of each range (ReadEntriesOfLedgers): one call for many small ledgers, the
        ranges sent as columns (or as messages, one ReadRangeRequest each)."""
        if isinstance(ranges, RangeColumns):
            request = ranges.request(max_bytes)
        else:
            request = pb.ReadRangesRequest(ranges=ranges, maxBytesPerMessage=max_bytes)
        try:
            yield from self.stub.ReadEntriesOfLedgers(request, timeout=timeout or self.timeout * 12,
                                                      metadata=self.metadata)
        except grpc.RpcError as exc:
            raise transport_error(self.bookie_id, f"read of {len(ranges)} ranges", exc, self.address) from None

    def write_lac(self, ledger: LedgerId, master_key: bytes, lac: int, body: bytes) -> pb.WriteLacResponse:
        return self._call(self.stub.WriteLac, pb.WriteLacRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id,
                                                                 lac=lac, masterKey=master_key, body=body),
                          f"write LAC of ledger {ledger}")

    def read_lac(self, ledger: LedgerId) -> pb.ReadLacResponse:
        return self._call(self.stub.ReadLac, pb.ReadLacRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id),
                          f"read LAC of ledger {ledger}")

    def force_ledger(self, ledger: LedgerId) -> pb.ForceLedgerResponse:
        return self._call(self.stub.ForceLedger, pb.ForceLedgerRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id),
                          f"force of ledger {ledger}")

    def bookie_info(self) -> pb.GetBookieInfoResponse:
        flags = pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY | pb.GetBookieInfoRequest.FREE_DISK_SPACE
        return self._call(self.stub.GetBookieInfo, pb.GetBookieInfoRequest(requested=flags), "bookie info")

    def list_entries(self, ledger: LedgerId, timeout: float | None = None) -> pb.GetListOfEntriesOfLedgerResponse:
        """The ledger's list of entries; ``timeout``: seconds to wait for it (default the client's)."""
        request = pb.GetListOfEntriesOfLedgerRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id)
        return self._call(self.stub.GetListOfEntriesOfLedger, request, f"list of entries of ledger {ledger}", timeout)

    def list_entries_of_ledgers(self, ledgers: list[LedgerId],
                                timeout: float | None = None) -> list[pb.GetListOfEntriesOfLedgerResponse]:
        """Each ledger's list of entries, in order, asked MAX_LEDGERS_PER_LIST_REQUEST ledgers per request, each
        request waited for ``timeout`` seconds (default the client's)."""
        out: list[pb.GetListOfEntriesOfLedgerResponse] = []
        step = availability.MAX_LEDGERS_PER_LIST_REQUEST
        for i in range(0, len(ledgers), step):
            chunk = ledgers[i: i + step]
            request = pb.GetListOfEntriesOfLedgersRequest(ledgers=[
                pb.GetListOfEntriesOfLedgerRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id)
                for ledger in chunk])
            response = self._call(self.stub.GetListOfEntriesOfLedgers, request,
                                  f"lists of entries of {len(chunk)} ledgers", timeout)
            if response.status != status.EOK:
                raise from_status(response.status, BKReadException,
                                  f"bookie {self.bookie_id}: lists of entries of {len(chunk)} ledgers: {response.message}")
            out.extend(response.ledgers)
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        self.channel.close()

    def garbage_collection(self, action: int = pb.GarbageCollectionRequest.STATUS, major: bool = False,
                           minor: bool = False, ledger_details: bool = False,
                           timeout: float | None = None) -> pb.GarbageCollectionResponse:
        """The bookie's garbage collection: its status, or force a pass / suspend / resume compaction
        (``pb.GarbageCollectionRequest.Action``) and its status after that. ``ledger_details``: each
        entry log's ledgers (live and deleted-but-not-reclaimed bytes) and the log being written too.
        ``timeout``: seconds to wait for the answer (default the client's)."""
        request = pb.GarbageCollectionRequest(action=action, major=major, minor=minor, ledgerDetails=ledger_details)
        what = f"garbage collection {pb.GarbageCollectionRequest.Action.Name(action)}"
        return self._call(self.stub.GarbageCollection, request, what, timeout)
