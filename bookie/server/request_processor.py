"""The bookie's gRPC service: v3 request semantics over the storage engine (BookieRequestProcessor).

Runs on a ``grpc.aio`` event loop. Adds arrive as batches on a bidirectional stream; each batch is
handed to the engine at once and answered when its journal group is fsynced, so many batches of a
stream are in flight together. The batches one force write completes wake the loop once, and the
answers ready together leave in one AddResponses message. A stream's unacknowledged bytes are bounded
(MAX_STREAM_INFLIGHT): past that the bookie stops reading the stream and gRPC flow control holds the
client back. A full journal queue is answered ETOOMANYREQUESTS. An add stream whose reading fails
otherwise answers the adds it took, logs the error and fails with INTERNAL naming it: a clean end would
look to the client like its own close.

Reads run in a thread pool. A fencing read is answered once the fence is fsynced; a long poll
(``previousLAC``, ``timeOut``) watches the ledger's LAC and answers when it passes ``previousLAC`` (with
the next entry under ENTRY_PIGGYBACK) or at the timeout. ReadEntries streams ``maxBytesPerMessage`` at a
time, each message encoded by hand (bookie/proto/read_range.py), the next one read while one is sent.

Bad input is answered, never a traceback: bytes that do not parse as the method's message get
INVALID_ARGUMENT at the transport (one log line), and ids, ranges and integers out of range get
EBADREQ naming what was wrong and what is allowed.

A call whose metadata names another bookie id (``bk-bookie-id``: the client's expected bookie, from the
registration it followed) is refused with FAILED_PRECONDITION, this bookie's id in the trailing metadata
under the same key; the client turns it into BKWrongBookieException, a failure of the bookie it meant.

Metrics (RequestStats, bookie/server/request_stats.py, the engine's ``request_stats``): an AddRequest is one
ADD_ENTRY event of its entries; a unary call one event; a range read one READ_ENTRY event of its entries per
message. A stream waiting for room (MAX_STREAM_INFLIGHT) counts in ADD_ENTRY_BLOCKED while it waits.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import grpc
from google.protobuf.message import DecodeError

from bookie.exceptions import BadRequestException, BookieException, NoEntryException
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BOOKIE_ID_KEY
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_pb2_grpc as pb_grpc
from bookie.proto import availability
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.read_range import encode_read_range_response
from bookie.server.add_request import decode_add_request
from bookie.server.bookie import Bookie
from bookie.server import garbage_collection_request
from bookie.server import multi_range_read
from bookie.server.index import MAX_ENTRY_ID
from bookie.server.request_stats import OperationStats, RequestStats

log = logging.getLogger(__name__)

MAX_STREAM_INFLIGHT = 64 << 20
DEFAULT_RANGE_MESSAGE_BYTES = 4 << 20
DEFERRED_SYNC = 0x1
MAX_LONG_POLL_TIMEOUT_MS = 2 ** 31 - 1  # a Java int of milliseconds (~24.8 days)
_END = object()


def _ledger(request) -> LedgerId:
    ledger = LedgerId(request.ledgerScopeId, request.ledgerId)
    if ledger.scope_id < 0 or ledger.ledger_id < 0:
        raise BadRequestException(f"ledger id {ledger.scope_id}/{ledger.ledger_id} is negative")
    return ledger


def failure(exc: BaseException) -> tuple[int, str]:
    """(status, message) answering a request that raised ``exc``; shared by both transports."""
    if isinstance(exc, BookieException):
        return exc.status, str(exc)
    if isinstance(exc, (OverflowError, ValueError)):  # an integer of the request out of range: its sender's fault
        log.warning("bad request refused: %s: %s", type(exc).__name__, exc)
        return status.EBADREQ, f"bad request: {exc}"
    log.exception("request failed", exc_info=exc)
    return status.EIO, f"{type(exc).__name__}: {exc}"


async def run_in_executor(fn, *args):
    """Run blocking storage work (reads) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class ReadResult(NamedTuple):
    entry_id: int
    body: bytes | None  # None: a long poll that found no entry to piggyback, or none asked for
    max_lac: int
    lac_update_timestamp: int | None  # long polls only

    def fill(self, response) -> None:
        """Set a ReadResponse's fields (gRPC's or the native protocol's: the same names)."""
        response.entryId = self.entry_id
        if self.body is not None:
            response.body = self.body
        response.maxLAC = self.max_lac
        if self.lac_update_timestamp is not None:
            response.lacUpdateTimestamp = self.lac_update_timestamp


