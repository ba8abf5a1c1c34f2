"""One TCP connection to one bookie speaking BookKeeper's native protocol, v3 (BookKeeper's
PerChannelBookieClient). Thread-safe; the same interface and answers as ``BookieClient`` (gRPC), so
the writer and the readers do not know which transport a bookie has.

Each request is a v3 ``Request`` in a length-prefixed frame; responses come back matched by txnId.
Many requests are in flight at once: a request is queued, and the connection's writer thread writes
everything queued by then with one ``sendall`` (what queues meanwhile goes in the next one), as Netty's
event loop writes and coalesces for the threads that queue. One reader thread per connection completes
futures.

The native protocol has no batched add and no range read, so ``add`` of a framed batch sends one
AddRequest per entry (serialized from the batch's constant parts, by columns, with consecutive txnIds
from the process's counter: a part that goes to every bookie of its write set is encoded once, and the
same buffer, txnIds included, is written to each (``add_requests``); the entries share one in-flight
record, registered once a part by its first txnId, no Future each, and a run of answers is counted as a
range of txnIds) and answers the batch as the gRPC bookie would (one
AddResponse: first/last entry id, count, the first failing status). With ``use_v2`` (the client's
``useV2WireProtocol``, as Pulsar runs BookKeeper's client) the adds are v2 ADDENTRY requests instead, on a
connection of their own: a fixed header and the master key before each entry, a fixed 24-byte answer, no
protobuf either way; every other request stays v3. ``read_entries`` yields
``ReadRangeResponse``s shaped like the gRPC bookie's stream: a contiguous range by BookKeeper 4.17's
batch reads (``batched_read``: v2 BATCH_READ_ENTRY on sockets of their own, kept for reuse) while the
bookie holds every entry, then (a striped range, or from the first absent entry on) pipelined
single-entry reads.

Transport failures are BKBookieHandleNotAvailableException (connection refused or lost: every
request in flight fails, the next request reconnects) or BKTimeoutException (one request's
readTimeout passed; the connection stays). Bookie answers are returned with their status. Ledgers of
a non-zero scope (128-bit ids) cannot be named in this protocol and are refused.

A client given the address a bookie id was resolved to checks, when it connects, that the bookie there
is that bookie: its first request is a GetBookieInfo whose ``requestContext`` (BookKeeper's v3 field for
MDC pairs) names the id under ``bk-bookie-id``. This project's bookies answer EBADREQ when they are
another bookie, and the connection fails with BKWrongBookieException; Java bookies ignore the pair and
answer, so against them the check proves nothing (the protocol has no field that carries a bookie's id).
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Callable, Iterator

from bookie.client import add_requests
from bookie.client.batched_read import BatchedRangeRead, BatchedReadChannel
from bookie.client.native_connection import (ChannelConnection, PendingAddBatch, PendingCall, v2_add_answer,
                                             v2_add_answers)
from bookie.exceptions import (BKBookieHandleNotAvailableException, BKClientClosedException, BKException,
                               BKIncorrectParameterException, BKTimeoutException, BKWrongBookieException)
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BOOKIE_ID_KEY
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import entry_format, status
from bookie.proto.native_frames import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0  # seconds; as BookieClient: a writer should move on to another bookie soon
DEFAULT_HIGH_PRIORITY_VALUE = 100  # PerChannelBookieClient: recovery adds and fencing reads
READ_WINDOW = 512  # single-entry reads a range read keeps in flight
DEFAULT_RANGE_BYTES = 4 << 20  # bytes of entries per ReadRangeResponse when the caller names none


def native_ledger_id(bookie_id: str, ledger: LedgerId) -> int:
    if ledger.scope_id != 0:
        raise BKIncorrectParameterException(
            f"ledger {ledger} has scope {ledger.scope_id}: ledgers of a non-zero scope (128-bit ids) exist only on "
            f"the gRPC path, and bookie {bookie_id} speaks only BookKeeper's native protocol (64-bit ledger ids)")
    return ledger.ledger_id


def _converter(field: str, out_type, copied: tuple[str, ...], **fixed) -> Callable[[v3.Response], object]:
    """Native ``Response`` -> the gRPC message of the same name: the operation's status (the header's
    when the operation's part is missing, as BookKeeper's bookie answers a request it cannot parse)
    and the ``copied`` fields."""
    def convert(response: v3.Response):
        inner = getattr(response, field) if response.HasField(field) else None
        out = out_type(status=inner.status if inner is not None and inner.HasField("status") else response.status,
                       **fixed)
        for name in copied if inner is not None else ():
            if inner.HasField(name):
                setattr(out, name, getattr(inner, name))
        return out
    return convert


class NativeBookieClient:
    def __init__(self, bookie_id: str, timeout: float = 5.0, address: str | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, use_v2: bool = False):
        self.bookie_id = bookie_id
        self.address = address or bookie_id
        self.check_id = address is not None  # resolved from a registration: the bookie there must be bookie_id
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self.use_v2 = use_v2  # adds as v2 ADDENTRY (useV2WireProtocol)
        self._v2_connection: ChannelConnection | None = None
        self._deferred = threading.local()  # requests held back by _written_together on this thread
        self._lock = threading.Lock()
        self._connection: ChannelConnection | None = None
        self._idle_batch_channels: list[BatchedReadChannel] = []  # v2 sockets between range reads
        self._closed = False

    # -- connection ----------------------------------------------------------------------------------
    def _connect(self) -> ChannelConnection:
        with self._lock:
            if self._closed:
                raise BKClientClosedException(f"client of bookie {self.bookie_id} is closed")
            if self._connection is not None and self._connection.broken is None:
                return self._connection
            wait = min(self.timeout, CONNECT_TIMEOUT)
            connection = ChannelConnection(self.bookie_id, self.max_frame_size, self._open_socket(wait))
            if self.check_id:
                self._check_bookie_id(connection, wait)
            self._connection = connection
            return connection

    def _connect_v2(self) -> ChannelConnection:
        """The connection v2 adds go on. A v2 request cannot name a bookie id: it is opened only once the v3
        connection found the bookie at the address to be ``bookie_id``."""
        if self.check_id:
            self._connect()
        with self._lock:
            if self._closed:
                raise BKClientClosedException(f"client of bookie {self.bookie_id} is closed")
            if self._v2_connection is None or self._v2_connection.broken is not None:
                sock = self._open_socket(min(self.timeout, CONNECT_TIMEOUT))
                self._v2_connection = ChannelConnection(self.bookie_id, self.max_frame_size, sock, v2_add_answer,
                                                        v2_add_answers)
            return self._v2_connection

    def _open_socket(self, wait: float) -> socket.socket:
        host, _, port = self.address.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=wait)
        except (OSError, ValueError) as exc:
            raise BKBookieHandleNotAvailableException(
                f"bookie {self.bookie_id} is not reachable at {self.address} ({exc})") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        return sock

    def _check_bookie_id(self, connection: ChannelConnection, wait: float) -> None:
        """Ask the new connection's bookie whether it is ``bookie_id`` (see the module's docstring); close it
        and raise if it is not, or does not answer within ``wait`` seconds."""
        txn, request = self._new_request(v3.GET_BOOKIE_INFO)
        request.getBookieInfoRequest.requested = 0
        request.requestContext.add(key=BOOKIE_ID_KEY, value=self.bookie_id)
        call = PendingCall(lambda response: response, time.monotonic() + wait, "bookie id check")
        error: BKBookieHandleNotAvailableException | None = None
        try:
            connection.send([(txn, request.SerializeToString(), call)])
            answer = call.future.result()
        except BKTimeoutException:
            error = BKBookieHandleNotAvailableException(
                f"bookie {self.bookie_id} at {self.address} did not answer within {wait:.1f} s of connecting")
        except BKException as exc:  # the connection was lost (or closed)
            error = BKBookieHandleNotAvailableException(
                f"bookie {self.bookie_id} at {self.address} did not answer when connected to ({exc})")
        else:
            if answer.status == status.EBADREQ:
                error = BKWrongBookieException(
                    f"the bookie at {self.address} is not bookie {self.bookie_id}: it refused requests meant for "
                    f"{self.bookie_id} (bookie {self.bookie_id}'s registration points at another bookie's endpoint; "
                    "that bookie's log names its id)", self.bookie_id)
        if error is not None:
            connection.close()
            raise error

    def _new_request(self, operation: int, priority: int = 0) -> tuple[int, v3.Request]:
        """A Request with its header filled in; the caller fills in the operation's part."""
        txn = add_requests.TXN_IDS.take(1)
        request = v3.Request()
        header = request.header
        header.version = v3.VERSION_THREE
        header.operation = operation
        header.txnId = txn
        if priority:
            header.priority = priority
        return txn, request

    def _submit(self, requests: list[tuple[int, bytes, PendingCall | PendingAddBatch]]) -> None:
        """Send on the connection, reconnecting once if it broke since it was last used."""
        held = getattr(self._deferred, "requests", None)
        if held is not None:
            held.extend(requests)
            return
        for attempt in (1, 2):
            connection = self._connect()  # a bookie that is another one raises here: not retried
            try:
                connection.send(requests)
                return
            except BKBookieHandleNotAvailableException:
                if attempt == 2:
                    raise

    @contextlib.contextmanager
    def _written_together(self) -> Iterator[None]:
        """Requests this thread submits inside go out in one write at the end (Netty's write, then flush)."""
        self._deferred.requests = held = []
        try:
            yield
        finally:
            self._deferred.requests = None
        if held:
            self._submit(held)

    def _send_call(self, txn: int, request: v3.Request, convert, what: str, timeout: float) -> Future:
        call = PendingCall(convert, time.monotonic() + timeout, what)
        try:
            self._submit([(txn, request.SerializeToString(), call)])
        except BKBookieHandleNotAvailableException as exc:
            # An unreachable bookie fails the call's future, as gRPC's unary calls do: a reader asking
            # a whole ensemble (fence, LAC) counts it as one bookie that did not answer.
            call.future.set_exception(exc)
        return call.future

    def _call_async(self, operation: int, field: str, body, convert, what: str,
                    timeout: float | None = None) -> Future:
        txn, request = self._new_request(operation)
        getattr(request, field).CopyFrom(body)
        return self._send_call(txn, request, convert, what, timeout or self.timeout)

    # -- adds ----------------------------------------------------------------------------------------
    def add(self, ledger: LedgerId, master_key: bytes, entries: bytes | list[bytes], recovery: bool = False) -> Future:
        """Send a framed batch of ``ledger``'s entries (one buffer, or its pieces in order: each whole frames),
        one AddRequest each; the future gets one AddResponse."""
        lid = native_ledger_id(self.bookie_id, ledger)
        parts = [entries] if isinstance(entries, (bytes, bytearray, memoryview)) else entries
        if self.use_v2:
            return self._add_v2(ledger, lid, master_key, parts, recovery)
        priority = DEFAULT_HIGH_PRIORITY_VALUE if recovery else 0
        encoded = [add_requests.v3_add_requests(part, lid, master_key, priority, recovery) for part in parts]
        batch = PendingAddBatch(ledger, [i for _, _, ids in encoded for i in ids])
        if not batch.count:
            batch.future.set_result(batch.response)
            return batch.future

        def send(connection: ChannelConnection) -> None:
            sent = connection.send_adds(batch, [(first, len(ids)) for first, _, ids in encoded],
                                        [block for _, block, _ in encoded])
            if not sent:  # a part still in flight on this connection under these txnIds: sent with new ones
                again = [add_requests.v3_add_requests(part, lid, master_key, priority, recovery, again=True)
                         for part in parts]
                connection.send_adds(batch, [(first, len(ids)) for first, _, ids in again],
                                     [block for _, block, _ in again])
        self._send_block(send, self._connect)
        return batch.future

    def _send_block(self, send: Callable[[ChannelConnection], None], connect: Callable[[], ChannelConnection]) -> None:
        """``send`` a batch's framed requests on the connection, reconnecting once if it broke since it was last
        used (as ``_submit``)."""
        for attempt in (1, 2):
            try:
                send(connect())
                return
            except BKBookieHandleNotAvailableException:
                if attempt == 2:
                    raise

    def _add_v2(self, ledger: LedgerId, lid: int, master_key: bytes, parts: list, recovery: bool) -> Future:
        """``add`` as v2 ADDENTRY requests: each is the batch's constant head, then the entry; a part whose
        entries have one size is encoded as columns (v2_add_columns)."""
        if len(master_key) != v2.MASTER_KEY_LENGTH:
            raise BKIncorrectParameterException(
                f"a v2 add carries a master key of {v2.MASTER_KEY_LENGTH} bytes, not {len(master_key)}: "
                "useV2WireProtocol needs a key made from a password, as BookKeeper's client makes it")
        head = v2.add_request_head(master_key, recovery)
        encoded = [add_requests.v2_add_requests(part, head) for part in parts]
        blocks, ids = [block for block, _ in encoded], [i for _, part_ids in encoded for i in part_ids]
        batch = PendingAddBatch(ledger, ids)
        if not ids:
            batch.future.set_result(batch.response)
            return batch.future
        keys = [(lid, entry_id) for entry_id in ids]
        self._send_block(lambda connection: connection.send_block(keys, blocks, batch), self._connect_v2)
        return batch.future

    # -- reads ---------------------------------------------------------------------------------------
    def read_entry_async(self, ledger: LedgerId, entry_id: int, *, fence: bool = False, master_key: bytes = b"",
                         previous_lac: int | None = None, timeout_ms: int = 0, piggyback: bool = False,
                         timeout: float | None = None) -> Future:
        lid = native_ledger_id(self.bookie_id, ledger)
        txn, request = self._new_request(v3.READ_ENTRY, DEFAULT_HIGH_PRIORITY_VALUE if fence else 0)
        read = request.readRequest  # filled in place: no message of its own to copy in
        read.ledgerId = lid
        read.entryId = entry_id
        if fence:
            read.flag = v3.ReadRequest.FENCE_LEDGER
        elif piggyback:
            read.flag = v3.ReadRequest.ENTRY_PIGGYBACK
        if master_key:
            read.masterKey = master_key
        if previous_lac is not None:
            read.previousLAC = previous_lac
            read.timeOut = timeout_ms
        wait = (timeout or self.timeout) + timeout_ms / 1000.0

        convert = _converter("readResponse", pb.ReadResponse, ("entryId", "body", "maxLAC", "lacUpdateTimestamp"),
                             ledgerId=lid, entryId=entry_id)
        return self._send_call(txn, request, convert, f"read of ledger {ledger} entry {entry_id}", wait)

    def read_entry(self, ledger: LedgerId, entry_id: int, **kwargs) -> pb.ReadResponse:
        return self.read_entry_async(ledger, entry_id, **kwargs).result()

    def read_entries(self, ledger: LedgerId, first: int, last: int, max_bytes: int = 0, stride: int = 0,
                     offset: int = 0, timeout: float | None = None) -> Iterator[pb.ReadRangeResponse]:
        """The entries of ``[first, last]`` (those with ``e % stride == offset`` when striding) this bookie
        has, as the gRPC bookie streams them: framed entries, ``lastEntryIdCovered`` saying up to where
        an absent id is known absent here, and a final message with the failing status if a read fails."""
        native_ledger_id(self.bookie_id, ledger)
        limit = max_bytes or DEFAULT_RANGE_BYTES
        channel = self._batch_channel() if stride <= 1 and first <= last else None
        if channel is not None:
            batched = BatchedRangeRead(channel, ledger, first, last, min(limit, self.max_frame_size))
            try:
                yield from batched
            finally:
                self._release_batch_channel(batched)
            if batched.rest is None:
                return
            first = batched.rest
        yield from self._single_reads(ledger, first, last, limit, stride, offset)

    def _batch_channel(self) -> BatchedReadChannel | None:
        """An idle v2 socket or a new one; None if the bookie cannot be reached (the single reads then
        fail each read's future, as they always have). A v2 socket cannot name a bookie id: a new one is
        opened only once the v3 connection found the bookie at the address to be ``bookie_id``."""
        with self._lock:
            if self._closed:
                raise BKClientClosedException(f"client of bookie {self.bookie_id} is closed")
            if self._idle_batch_channels:
                return self._idle_batch_channels.pop()
        try:
            if self.check_id:
                self._connect()  # BKWrongBookieException goes to the reader: a failure of this bookie
        except BKWrongBookieException:
            raise
        except BKBookieHandleNotAvailableException:
            return None
        try:
            return BatchedReadChannel(self.bookie_id, self.address, self.timeout, self.max_frame_size,
                                      min(self.timeout, CONNECT_TIMEOUT))
        except BKBookieHandleNotAvailableException:
            return None

    def _release_batch_channel(self, batched: BatchedRangeRead) -> None:
        """Keep a channel with nothing in flight for the next range read; close any other."""
        with self._lock:
            if batched.channel_reusable and not self._closed:
                self._idle_batch_channels.append(batched.channel)
                return
        batched.channel.close()

    def _single_reads(self, ledger: LedgerId, first: int, last: int, limit: int, stride: int,
                      offset: int) -> Iterator[pb.ReadRangeResponse]:
        """``read_entries`` by pipelined single-entry reads (v3 READ_ENTRY, ``READ_WINDOW`` in flight)."""
        ids = range(first + (offset - first) % stride, last + 1, stride) if stride > 1 else range(first, last + 1)
        window: deque[tuple[int, Future]] = deque()
        todo = iter(ids)
        buffer, count, max_lac, covered = bytearray(), 0, -1, first - 1

        def message(code: int = status.EOK, text: str = "") -> pb.ReadRangeResponse:
            return pb.ReadRangeResponse(status=code, entries=bytes(buffer), entryCount=count,
                                        lastEntryIdCovered=covered, maxLAC=max_lac, message=text)
        try:
            while True:
                if len(window) <= READ_WINDOW // 2:  # refill by half a window at a time, in one write
                    with self._written_together():
                        for entry_id in itertools.islice(todo, READ_WINDOW - len(window)):
                            window.append((entry_id, self.read_entry_async(ledger, entry_id)))
                if not window:
                    break
                entry_id, future = window.popleft()
                response = future.result()
                if response.status == status.EOK:
                    buffer += entry_format.FRAME.pack(len(response.body))
                    buffer += response.body
                    count += 1
                    max_lac = max(max_lac, response.maxLAC)
                elif response.status not in (status.ENOENTRY, status.ENOLEDGER):
                    if count:
                        yield message()
                    buffer, count = bytearray(), 0
                    yield message(response.status, f"read of entry {entry_id} on bookie {self.bookie_id}: "
                                                   f"{status.name_of(response.status)}")
                    return
                covered = entry_id
                if len(buffer) >= limit:
                    yield message()
                    buffer, count = bytearray(), 0
            covered = last
            yield message()
        finally:
            for _, future in window:
                future.cancel()

    # -- other requests ------------------------------------------------------------------------------
    def _result(self, operation: int, field: str, body, convert, what: str, timeout: float | None = None):
        return self._call_async(operation, field, body, convert, what, timeout).result()

    def write_lac(self, ledger: LedgerId, master_key: bytes, lac: int, body: bytes) -> pb.WriteLacResponse:
        lid = native_ledger_id(self.bookie_id, ledger)
        return self._result(v3.WRITE_LAC, "writeLacRequest",
                            v3.WriteLacRequest(ledgerId=lid, lac=lac, masterKey=master_key, body=body),
                            _converter("writeLacResponse", pb.WriteLacResponse, (), ledgerId=lid),
                            f"write LAC of ledger {ledger}")

    def read_lac(self, ledger: LedgerId) -> pb.ReadLacResponse:
        lid = native_ledger_id(self.bookie_id, ledger)
        return self._result(v3.READ_LAC, "readLacRequest", v3.ReadLacRequest(ledgerId=lid),
                            _converter("readLacResponse", pb.ReadLacResponse, ("lacBody", "lastEntryBody"), ledgerId=lid),
                            f"read LAC of ledger {ledger}")

    def force_ledger(self, ledger: LedgerId) -> pb.ForceLedgerResponse:
        lid = native_ledger_id(self.bookie_id, ledger)
        return self._result(v3.FORCE_LEDGER, "forceLedgerRequest", v3.ForceLedgerRequest(ledgerId=lid),
                            _converter("forceLedgerResponse", pb.ForceLedgerResponse, (), ledgerId=lid),
                            f"force of ledger {ledger}")

    def bookie_info(self) -> pb.GetBookieInfoResponse:
        flags = v3.GetBookieInfoRequest.TOTAL_DISK_CAPACITY | v3.GetBookieInfoRequest.FREE_DISK_SPACE
        return self._result(v3.GET_BOOKIE_INFO, "getBookieInfoRequest", v3.GetBookieInfoRequest(requested=flags),
                            _converter("getBookieInfoResponse", pb.GetBookieInfoResponse,
                                       ("totalDiskCapacity", "freeDiskSpace")), "bookie info")

    def list_entries(self, ledger: LedgerId, timeout: float | None = None) -> pb.GetListOfEntriesOfLedgerResponse:
        """The ledger's list of entries; ``timeout``: seconds to wait for it (default the client's)."""
        lid = native_ledger_id(self.bookie_id, ledger)
        return self._result(v3.GET_LIST_OF_ENTRIES_OF_LEDGER, "getListOfEntriesOfLedgerRequest",
                            v3.GetListOfEntriesOfLedgerRequest(ledgerId=lid),
                            _converter("getListOfEntriesOfLedgerResponse", pb.GetListOfEntriesOfLedgerResponse,
                                       ("availabilityOfEntriesOfLedger",), ledgerId=lid),
                            f"list of entries of ledger {ledger}", timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = (self._connection, self._v2_connection)
            self._connection = self._v2_connection = None
            idle, self._idle_batch_channels = self._idle_batch_channels, []
        for connection in connections:
            if connection is not None:
                connection.close()
        for channel in idle:
            channel.close()
