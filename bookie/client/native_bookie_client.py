"""One TCP connection to one bookie speaking BookKeeper's native protocol, v3 (BookKeeper's
PerChannelBookieClient). Thread-safe; the same interface and answers as ``BookieClient`` (gRPC), so
the writer and the readers do not know which transport a bookie has.

Each request is a v3 ``Request`` in a length-prefixed frame; responses come back matched by txnId.
Many requests are in flight at once: a request is queued, and whoever finds no flush under way
writes everything queued by then with one ``sendall`` (what queues meanwhile goes in the next one),
as Netty's channel coalesces writes. One reader thread per connection completes futures.

The native protocol has no batched add and no range read, so ``add`` of a framed batch sends one
AddRequest per entry (one Request message reused for all of them, consecutive txnIds, written
together; the entries share one in-flight record, no Future each) and answers the batch as the gRPC bookie would (one
AddResponse: first/last entry id, count, the first failing status); ``read_entries`` pipelines
single-entry reads and yields ``ReadRangeResponse``s shaped like the gRPC bookie's stream.

Transport failures are BKBookieHandleNotAvailableException (connection refused or lost: every
request in flight fails, the next request reconnects) or BKTimeoutException (one request's
readTimeout passed; the connection stays). Bookie answers are returned with their status. Ledgers of
a non-zero scope (128-bit ids) cannot be named in this protocol and are refused.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import select
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Callable, Iterator

from google.protobuf.message import DecodeError

from bookie.exceptions import (BKBookieHandleNotAvailableException, BKClientClosedException,
                               BKIncorrectParameterException, BKTimeoutException)
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import entry_format, status
from bookie.proto.native_frames import DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER, FrameDecoder, FrameTooLargeException

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0  # seconds; as BookieClient: a writer should move on to another bookie soon
DEFAULT_HIGH_PRIORITY_VALUE = 100  # PerChannelBookieClient: recovery adds and fencing reads
READ_WINDOW = 512  # single-entry reads a range read keeps in flight
DEFAULT_RANGE_BYTES = 4 << 20  # bytes of entries per ReadRangeResponse when the caller names none
RECEIVE_SIZE = 1 << 20
TIMEOUT_CHECK = 0.2  # seconds: how often the reader thread looks for requests past their deadline


def native_ledger_id(bookie_id: str, ledger: LedgerId) -> int:
    if ledger.scope_id != 0:
        raise BKIncorrectParameterException(
            f"ledger {ledger} has scope {ledger.scope_id}: ledgers of a non-zero scope (128-bit ids) exist only on "
            f"the gRPC path, and bookie {bookie_id} speaks only BookKeeper's native protocol (64-bit ledger ids)")
    return ledger.ledger_id


class _Call:
    """A request answered by a Future: its conversion to the gRPC shape, its deadline."""
    __slots__ = ("future", "convert", "deadline", "what")

    def __init__(self, convert: Callable[[v3.Response], object], deadline: float | None, what: str):
        self.future: Future = Future()
        self.convert, self.deadline, self.what = convert, deadline, what

    def answer(self, txn: int, response: v3.Response, bookie_id: str) -> None:
        # Only the thread that took the request out of the in-flight map completes it; the caller may
        # have cancelled it (an abandoned range read) and then nobody waits.
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.convert(response)
        except Exception as exc:  # a response that does not fit its request: this request fails, not the connection
            self.future.set_exception(BKBookieHandleNotAvailableException(
                f"{self.what} on bookie {bookie_id}: unexpected response ({exc})"))
        else:
            self.future.set_result(result)

    def fail(self, error: Exception) -> None:
        if self.future.set_running_or_notify_cancel():
            self.future.set_exception(error)


class _Connection:
    """One socket: the write queue, the in-flight requests by txnId, the reader thread."""

    def __init__(self, client: "NativeBookieClient", sock: socket.socket):
        self.client = client
        self.sock = sock
        self.lock = threading.Lock()
        self.pending: dict[int, _Call | _AddBatch] = {}
        self.deadlines: dict[int, float] = {}  # txn -> deadline, of the requests that have one (not adds)
        self.queued: list[bytes] = []  # frame headers and payloads, joined by the flush
        self.flushing = False
        self.broken: Exception | None = None
        self.thread = threading.Thread(target=self._receive, name=f"bookie-rpc-{client.bookie_id}", daemon=True)
        self.thread.start()

    def send(self, requests: list[tuple[int, bytes, _Call | _AddBatch]]) -> None:
        """Register and queue serialized requests; flush unless another thread is flushing."""
        with self.lock:
            if self.broken is not None:
                raise self.broken
            queued, pending, deadlines = self.queued, self.pending, self.deadlines
            for txn, payload, handler in requests:
                pending[txn] = handler
                if handler.deadline is not None:
                    deadlines[txn] = handler.deadline
                queued.append(FRAME_HEADER.pack(len(payload)))
                queued.append(payload)
            if self.flushing:
                return
            self.flushing = True
        while True:
            with self.lock:
                batch, self.queued = self.queued, []
                if not batch or self.broken is not None:
                    self.flushing = False
                    return
            try:
                self.sock.sendall(b"".join(batch))
            except OSError as exc:
                with self.lock:
                    self.flushing = False
                self.fail(BKBookieHandleNotAvailableException(f"write to bookie {self.client.bookie_id} failed: {exc}"))
                return

    def _receive(self) -> None:
        decoder = FrameDecoder(self.client.max_frame_size)
        next_check = time.monotonic() + TIMEOUT_CHECK
        try:
            while self.broken is None:
                # The socket stays blocking (sendall must not time out); select wakes the thread to expire requests.
                readable, _, _ = select.select([self.sock], [], [], TIMEOUT_CHECK)
                if readable:
                    data = self.sock.recv(RECEIVE_SIZE)
                    if not data:
                        raise ConnectionError("the bookie closed the connection")
                    self._complete(decoder.feed(data))
                if self.deadlines and time.monotonic() >= next_check:
                    self._expire()
                    next_check = time.monotonic() + TIMEOUT_CHECK
        except (OSError, FrameTooLargeException, DecodeError) as exc:
            self.fail(BKBookieHandleNotAvailableException(f"connection to bookie {self.client.bookie_id} lost: {exc}"))

    def _complete(self, frames: list[bytes]) -> None:
        """Answer the requests of what one read brought (the map is locked once for all of them); a frame
        that does not parse ends the connection after the answers before it."""
        responses = []
        try:
            for frame in frames:
                response = v3.Response()
                response.ParseFromString(frame)
                responses.append(response)
        finally:
            self._answer(responses)

    def _answer(self, responses: list[v3.Response]) -> None:
        with self.lock:
            pending, deadlines = self.pending, self.deadlines
            answered = []
            for response in responses:
                txn = response.header.txnId
                handler = pending.pop(txn, None)
                if handler is not None:  # None: timed out earlier
                    if deadlines:
                        deadlines.pop(txn, None)
                    answered.append((txn, response, handler))
        bookie_id = self.client.bookie_id
        for txn, response, handler in answered:
            handler.answer(txn, response, bookie_id)

    def _expire(self) -> None:
        now = time.monotonic()
        with self.lock:
            late = [t for t, deadline in self.deadlines.items() if deadline <= now]
            expired = []
            for t in late:
                del self.deadlines[t]
                handler = self.pending.pop(t, None)
                if handler is not None:
                    expired.append(handler)
        for handler in expired:
            handler.fail(BKTimeoutException(f"{handler.what} on bookie {self.client.bookie_id} timed out"))

    def fail(self, error: Exception) -> None:
        """The connection is unusable: every request in flight fails with ``error``."""
        with self.lock:
            if self.broken is None:
                self.broken = error
            pending, self.pending = self.pending, {}
            self.deadlines = {}
            self.queued = []
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for handler in {id(h): h for h in pending.values()}.values():  # a batch's entries share one handler
            handler.fail(error)

    def close(self) -> None:
        self.fail(BKClientClosedException(f"client of bookie {self.client.bookie_id} is closed"))
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        self.sock.close()


class _AddBatch:
    """The entries of one framed batch, sent as AddRequests with consecutive txnIds from ``first_txn``,
    answered as one AddResponse when every entry is answered (or failed as a whole by the transport)."""
    deadline = None  # no deadline of its own: the writer's addEntryTimeout fails it, as on the gRPC add stream

    def __init__(self, ledger: LedgerId, entry_ids: list[int], first_txn: int = 0):
        self.future: Future = Future()
        self.entry_ids = entry_ids
        self.first_txn = first_txn
        first, last = (entry_ids[0], entry_ids[-1]) if entry_ids else (-1, -1)
        self.response = pb.AddResponse(status=status.EOK, ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id,
                                       firstEntryId=first, lastEntryId=last, entryCount=len(entry_ids))
        self.remaining = len(entry_ids)
        self.settled = False
        self.lock = threading.Lock()

    def answer(self, txn: int, response: v3.Response, bookie_id: str = "") -> None:
        """Entry ``txn - first_txn``'s answer: the add's status, else the header's (as BookKeeper's bookie
        answers a request it cannot parse)."""
        add = response.addResponse if response.HasField("addResponse") else None
        code = add.status if add is not None and add.HasField("status") else response.status
        with self.lock:
            self.remaining -= 1
            if code != status.EOK and self.response.status == status.EOK:
                self.response.status = code
                self.response.message = f"entry {self.entry_ids[txn - self.first_txn]}: {status.name_of(code)}"
            finished = self.remaining == 0
        if finished:
            self._settle(None)

    def fail(self, error: Exception) -> None:
        self._settle(error)

    def _settle(self, error: Exception | None) -> None:
        with self.lock:
            settled, self.settled = self.settled, True
        if settled:
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(self.response)


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
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.bookie_id = bookie_id
        self.address = address or bookie_id
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self._next_txn = 1
        self._txn_lock = threading.Lock()
        self._deferred = threading.local()  # requests held back by _written_together on this thread
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
        self._closed = False

    # -- connection ----------------------------------------------------------------------------------
    def _connect(self) -> _Connection:
        with self._lock:
            if self._closed:
                raise BKClientClosedException(f"client of bookie {self.bookie_id} is closed")
            if self._connection is not None and self._connection.broken is None:
                return self._connection
            host, _, port = self.address.rpartition(":")
            wait = min(self.timeout, CONNECT_TIMEOUT)
            try:
                sock = socket.create_connection((host, int(port)), timeout=wait)
            except (OSError, ValueError) as exc:
                raise BKBookieHandleNotAvailableException(
                    f"bookie {self.bookie_id} is not reachable at {self.address} ({exc})") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(None)
            self._connection = _Connection(self, sock)
            return self._connection

    def _txns(self, count: int) -> int:
        """The first of ``count`` consecutive txnIds (a batch's entries are told apart by their offset)."""
        with self._txn_lock:
            first = self._next_txn
            self._next_txn += count
        return first

    def _new_request(self, operation: int, priority: int = 0) -> tuple[int, v3.Request]:
        """A Request with its header filled in; the caller fills in the operation's part."""
        txn = self._txns(1)
        request = v3.Request()
        header = request.header
        header.version = v3.VERSION_THREE
        header.operation = operation
        header.txnId = txn
        if priority:
            header.priority = priority
        return txn, request

    def _submit(self, requests: list[tuple[int, bytes, _Call | _AddBatch]]) -> None:
        """Send on the connection, reconnecting once if it broke since it was last used."""
        held = getattr(self._deferred, "requests", None)
        if held is not None:
            held.extend(requests)
            return
        for attempt in (1, 2):
            connection = self._connect()
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
        call = _Call(convert, time.monotonic() + timeout, what)
        try:
            self._submit([(txn, request.SerializeToString(), call)])
        except BKBookieHandleNotAvailableException as exc:
            # An unreachable bookie fails the call's future, as gRPC's unary calls do: a reader asking
            # a whole ensemble (fence, LAC) counts it as one bookie that did not answer.
            call.future.set_exception(exc)
        return call.future

    def _call_async(self, operation: int, field: str, body, convert, what: str) -> Future:
        txn, request = self._new_request(operation)
        getattr(request, field).CopyFrom(body)
        return self._send_call(txn, request, convert, what, self.timeout)

    # -- adds ----------------------------------------------------------------------------------------
    def add(self, ledger: LedgerId, master_key: bytes, entries: bytes, recovery: bool = False) -> Future:
        """Send a framed batch of ``ledger``'s entries, one AddRequest each; the future gets one AddResponse."""
        lid = native_ledger_id(self.bookie_id, ledger)
        bodies = list(entry_format.iter_frames(entries))
        ids = [entry_format.peek_ids(body, 0)[2] for body in bodies]
        first_txn = self._txns(len(ids))
        batch = _AddBatch(ledger, ids, first_txn)
        if not bodies:
            batch.future.set_result(batch.response)
            return batch.future
        # One Request for all the entries: only the txnId, the entry id and the body change.
        request = v3.Request()
        header, add = request.header, request.addRequest
        header.version = v3.VERSION_THREE
        header.operation = v3.ADD_ENTRY
        if recovery:
            header.priority = DEFAULT_HIGH_PRIORITY_VALUE
            add.flag = v3.AddRequest.RECOVERY_ADD
        add.ledgerId = lid
        add.masterKey = master_key
        requests = []
        for txn, entry_id, body in zip(itertools.count(first_txn), ids, bodies):
            header.txnId = txn
            add.entryId = entry_id
            add.body = bytes(body)
            requests.append((txn, request.SerializeToString(), batch))
        self._submit(requests)
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
        ids = range(first + (offset - first) % stride, last + 1, stride) if stride > 1 else range(first, last + 1)
        limit = max_bytes or DEFAULT_RANGE_BYTES
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
    def _result(self, operation: int, field: str, body, convert, what: str):
        return self._call_async(operation, field, body, convert, what).result()

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

    def list_entries(self, ledger: LedgerId) -> pb.GetListOfEntriesOfLedgerResponse:
        lid = native_ledger_id(self.bookie_id, ledger)
        return self._result(v3.GET_LIST_OF_ENTRIES_OF_LEDGER, "getListOfEntriesOfLedgerRequest",
                            v3.GetListOfEntriesOfLedgerRequest(ledgerId=lid),
                            _converter("getListOfEntriesOfLedgerResponse", pb.GetListOfEntriesOfLedgerResponse,
                                       ("availabilityOfEntriesOfLedger",), ledgerId=lid),
                            f"list of entries of ledger {ledger}")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