def read_stats(stats: RequestStats, fence: bool, long_poll: bool) -> OperationStats:
    """What a read records, by its kind (ReadEntryProcessorV3): fencing, long poll, or plain."""
    return stats.fence_read if fence else stats.long_poll_read if long_poll else stats.read


async def read_entry(bookie: Bookie, ledger: LedgerId, entry_id: int, fence_key: bytes | None,
                     previous_lac: int | None, timeout_ms: int, piggyback: bool) -> ReadResult:
    """A read as BookKeeper's ReadEntryProcessorV3 and LongPollReadEntryProcessorV3 serve it, for
    either transport: ``fence_key`` fences first (answered once the fence is fsynced in the journal),
    ``previous_lac`` makes it a long poll. Failures raise (see ``failure``)."""
    if fence_key is not None:
        if not fence_key:
            raise BadRequestException(f"fence of ledger {ledger} without a master key")
        await asyncio.wrap_future(bookie.fence_ledger(ledger, fence_key))
    if previous_lac is not None:
        return await _long_poll(bookie, ledger, entry_id, previous_lac, timeout_ms, piggyback)
    body = await run_in_executor(bookie.read_entry, ledger, entry_id)
    return ReadResult(entry_format.peek_ids(body, 0)[2], body, bookie.last_add_confirmed(ledger), None)


async def _long_poll(bookie: Bookie, ledger: LedgerId, entry_id: int, previous: int, timeout_ms: int,
                     piggyback: bool) -> ReadResult:
    """Answer once the ledger's LAC passes ``previous`` or ``timeout_ms`` have gone by."""
    if piggyback and entry_id != -1:
        raise BadRequestException("ENTRY_PIGGYBACK long poll needs entryId -1")
    if not entry_format.INVALID_ENTRY_ID <= previous <= MAX_ENTRY_ID:
        raise BadRequestException(f"long poll previousLAC {previous} refused (allowed: -1..{MAX_ENTRY_ID})")
    if not 0 <= timeout_ms <= MAX_LONG_POLL_TIMEOUT_MS:
        raise BadRequestException(f"long poll timeOut {timeout_ms} ms refused (allowed: 0.."
                                  f"{MAX_LONG_POLL_TIMEOUT_MS} ms)")
    if bookie.last_add_confirmed(ledger) <= previous:
        woke = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop = bookie.watch_lac(ledger, lambda lac: loop.call_soon_threadsafe(woke.set))
        try:
            if bookie.last_add_confirmed(ledger) <= previous:
                await asyncio.wait_for(woke.wait(), timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            pass
        finally:
            stop()
    lac = bookie.last_add_confirmed(ledger)
    body = None
    if piggyback and lac > previous:
        entry_id = previous + 1
        try:
            body = await run_in_executor(bookie.read_entry, ledger, entry_id)
        except NoEntryException:
            pass  # striped to other bookies: the LAC alone is the answer
    return ReadResult(entry_id, body, lac, int(time.time() * 1000))


async def read_lac(bookie: Bookie, ledger: LedgerId) -> tuple[bytes | None, bytes | None]:
    """(explicit LAC blob, last entry stored here) as ReadLacProcessorV3 answers; NoEntryException if neither."""
    found = []
    for read in (lambda: bookie.explicit_lac(ledger), lambda: bookie.read_entry(ledger, -1)):
        try:
            found.append(await run_in_executor(read))
        except NoEntryException:
            found.append(None)
    if found == [None, None]:
        raise NoEntryException(f"ledger {ledger} has neither an explicit LAC nor an entry on this bookie")
    return found[0], found[1]


class BookieServicer(pb_grpc.BookieServicer):
    def __init__(self, bookie: Bookie, max_range_message_bytes: int = DEFAULT_RANGE_MESSAGE_BYTES,
                 bookie_id: str | None = None):
        self.bookie = bookie
        self.max_range_message_bytes = max_range_message_bytes
        self.bookie_id = bookie_id  # None: calls naming a bookie id are not checked (a servicer without an id)
        self._add_stream_readers: set[asyncio.Future] = set()  # the request reader of each open add stream
        self.stats = bookie.request_stats
        self.in_progress = self.stats.in_progress()  # this service's share of the IN_PROGRESS and BLOCKED gauges

    async def refuse_if_meant_for_another(self, context) -> None:
        """Abort the call (FAILED_PRECONDITION) if its metadata names a bookie id that is not this one."""
        if self.bookie_id is None:
            return
        for key, value in context.invocation_metadata() or ():
            if key == BOOKIE_ID_KEY and value != self.bookie_id:
                log.warning("call from %s refused: it is meant for bookie %s; this is bookie %s (its registration "
                            "points here?)", context.peer(), value, self.bookie_id)
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                    f"this is bookie {self.bookie_id}, not bookie {value}",
                                    trailing_metadata=((BOOKIE_ID_KEY, self.bookie_id),))

    # -- adds --------------------------------------------------------------------------------------
    async def AddEntries(self, request_iterator, context):
        await self.refuse_if_meant_for_another(context)
        loop = asyncio.get_running_loop()
        responses: asyncio.Queue = asyncio.Queue()
        room = asyncio.Event()
        room.set()
        state = {"inflight": 0, "pending": 0, "done": False, "malformed": None, "broken": None, "woken": False}
        # Adds completed by the journal's force-write thread, answered on the loop: one wake-up of the
        # loop for all the adds a force write completes, not one per add (asyncio.wrap_future's).
        completed: deque = deque()

        def answer_completed() -> None:
            state["woken"] = False  # first: an add completed from here on wakes the loop again
            while completed:
                finished(*completed.popleft())

        stats, counts = self.stats, self.in_progress

        def on_fsynced(request, size: int, received: float, started: float, future: Future) -> None:
            completed.append((request, size, received, started, future))
            if not state["woken"] and not loop.is_closed():
                state["woken"] = True
                loop.call_soon_threadsafe(answer_completed)

        def finished(request, size: int, received: float, started: float, future: Future) -> None:
            state["inflight"] -= size
            state["pending"] -= 1
            counts.adds -= 1
            if state["inflight"] < MAX_STREAM_INFLIGHT:
                room.set()
            exc = future.exception()
            if exc is None:
                ids = future.result()
                stats.add_answered(received, started, status.EOK, len(ids))
                responses.put_nowait(pb.AddResponse(txnId=request.txnId, status=status.EOK, ledgerScopeId=request.ledgerScopeId,
                                                    ledgerId=request.ledgerId, firstEntryId=ids[0], lastEntryId=ids[-1],
                                                    entryCount=len(ids)))
            else:
                code, message = failure(exc)
                stats.add_answered(received, started, code, 1)
                responses.put_nowait(self._add_error(request, code, message))
            if state["done"] and state["pending"] == 0:
                responses.put_nowait(_END)

        async def wait_for_room(since: float) -> None:
            """Back-pressure: the stream is not read until its adds in flight drain (ADD_ENTRY_BLOCKED)."""
            counts.adds_blocked += 1
            try:
                await room.wait()
            finally:
                counts.adds_blocked -= 1
            stats.add_blocked_wait.register_successful_event(time.monotonic() - since)

        async def read_requests() -> None:
            try:
                async for request in request_iterator:
                    received = time.monotonic()
                    if type(request) is MalformedRequest:  # the adds before it are still answered
                        state["malformed"] = request.refused()
                        break
                    if not room.is_set():
                        await wait_for_room(received)
                    data = request.entries  # a view into the received bytes (add_request.py): no copy
                    started = time.monotonic()
                    try:
                        if request.writeFlags & DEFERRED_SYNC:
                            raise BadRequestException("DEFERRED_SYNC writes are not supported by this bookie")
                        future = self.bookie.add_entries(_ledger(request), request.masterKey, data,
                                                         recovery=request.flag == pb.AddRequest.RECOVERY_ADD)
                    except Exception as exc:
                        code, message = failure(exc)
                        stats.add_answered(received, started, code, 1)
                        responses.put_nowait(self._add_error(request, code, message))
                        continue
                    size = len(data)
                    state["inflight"] += size
                    state["pending"] += 1
                    counts.adds += 1
                    if state["inflight"] >= MAX_STREAM_INFLIGHT:
                        room.clear()
                    future.add_done_callback(
                        lambda f, r=request, n=size, t0=received, t1=started: on_fsynced(r, n, t0, t1, f))
            except Exception as exc:  # the adds taken are still answered; then the stream fails, not ends
                log.exception("add stream from %s: reading its requests failed", context.peer())
                state["broken"] = f"the bookie stopped reading this add stream: {type(exc).__name__}: {exc}"
            finally:
                state["done"] = True
                if state["pending"] == 0:
                    responses.put_nowait(_END)

        reader = asyncio.ensure_future(read_requests())
        self._add_stream_readers.add(reader)
        try:
            ended = False
            while not ended:
                batch = [await responses.get()]
                while not responses.empty():  # acks that are ready together share one message
                    batch.append(responses.get_nowait())
                if batch[-1] is _END:
                    ended = True
                    batch.pop()
                if batch:
                    yield pb.AddResponses(responses=batch)
            if state["malformed"]:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, state["malformed"])
            if state["broken"]:  # a client seeing a clean end would not know why its later adds went unanswered
                await context.abort(grpc.StatusCode.INTERNAL, state["broken"])
        finally:
            reader.cancel()
            self._add_stream_readers.discard(reader)

    def end_add_streams(self) -> None:
        """Stop taking adds (at shutdown): each add stream answers what it took, then ends cleanly,
        instead of being cancelled by the server's grace period."""
        for reader in list(self._add_stream_readers):
            reader.cancel()  # its ``finally`` ends the stream once the adds in flight are answered

    @staticmethod
    def _add_error(request: pb.AddRequest, code: int, message: str) -> pb.AddResponse:
        return pb.AddResponse(txnId=request.txnId, status=code, ledgerScopeId=request.ledgerScopeId,
                              ledgerId=request.ledgerId, message=message)

    # -- reads -------------------------------------------------------------------------------------
    async def ReadEntry(self, request: pb.ReadRequest, context) -> pb.ReadResponse:
        response = pb.ReadResponse(ledgerScopeId=request.ledgerScopeId, ledgerId=request.ledgerId,
                                   entryId=request.entryId)
        fence, long_poll = request.flag == pb.ReadRequest.FENCE_LEDGER, request.HasField("previousLAC")
        started = time.monotonic()
        self.in_progress.reads += 1
        try:
            result = await read_entry(self.bookie, _ledger(request), request.entryId,
                                      request.masterKey if fence else None,
                                      request.previousLAC if long_poll else None,
                                      request.timeOut, request.flag == pb.ReadRequest.ENTRY_PIGGYBACK)
            result.fill(response)
            response.status = status.EOK
        except Exception as exc:
            response.status, response.message = failure(exc)
        finally:
            self.in_progress.reads -= 1
        _answered(read_stats(self.stats, fence, long_poll), started, response.status)
        return response

    async def ReadEntries(self, request: pb.ReadRangeRequest, context):
        first, last = request.firstEntryId, request.lastEntryId
        budget = request.maxBytesPerMessage or self.max_range_message_bytes
        started = time.monotonic()  # of the message being read
        try:
            ledger = multi_range_read.checked_range(request)
            multi_range_read.check_message_bytes(request.maxBytesPerMessage)

            def read(start: int) -> asyncio.Future:
                return asyncio.ensure_future(run_in_executor(self._range_message, ledger, start, last, budget,
                                                       request.stride, request.offset))

            pending = read(first)
            self.in_progress.reads += 1
            try:
                while True:
                    message, covered, count = await pending
                    self.stats.read.answered(started, started, max(count, 1))  # a message: its entries
                    more = first <= covered < last
                    if more:  # read the next message while this one is sent
                        started = time.monotonic()
                        pending = read(covered + 1)
                    yield message
                    if not more:
                        return
                    first = covered + 1
            finally:  # the client may have gone away: nobody waits for a read still running
                self.in_progress.reads -= 1
                pending.cancel()
                pending.add_done_callback(lambda f: f.cancelled() or f.exception())  # nor for its error
        except Exception as exc:
            code, message = failure(exc)
            self.stats.read.answered(started, started, 0, 1)
            # nothing covered: the id before the range, or -1 for a range that starts below 0
            yield pb.ReadRangeResponse(status=code, message=message,
                                       lastEntryIdCovered=max(first - 1, -1)).SerializeToString()

    async def ReadEntriesOfLedgers(self, request: pb.ReadRangesRequest, context):
        try:
            ranges = multi_range_read.checked_ranges(request)
        except BadRequestException as exc:
            yield pb.ReadRangesResponse(status=status.EBADREQ, message=str(exc)).SerializeToString()
            return
        budget, cursor = request.maxBytesPerMessage or self.max_range_message_bytes, multi_range_read.Cursor()
        started = time.monotonic()
        self.in_progress.reads += 1
        try:
            while cursor.index < len(ranges):
                yield await run_in_executor(multi_range_read.next_message, self.bookie, ranges, cursor, budget)
        finally:
            self.in_progress.reads -= 1
        self.stats.read.answered(started, started, 1)  # one request (its entries: bookie_BOOKIE_READ_ENTRY)
        if not ranges:
            yield pb.ReadRangesResponse(status=status.EOK).SerializeToString()

    def _range_message(self, ledger: LedgerId, first: int, last: int, budget: int, stride: int,
                       offset: int) -> tuple[bytes, int, int]:
        """(one serialized ReadRangeResponse from ``first`` on, the last entry id it covers, its entries)."""
        parts, count, covered = self.bookie.read_entries_parts(ledger, first, last, budget, stride, offset)
        return (encode_read_range_response(parts, count, covered, self.bookie.last_add_confirmed(ledger)), covered,
                count)

    # -- LAC, force, info --------------------------------------------------------------------------
    async def WriteLac(self, request: pb.WriteLacRequest, context) -> pb.WriteLacResponse:
        response = pb.WriteLacResponse(ledgerScopeId=request.ledgerScopeId, ledgerId=request.ledgerId)
        started = time.monotonic()
        try:
            await asyncio.wrap_future(self.bookie.set_explicit_lac(_ledger(request), request.masterKey, request.body,
                                                                     request.lac))
            response.status = status.EOK
        except Exception as exc:
            response.status, response.message = failure(exc)
        _answered(self.stats.write_lac, started, response.status)
        return response

    async def ReadLac(self, request: pb.ReadLacRequest, context) -> pb.ReadLacResponse:
        response = pb.ReadLacResponse(ledgerScopeId=request.ledgerScopeId, ledgerId=request.ledgerId)
        started = time.monotonic()
        try:
            lac_body, last_entry = await read_lac(self.bookie, _ledger(request))
            if lac_body is not None:
                response.lacBody = lac_body
            if last_entry is not None:
                response.lastEntryBody = last_entry
            response.status = status.EOK
        except Exception as exc:
            response.status, response.message = failure(exc)
        _answered(self.stats.read_lac, started, response.status)
        return response

    async def ForceLedger(self, request: pb.ForceLedgerRequest, context) -> pb.ForceLedgerResponse:
        response = pb.ForceLedgerResponse(ledgerScopeId=request.ledgerScopeId, ledgerId=request.ledgerId)
        started = time.monotonic()
        try:
            await asyncio.wrap_future(self.bookie.force_ledger(_ledger(request)))
            response.status = status.EOK
        except Exception as exc:
            response.status, response.message = failure(exc)
        _answered(self.stats.force_ledger, started, response.status)
        return response

    async def GetBookieInfo(self, request: pb.GetBookieInfoRequest, context) -> pb.GetBookieInfoResponse:
        started = time.monotonic()
        total, free = self.bookie.disk_info()
        response = pb.GetBookieInfoResponse(status=status.EOK, readOnly=self.bookie.read_only)
        if request.requested & pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY:
            response.totalDiskCapacity = total
        if request.requested & pb.GetBookieInfoRequest.FREE_DISK_SPACE:
            response.freeDiskSpace = free
        _answered(self.stats.bookie_info, started, status.EOK)
        return response

    async def GetListOfEntriesOfLedger(self, request, context) -> pb.GetListOfEntriesOfLedgerResponse:
        started = time.monotonic()
        response = await run_in_executor(self._list_of_entries, request)
        _answered(self.stats.list_of_entries, started, response.status)
        return response

    async def GetListOfEntriesOfLedgers(self, request, context) -> pb.GetListOfEntriesOfLedgersResponse:
        if len(request.ledgers) > availability.MAX_LEDGERS_PER_LIST_REQUEST:
            return pb.GetListOfEntriesOfLedgersResponse(status=status.EBADREQ, message=(
                f"{len(request.ledgers)} ledgers in one request; at most {availability.MAX_LEDGERS_PER_LIST_REQUEST}"))
        started = time.monotonic()
        answers = await run_in_executor(lambda: [self._list_of_entries(ledger) for ledger in request.ledgers])
        failed = sum(answer.status != status.EOK for answer in answers)
        self.stats.list_of_entries.answered(started, started, len(answers) - failed, failed)
        return pb.GetListOfEntriesOfLedgersResponse(status=status.EOK, ledgers=answers)

    def _list_of_entries(self, request: pb.GetListOfEntriesOfLedgerRequest) -> pb.GetListOfEntriesOfLedgerResponse:
        response = pb.GetListOfEntriesOfLedgerResponse(ledgerScopeId=request.ledgerScopeId, ledgerId=request.ledgerId)
        try:
            response.availabilityOfEntriesOfLedger = availability.encode(self.bookie.stored_entry_ids(_ledger(request)))
            response.status = status.EOK
        except Exception as exc:
            response.status, response.message = failure(exc)
        return response

    async def GarbageCollection(self, request: pb.GarbageCollectionRequest, context) -> pb.GarbageCollectionResponse:
        return garbage_collection_request.handle(self.bookie, request)


def _answered(stats: OperationStats, started: float, code: int) -> None:
    """One unary call answered ``code``: a gRPC request arrives whole, so its work starts as it arrives."""
    ok = int(code == status.EOK)
    stats.answered(started, started, ok, 1 - ok)


# Methods whose handler yields serialized responses itself (see bookie/proto/read_range.py).
PRE_SERIALIZED = {"ReadEntries", "ReadEntriesOfLedgers"}


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """What the deserializer hands over for bytes that are not the method's message (no exception, so
    gRPC logs no traceback); the handler refuses it with INVALID_ARGUMENT."""

    method: str
    size: int
    error: str

    def refused(self) -> str:
        """Log the refusal (one line) and return the message for the client."""
        log.warning("malformed %s request of %d bytes refused: %s", self.method, self.size, self.error)
        return f"malformed {self.method} request ({self.size} bytes): {self.error}"


def _deserializer(method: str, request_class):
    # Adds are decoded by hand: their entries stay in the received bytes (bookie/server/add_request.py).
    parse = decode_add_request if request_class is pb.AddRequest else request_class.FromString

    def deserialize(data: bytes):
        try:
            return parse(data)
        except DecodeError as exc:
            return MalformedRequest(method, len(data), str(exc))
    return deserialize


def _guarded(servicer: BookieServicer, handler, server_streaming: bool):
    """``handler`` for a single request, refusing a call meant for another bookie and a MalformedRequest first."""
    if server_streaming:
        async def streaming(request, context):
            await servicer.refuse_if_meant_for_another(context)
            if type(request) is MalformedRequest:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.refused())
            async for response in handler(request, context):
                yield response
        return streaming

    async def unary(request, context):
        await servicer.refuse_if_meant_for_another(context)
        if type(request) is MalformedRequest:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.refused())
        return await handler(request, context)
    return unary


def add_to_server(servicer: BookieServicer, server) -> None:
    """Register ``servicer`` like the generated ``add_BookieServicer_to_server``, except that the
    methods in PRE_SERIALIZED have no response serializer (their bytes go out as they are) and bytes
    that do not parse are refused with INVALID_ARGUMENT (MalformedRequest) instead of a traceback, and
    calls meant for another bookie with FAILED_PRECONDITION."""
    service = pb.DESCRIPTOR.services_by_name["Bookie"]
    handlers = {}
    for method in service.methods:
        make = getattr(grpc, f"{'stream' if method.client_streaming else 'unary'}_"
                             f"{'stream' if method.server_streaming else 'unary'}_rpc_method_handler")
        request_class = getattr(pb, method.input_type.name)
        response_class = getattr(pb, method.output_type.name)
        handler = getattr(servicer, method.name)
        if not method.client_streaming:  # a client stream's messages (and its bookie id) are checked by its handler
            handler = _guarded(servicer, handler, method.server_streaming)
        handlers[method.name] = make(
            handler, request_deserializer=_deserializer(method.name, request_class),
            response_serializer=None if method.name in PRE_SERIALIZED else response_class.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
