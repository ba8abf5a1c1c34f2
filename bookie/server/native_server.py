"""BookKeeper's native protocol over TCP, served from the storage engine (BookieNettyServer,
BookieRequestHandler, BookieRequestProcessor).

Each connection is cut into frames (bookie/proto/native_frames.py, at most nettyMaxFrameSizeBytes).
A frame is decoded as a v3 Request first; a frame that is not one switches the connection to v2 for
good (BookieProtoEncoding.RequestDecoder), so Pulsar-style v2 clients and v3 clients are both served.
Requests are not answered in order: many are in flight per connection, each answered when it
completes, and the answers that are ready together leave in one write. What one read from the socket
brings (up to ``byteBufAllocatorSizeMax``, 1 MiB, as Netty's allocator) is handled as a batch
(BookKeeper's Java client keeps ~1,000 single-entry adds in flight): its adds of one ledger (same master
key and flag) go to the Bookie as one framed batch, one journal record answered per entry once that
record is fsynced (group commit: no add is answered before its fsync);
its plain reads (no fence, no long poll) are read by one executor job. Any other request first
submits the adds and reads before it, so requests still reach the Bookie in the order they came. A connection holding
MAX_CONNECTION_INFLIGHT bytes of unanswered adds, or MAX_CONNECTION_REQUESTS unanswered requests, or
whose client does not read its answers, is not read until that drains: TCP holds the client back.

The semantics are the gRPC service's (bookie/server/request_processor.py, whose transport-free read
path both use): BookKeeper's status codes, fencing answered after its fsync, long polls with the entry
piggybacked. Native ledgers are 63-bit (scope 0); an add's ledger is the one named by the first 8
bytes of its body (WriteEntryProcessorV3). Bad input gets an answer where the request can be
answered (EBADREQ), and otherwise the connection is closed: an oversized frame, a frame that is
neither v3 nor v2, an unknown v2 op. One log line each, the bookie and its other connections unaffected.

A v3 request whose ``requestContext`` (BookKeeper's field 200, MDC pairs a Java bookie only logs) names
another bookie id under ``bk-bookie-id`` is answered EBADREQ: this project's client names the bookie it
expects when it connects (NativeBookieClient), so a registration pointing at another bookie's endpoint
fails that bookie instead of writing its replicas here.

Metrics (RequestStats, bookie/server/request_stats.py, the engine's ``request_stats``): per batch of adds and
per executor job of reads, one event of ``count`` requests; requests in flight and paused connections are kept
per server, on its event loop, and read by the gauges at scrape time.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Awaitable, Callable

from bookie.exceptions import BadRequestException, UnauthorizedAccessException
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BOOKIE_ID_KEY
from bookie.proto import availability
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto import v3_hand_encoding as v3
from bookie.proto import v2_add_columns, v3_add_columns, v3_read_columns
from bookie.proto.v2_add_columns import V2AddRun
from bookie.proto.v3_add_columns import V3AddRun
from bookie.proto.v3_read_columns import V3ReadRun
from bookie.proto.native_frames import (DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER, FrameDecoder, FrameRun,
                                        FrameTooLargeException)
from bookie.server import batched_read_entry_processor
from bookie.server.bookie import Bookie
from bookie.server.request_processor import (DEFERRED_SYNC, MAX_STREAM_INFLIGHT, failure, read_entry, read_lac,
                                             read_stats, run_in_executor)
from bookie.server.request_stats import OperationStats

log = logging.getLogger(__name__)

MAX_CONNECTION_INFLIGHT = MAX_STREAM_INFLIGHT  # unanswered add bytes per connection before reading stops
MAX_CONNECTION_REQUESTS = 10000  # unanswered requests per connection (maxPendingAddRequestsPerThread's default)
DEFAULT_MAX_BATCH_READ_SIZE = 5 * 1024 * 1024  # maxBatchReadSize
DEFAULT_READ_SIZE = 1024 * 1024  # byteBufAllocatorSizeMax
_ENTRY_IDS = 16  # a body's ledger id and entry id
MAX_ADD_BATCH = 1024  # entries of one ledger handed to the Bookie as one framed batch (one journal record)
MAX_ADD_BATCH_BYTES = 1 << 20
MIN_RANGE_READ = 4  # plain reads of one ledger, evenly stepped ids, read as one range
MIN_ADD_RUN = 8  # same-size frames taken as one run (v2_add_columns, v3_add_columns) from this many on
OTHER, ADDS, READS = 0, 1, 2  # what requests in flight are, for ADD_ENTRY_IN_PROGRESS / READ_ENTRY_IN_PROGRESS

# The v3 operations answered here: the request field each carries, and its response field.
_V3_FIELDS = {
    pb.READ_ENTRY: ("readRequest", "readResponse"),
    pb.ADD_ENTRY: ("addRequest", "addResponse"),
    pb.WRITE_LAC: ("writeLacRequest", "writeLacResponse"),
    pb.READ_LAC: ("readLacRequest", "readLacResponse"),
    pb.GET_BOOKIE_INFO: ("getBookieInfoRequest", "getBookieInfoResponse"),
    pb.FORCE_LEDGER: ("forceLedgerRequest", "forceLedgerResponse"),
    pb.GET_LIST_OF_ENTRIES_OF_LEDGER: ("getListOfEntriesOfLedgerRequest", "getListOfEntriesOfLedgerResponse"),
    pb.AUTH: ("authRequest", "authResponse"),
}


def _ledger(ledger_id: int) -> LedgerId:
    if ledger_id < 0:
        raise BadRequestException(f"ledger id {ledger_id} is negative")
    return LedgerId(0, ledger_id)


class BookieRequestHandler(asyncio.Protocol):
    """One client connection: frames in, requests dispatched, answers batched out."""

    def __init__(self, server: "BookieNettyServer"):
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_size)
        self.using_v3 = True
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.tasks: set[asyncio.Task] = set()
        # Of the data being handled: adds by (ledger id, master key, recovery), and plain reads.
        self.adds: dict[tuple[int, bytes, bool], list[tuple[bytes, Callable[[int], bytes], int]]] = {}
        self.reads: list[tuple[LedgerId, int, Callable, int]] = []
        self._outbox: list[bytes] = []
        self._inflight_bytes = 0
        self._inflight_requests = 0
        self._inflight_adds = 0
        self._write_paused = False
        self._read_paused = False
        self._blocked: int = OTHER  # while reading is paused: ADDS or READS, the requests it holds back
        self._blocked_since = 0.0
        self.received = 0.0  # when the data being handled arrived (time.monotonic): the requests' start

    # -- transport events ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        if hasattr(transport, "max_size"):  # asyncio's socket transport: what one recv may bring (256 KiB)
            transport.max_size = self.server.read_size
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.peer = "%s:%s" % (transport.get_extra_info("peername") or ("?", "?"))[:2]
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.received = time.monotonic()
        try:  # same-size frames come as runs: adds of one ledger are taken as columns
            frames = self.decoder.feed_runs(data, MIN_ADD_RUN)
        except FrameTooLargeException as exc:
            self.refuse(str(exc))
            return
        processor = self.server.processor
        try:
            for payload in frames:
                if self.closed:
                    return
                if type(payload) is FrameRun:
                    processor.process_run(self, payload)
                else:
                    self._dispatch(payload)
        finally:
            processor.submit_batched(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        if self._read_paused:  # no longer held back: out of the BLOCKED gauges
            self._read_paused = False
            self._unblocked()
        for task in list(self.tasks):  # long polls and reads nobody will receive
            task.cancel()

    def pause_writing(self) -> None:  # the client does not read its answers: stop reading its requests
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # -- requests in, answers out -------------------------------------------------------------------
    def _dispatch(self, payload: bytes) -> None:
        processor = self.server.processor
        request = v2.parse_v3_request(payload) if self.using_v3 else None
        if request is not None:
            processor.process_v3(self, request, len(payload))
            return
        try:
            v2_request = v2.decode_request(payload)
        except BadRequestException as exc:
            self.refuse(f"{'neither a v3 nor ' if self.using_v3 else 'not '}a v2 request: {exc}")
            return
        if self.using_v3:
            self.using_v3 = False  # for good, as BookKeeper's RequestDecoder
            log.debug("connection from %s speaks v2", self.peer)
        processor.process_v2(self, v2_request, len(payload))

    def refuse(self, why: str) -> None:
        """Close the connection over input that cannot be answered."""
        if not self.closed:
            log.warning("native connection from %s closed: %s", self.peer, why)
            self.close()

    def close(self) -> None:
        """Close the connection; the answers already queued go out first."""
        self.flush()
        self.closed = True
        self.transport.close()

    def send(self, payload: bytes) -> None:
        """Queue an answer; the answers queued in one turn of the event loop leave in one write."""
        self.send_framed(FRAME_HEADER.pack(len(payload)), payload)

    def send_framed(self, *framed: bytes) -> None:
        """Queue answers already framed (a run's, encoded together)."""
        if self.closed:
            return
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self.flush)
        self._outbox += framed

    def flush(self) -> None:
        if self._outbox and not self.closed:
            self.transport.write(b"".join(self._outbox))
        self._outbox.clear()

    def start_request(self, size: int, count: int = 1, kind: int = OTHER) -> None:
        """``count`` requests (``size`` bytes) taken: in flight until ``finish_request``; ``kind`` ADDS or READS
        counts them in the IN_PROGRESS gauges too."""
        self._inflight_requests += count
        self._inflight_bytes += size
        if kind == ADDS:
            self._inflight_adds += count
            self.server.in_progress.adds += count
        elif kind == READS:
            self.server.in_progress.reads += count
        self._update_reading()

    def finish_request(self, size: int, count: int = 1, kind: int = OTHER) -> None:
        self._inflight_requests -= count
        self._inflight_bytes -= size
        if kind == ADDS:
            self._inflight_adds -= count
            self.server.in_progress.adds -= count
        elif kind == READS:
            self.server.in_progress.reads -= count
        self._update_reading()

    def _update_reading(self) -> None:
        full = (self._write_paused or self._inflight_bytes >= MAX_CONNECTION_INFLIGHT
                or self._inflight_requests >= MAX_CONNECTION_REQUESTS)
        if self.closed or full == self._read_paused:
            return
        self._read_paused = full
        if full:
            self._block()
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()
            self._unblocked()

    def _block(self) -> None:
        """Reading paused: counted as blocked adds when adds are most of what the connection has in flight,
        as blocked reads otherwise (a client not reading its answers: mostly reads' bodies)."""
        adds = self._inflight_adds
        self._blocked = ADDS if adds and 2 * adds >= self._inflight_requests else READS
        self._blocked_since = time.monotonic()
        counts = self.server.in_progress
        if self._blocked == ADDS:
            counts.adds_blocked += 1
        else:
            counts.reads_blocked += 1

    def _unblocked(self) -> None:
        waited, counts, stats = time.monotonic() - self._blocked_since, self.server.in_progress, self.server.stats
        if self._blocked == ADDS:
            counts.adds_blocked -= 1
            stats.add_blocked_wait.register_successful_event(waited)
        else:
            counts.reads_blocked -= 1
            stats.read_blocked_wait.register_successful_event(waited)
        self._blocked = OTHER

    def spawn_many(self, work: Awaitable[list[bytes]], requests: list[tuple], kind: int = OTHER) -> None:
        """Run ``work`` (which returns the answers) as the ``requests`` in flight (each ends with its size)."""
        def send_all(answers: list[bytes]) -> None:
            for answer in answers:
                self.send(answer)
        self.spawn(work, sum(r[-1] for r in requests), len(requests), send_all, kind)

    def spawn(self, work: Awaitable, size: int, count: int = 1, deliver: Callable | None = None,
              kind: int = OTHER) -> None:
        """Run ``work`` as ``count`` requests (``size`` bytes, ``kind``) in flight; ``deliver`` its result
        (``send``: the answer) unless the connection closed meanwhile."""
        self.start_request(size, count, kind)
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        deliver = deliver or self.send

        def done(t: asyncio.Task) -> None:
            self.tasks.discard(t)
            self.finish_request(size, count, kind)
            if not t.cancelled():
                deliver(t.result())
        task.add_done_callback(done)


class BookieRequestProcessor:
    """The operations of both protocol versions over one Bookie engine."""

    def __init__(self, bookie: Bookie, max_batch_read_size: int = DEFAULT_MAX_BATCH_READ_SIZE,
                 bookie_id: str | None = None):
        self.bookie = bookie
        self.max_batch_read_size = max_batch_read_size
        self.bookie_id = bookie_id  # None: requests naming a bookie id are not checked (an engine served alone)
        self.stats = stats = bookie.request_stats
        self._v3_ops: dict[int, Callable] = {
            pb.READ_ENTRY: self._read_v3, pb.WRITE_LAC: self._write_lac_v3, pb.READ_LAC: self._read_lac_v3,
            pb.GET_BOOKIE_INFO: self._bookie_info_v3, pb.FORCE_LEDGER: self._force_ledger_v3,
            pb.GET_LIST_OF_ENTRIES_OF_LEDGER: self._list_of_entries_v3, pb.AUTH: self._auth_v3,
        }
        # What each v3 operation records (READ_ENTRY's is chosen by its kind, read_stats); AUTH nothing.
        self._v3_stats: dict[int, OperationStats] = {
            pb.WRITE_LAC: stats.write_lac, pb.READ_LAC: stats.read_lac, pb.GET_BOOKIE_INFO: stats.bookie_info,
            pb.FORCE_LEDGER: stats.force_ledger, pb.GET_LIST_OF_ENTRIES_OF_LEDGER: stats.list_of_entries,
        }

    # -- adds and plain reads, both versions: the hot path, batched per read from the socket --------
    def _add(self, handler: BookieRequestHandler, body: bytes, master_key: bytes, recovery: bool,
             answer: Callable[[int], bytes], size: int) -> None:
        """Queue an add in ``handler.adds``: ``submit_batched`` hands it to the Bookie."""
        if len(body) < _ENTRY_IDS:
            self._refuse_add(handler, answer)  # an entry starts with its ledger and entry ids
            return
        ledger_id = int.from_bytes(body[:8], "big", signed=True)  # WriteEntryProcessorV3
        if ledger_id < 0:
            self._refuse_add(handler, answer)
            return
        group = handler.adds.get((ledger_id, master_key, recovery))
        if group is None:
            handler.adds[(ledger_id, master_key, recovery)] = group = []
        group.append((body, answer, size))

    def submit_batched(self, handler: BookieRequestHandler) -> None:
        """Hand the queued adds to the Bookie (one framed batch per ledger, at most MAX_ADD_BATCH
        entries or MAX_ADD_BATCH_BYTES each) and read the queued plain reads in one executor job."""
        if handler.adds:
            adds, handler.adds = handler.adds, {}
            for (ledger_id, master_key, recovery), items in adds.items():
                ledger = LedgerId(0, ledger_id)
                batch: list = []
                nbytes = 0
                for item in items:
                    if batch and (len(batch) >= MAX_ADD_BATCH or nbytes + len(item[0]) > MAX_ADD_BATCH_BYTES):
                        self._add_batch(handler, ledger, master_key, recovery, batch)
                        batch, nbytes = [], 0
                    batch.append(item)
                    nbytes += len(item[0])
                self._add_batch(handler, ledger, master_key, recovery, batch)
        if handler.reads:
            reads, handler.reads = handler.reads, []
            handler.spawn_many(self._read_many(reads, handler.received), reads, READS)

    def _add_batch(self, handler: BookieRequestHandler, ledger: LedgerId, master_key: bytes, recovery: bool,
                   batch: list[tuple[bytes, Callable[[int], bytes], int]]) -> None:
        frame = entry_format.FRAME.pack
        parts = []
        for body, _, _ in batch:
            parts.append(frame(len(body)))
            parts.append(body)

        def answer_all(code: int) -> None:
            for _, answer, _ in batch:
                handler.send(answer(code))

        def one_by_one() -> None:
            if len(batch) > 1:
                for item in batch:
                    self._add_batch(handler, ledger, master_key, recovery, [item])
            else:
                self._refuse_add(handler, batch[0][1])
        self._store(handler, ledger, master_key, recovery, b"".join(parts), sum(item[2] for item in batch),
                    len(batch), answer_all, one_by_one)

    def _store(self, handler: BookieRequestHandler, ledger: LedgerId, master_key: bytes, recovery: bool,
               framed: bytes, size: int, count: int, answer_all: Callable[[int], None],
               one_by_one: Callable[[], None]) -> None:
        """Hand ``count`` adds (``size`` bytes of requests), framed, to the Bookie as one batch. ``answer_all``
        answers every one with a status: once the batch's journal record is fsynced, or at once with a
        refusal that is the same for every entry (fenced, read-only, wrong key, journal full). A batch refused
        for one entry (too large, id out of range) is taken ``one_by_one``, so that each gets its own answer."""
        received, started = handler.received, time.monotonic()
        try:
            future = self.bookie.add_entries(ledger, master_key, framed, recovery=recovery)
        except BadRequestException:
            one_by_one()
            return
        except Exception as exc:
            code = failure(exc)[0]
            self.stats.add_answered(received, started, code, count)
            answer_all(code)
            return
        handler.start_request(size, count, ADDS)
        loop = asyncio.get_running_loop()

        def answered(f) -> None:  # on the event loop, once the batch's journal record is fsynced
            handler.finish_request(size, count, ADDS)
            error = f.exception()
            code = status.EOK if error is None else failure(error)[0]
            self.stats.add_answered(received, started, code, count)
            answer_all(code)
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(answered, f))

    def _refuse_add(self, handler: BookieRequestHandler, answer: Callable[[int], bytes]) -> None:
        """Answer one add EBADREQ at once (recorded as a failed ADD_ENTRY_REQUEST)."""
        received = handler.received
        self.stats.add.answered(received, received, 0, 1)
        handler.send(answer(status.EBADREQ))

    def process_run(self, handler: BookieRequestHandler, run: FrameRun) -> None:
        """Same-size frames: adds of one ledger, key and flags (v3_add_columns, or v2_add_columns on a v2
        connection) go to the Bookie as framed batches of at most MAX_ADD_BATCH entries, each answered with
        one buffer; plain v3 reads of one ledger at evenly stepped ids (v3_read_columns) are read as one
        range and answered with one buffer; anything else frame by frame."""
        columns = v3_add_columns if handler.using_v3 else v2_add_columns
        step = max(1, min(MAX_ADD_BATCH, MAX_ADD_BATCH_BYTES // (run.payload_size + FRAME_HEADER.size)))
        for first in range(0, run.count, step):
            if handler.closed:
                return
            part = run.part(first, min(run.count, first + step))
            adds = columns.scan_add_run(part.block, part.payload_size, part.count)
            if adds is not None:
                self.submit_batched(handler)  # what came before reaches the Bookie first
                self._add_run(handler, adds, part)
                continue
            reads = v3_read_columns.scan_read_run(part.block, part.payload_size, part.count) \
                if handler.using_v3 else None
            if reads is not None:
                self.submit_batched(handler)
                self._read_run(handler, reads, part)
                continue
            for payload in part.payloads():
                if not handler.closed:
                    handler._dispatch(payload)

    def _add_run(self, handler: BookieRequestHandler, adds: V2AddRun | V3AddRun, part: FrameRun) -> None:
        """``_add_batch`` for a run, answered with one buffer; refused for one entry, it is taken frame by frame."""
        self._store(handler, LedgerId(0, adds.ledger_id), adds.master_key, adds.recovery, adds.framed,
                    part.payload_size * part.count, part.count,
                    lambda code: handler.send_framed(adds.encode_answers(code)),
                    lambda: self._one_by_one(handler, part))

    def _read_run(self, handler: BookieRequestHandler, reads: V3ReadRun, part: FrameRun) -> None:
        """A run of plain reads read as one strided range in an executor job, answered with one buffer; unless the
        bookie holds every one of them, all of one size: then each is read and answered alone."""
        received, started = handler.received, time.monotonic()

        def deliver(found: tuple[bytes, int | None] | None) -> None:
            rows = None if found is None else entry_format.framed_rows(found[0], 1)
            if rows is None:
                self._one_by_one(handler, part)
            else:
                self.stats.read.answered(received, started, part.count)
                handler.send_framed(reads.encode_answers(rows[:, entry_format.FRAME_LEN:], found[1]))
        handler.spawn(run_in_executor(self._read_stepped, LedgerId(0, reads.ledger_id), reads.first, reads.step,
                                      reads.count), part.payload_size * part.count, part.count, deliver, READS)

    def _one_by_one(self, handler: BookieRequestHandler, part: FrameRun) -> None:
        """A run's frames taken as if they had come one by one."""
        for payload in part.payloads():
            if not handler.closed:
                handler._dispatch(payload)
        self.submit_batched(handler)

    async def _read_many(self, reads: list[tuple[LedgerId, int, Callable, int]], received: float) -> list[bytes]:
        """Plain reads (ledger, entry id, answer, size) that arrived at ``received``, read in one executor job;
        their answers."""
        started = time.monotonic()
        results = await run_in_executor(self._read_entries, reads)
        answers = []
        failed = 0
        for (_, _, answer, _), result in zip(reads, results):
            if isinstance(result, Exception):
                failed += 1
                answers.append(answer(failure(result)[0], None, None, None))
            else:
                answers.append(answer(status.EOK, *result))
        self.stats.read.answered(received, started, len(reads) - failed, failed)
        return answers

    def _read_entries(self, reads) -> list:
        """(body, its entry id, the ledger's LAC) of each read, or the exception that answers it. A run of
        reads of one ledger whose ids step evenly (a Java client reads a ledger striped over its
        ensemble: every third id from each of three bookies) is read as one range, as gRPC range reads are."""
        bookie, results = self.bookie, []
        i, n = 0, len(reads)
        while i < n:
            ledger, first = reads[i][0], reads[i][1]
            j = i + 1
            if j < n and reads[j][0] == ledger and reads[j][1] > first >= 0:
                step = reads[j][1] - first
                while j < n and reads[j][0] == ledger and reads[j][1] == first + (j - i) * step:
                    j += 1
            if j - i >= MIN_RANGE_READ and self._read_range(ledger, first, step, j - i, results):
                i = j
                continue
            for ledger, entry_id, _, _ in reads[i:j]:
                try:
                    body = bookie.read_entry(ledger, entry_id)
                    results.append((body, entry_format.peek_ids(body, 0)[2], bookie.last_add_confirmed(ledger)))
                except Exception as exc:
                    results.append(exc)
            i = j
        return results

    def _read_range(self, ledger: LedgerId, first: int, step: int, count: int, results: list) -> bool:
        """Read ``count`` entries ``first``, ``first + step``, ... as one range into ``results``; False
        (nothing added) unless the bookie has every one of them."""
        found = self._read_stepped(ledger, first, step, count)
        if found is None:
            return False
        framed, lac = found
        results.extend((bytes(body), first + k * step, lac) for k, body in enumerate(entry_format.iter_frames(framed)))
        return True

    def _read_stepped(self, ledger: LedgerId, first: int, step: int, count: int) -> tuple[bytes, int | None] | None:
        """The framed entries ``first``, ``first + step``, ... (``count`` of them) and the ledger's LAC, or None
        unless the bookie has every one of them (the storage checks each record's ledger and entry id)."""
        last = first + (count - 1) * step
        started = time.monotonic()
        try:
            parts, got, _ = self.bookie.storage.read_framed_parts(ledger, first, last, 1 << 62, step, first % step)
            lac = self.bookie.last_add_confirmed(ledger)
        except Exception:
            return None  # each read then gets its own answer
        if got != count:
            return None
        framed = b"".join(parts)
        self.bookie.stats.read(started, count, len(framed) - entry_format.FRAME_LEN * count)  # else read one by one
        return framed, lac

    # -- v3 -----------------------------------------------------------------------------------------
    def process_v3(self, handler: BookieRequestHandler, request: pb.Request, size: int) -> None:
        if request.requestContext and self.bookie_id is not None and self._meant_for_another(handler, request):
            handler.send(v2.v3_response(request, status.EBADREQ).SerializeToString())
            return
        op = request.header.operation
        if op == pb.ADD_ENTRY and request.HasField("addRequest"):
            self._add_v3(handler, request, request.addRequest, size)
            return
        if op == pb.READ_ENTRY and request.HasField("readRequest"):
            read = request.readRequest
            if not _fences(read) and not read.HasField("previousLAC"):
                self._plain_read_v3(handler, request, read, size)
                return
        self.submit_batched(handler)  # what came before this request reaches the Bookie first
        fields = _V3_FIELDS.get(op)
        if fields is None or not request.HasField(fields[0]):
            why = (f"operation {pb.OperationType.Name(op)} is not served" if fields is None
                   else f"{pb.OperationType.Name(op)} request without its {fields[0]}")
            log.warning("EBADREQ to %s (txnId %d): %s", handler.peer, request.header.txnId, why)
            handler.send(v2.v3_response(request, status.EBADREQ).SerializeToString())
            return
        response = v2.v3_response(request, status.EOK)
        body = getattr(response, fields[1])
        sub = getattr(request, fields[0])
        for name in ("ledgerId", "entryId"):  # required in the responses that have them
            if name in body.DESCRIPTOR.fields_by_name:
                setattr(body, name, getattr(sub, name))
        if op == pb.READ_ENTRY:
            stats = read_stats(self.stats, _fences(sub), sub.HasField("previousLAC"))
        else:
            stats = self._v3_stats.get(op)
        handler.spawn(self._answer_v3(self._v3_ops[op], sub, response, body, stats, handler.received), size,
                      kind=READS if op == pb.READ_ENTRY else OTHER)

    def _plain_read_v3(self, handler: BookieRequestHandler, request: pb.Request, read: pb.ReadRequest,
                       size: int) -> None:
        header, ledger_id, entry_id = v3.v3_header_field(request), read.ledgerId, read.entryId
        if ledger_id < 0:
            handler.send(v3.encode_v3_read_response(header, status.EBADREQ, ledger_id, entry_id))
            return

        def answer(code: int, body: bytes | None, read_id: int | None, lac: int | None) -> bytes:
            return v3.encode_v3_read_response(header, code, ledger_id, entry_id if read_id is None else read_id,
                                              body, lac)
        handler.reads.append((LedgerId(0, ledger_id), entry_id, answer, size))

    def _meant_for_another(self, handler: BookieRequestHandler, request: pb.Request) -> bool:
        for pair in request.requestContext:
            if pair.key == BOOKIE_ID_KEY and pair.value != self.bookie_id:
                log.warning("EBADREQ to %s (txnId %d): the request is meant for bookie %s; this is bookie %s (its "
                            "registration points here?)", handler.peer, request.header.txnId, pair.value,
                            self.bookie_id)
                return True
        return False

    def _add_v3(self, handler: BookieRequestHandler, request: pb.Request, add: pb.AddRequest, size: int) -> None:
        header, ledger_id, entry_id = v3.v3_header_field(request), add.ledgerId, add.entryId

        def answer(code: int) -> bytes:
            return v3.encode_v3_add_response(header, code, ledger_id, entry_id)
        if add.writeFlags & DEFERRED_SYNC:
            self._refuse_add(handler, answer)
            return
        recovery = add.HasField("flag") and add.flag == pb.AddRequest.RECOVERY_ADD  # proto2: absent reads as 1
        self._add(handler, add.body, add.masterKey, recovery, answer, size)

    @staticmethod
    async def _answer_v3(work, request, response: pb.Response, body, stats: OperationStats | None,
                         received: float) -> bytes:
        started = time.monotonic()
        try:
            await work(request, body)
            code = status.EOK
        except Exception as exc:
            code = failure(exc)[0]
        if stats is not None:
            ok = int(code == status.EOK)
            stats.answered(received, started, ok, 1 - ok)
        if "status" in body.DESCRIPTOR.fields_by_name:
            body.status = code
        response.status = code
        return response.SerializeToString()

    async def _read_v3(self, read: pb.ReadRequest, response: pb.ReadResponse) -> None:
        flag = read.flag if read.HasField("flag") else 0  # proto2: an absent flag reads as FENCE_LEDGER
        result = await read_entry(self.bookie, _ledger(read.ledgerId), read.entryId,
                                  read.masterKey if flag == pb.ReadRequest.FENCE_LEDGER else None,
                                  read.previousLAC if read.HasField("previousLAC") else None, read.timeOut,
                                  flag == pb.ReadRequest.ENTRY_PIGGYBACK)
        result.fill(response)

    async def _write_lac_v3(self, request: pb.WriteLacRequest, response: pb.WriteLacResponse) -> None:
        await asyncio.wrap_future(self.bookie.set_explicit_lac(_ledger(request.ledgerId), request.masterKey,
                                                               request.body, request.lac))

    async def _read_lac_v3(self, request: pb.ReadLacRequest, response: pb.ReadLacResponse) -> None:
        lac_body, last_entry = await read_lac(self.bookie, _ledger(request.ledgerId))
        if lac_body is not None:
            response.lacBody = lac_body
        if last_entry is not None:
            response.lastEntryBody = last_entry

    async def _force_ledger_v3(self, request: pb.ForceLedgerRequest, response: pb.ForceLedgerResponse) -> None:
        await asyncio.wrap_future(self.bookie.force_ledger(_ledger(request.ledgerId)))

    async def _bookie_info_v3(self, request: pb.GetBookieInfoRequest, response: pb.GetBookieInfoResponse) -> None:
        total, free = await run_in_executor(self.bookie.disk_info)
        if request.requested & pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY:
            response.totalDiskCapacity = total
        if request.requested & pb.GetBookieInfoRequest.FREE_DISK_SPACE:
            response.freeDiskSpace = free

    async def _list_of_entries_v3(self, request: pb.GetListOfEntriesOfLedgerRequest,
                                  response: pb.GetListOfEntriesOfLedgerResponse) -> None:
        ids = await run_in_executor(self.bookie.stored_entry_ids, _ledger(request.ledgerId))
        response.availabilityOfEntriesOfLedger = availability.encode(ids)

    async def _auth_v3(self, request: pb.AuthMessage, response: pb.AuthMessage) -> None:
        response.CopyFrom(v2.auth_disabled_message())

    # -- v2 -----------------------------------------------------------------------------------------
    def process_v2(self, handler: BookieRequestHandler, request: v2.V2Request, size: int) -> None:
        if isinstance(request, v2.ParsedAddRequest):
            version, ledger_id, entry_id = request.version, request.ledger_id, request.entry_id
            self._add(handler, request.body, request.master_key, request.recovery,
                      lambda code: v2.encode_add_response(version, v2.to_v2_status(code), ledger_id, entry_id), size)
        elif isinstance(request, v2.ReadRequest) and not request.fencing and request.ledger_id >= 0:
            version, ledger_id, entry_id = request.version, request.ledger_id, request.entry_id

            def answer(code: int, body: bytes | None, read_id: int | None, lac: int | None) -> bytes:
                return v2.encode_response(v2.ReadResponse(version, v2.to_v2_status(code), ledger_id, entry_id,
                                                          body or b""))
            handler.reads.append((LedgerId(0, ledger_id), entry_id, answer, size))
        elif isinstance(request, v2.AuthRequest):
            self.submit_batched(handler)
            handler.send(v2.encode_response(v2.AuthResponse(request.version,
                                                            v2.auth_disabled_message().SerializeToString())))
        else:
            self.submit_batched(handler)
            handler.spawn(self._read_v2(request, handler.received), size, kind=READS)

    async def _read_v2(self, request: v2.ReadRequest | v2.BatchedReadRequest, received: float) -> bytes:
        batch = isinstance(request, v2.BatchedReadRequest)
        entries = b""
        started = time.monotonic()
        try:
            ledger = _ledger(request.ledger_id)
            fence_key = None
            if request.fencing:
                if request.master_key is None:  # a version-1 request carries none (ReadEntryProcessor)
                    raise UnauthorizedAccessException(f"fence of ledger {ledger} without a master key")
                fence_key = request.master_key
            if batch:
                if fence_key is not None:  # answered once the fence is fsynced, as a single read
                    await asyncio.wrap_future(self.bookie.fence_ledger(ledger, fence_key))
                entries = await run_in_executor(batched_read_entry_processor.read_batch, self.bookie, ledger, request,
                                                self.max_batch_read_size)
            else:
                entries = (await read_entry(self.bookie, ledger, request.entry_id, fence_key, None, 0, False)).body
            rc = v2.EOK
        except Exception as exc:
            rc = v2.to_v2_status(failure(exc)[0])
        ok = int(rc == v2.EOK)
        read_stats(self.stats, request.fencing, False).answered(received, started, ok, 1 - ok)
        if batch:
            return v2.encode_batched_read_response(request.version, rc, request.ledger_id, request.entry_id,
                                                   request.request_id, entries)
        return v2.encode_response(v2.ReadResponse(request.version, rc, request.ledger_id, request.entry_id, entries))


def _fences(read: pb.ReadRequest) -> bool:
    return read.HasField("flag") and read.flag == pb.ReadRequest.FENCE_LEDGER  # proto2: absent reads as 1


class BookieNettyServer:
    """Listens on ``host`` (the bookie server passes listeningInterface's address, or 0.0.0.0 for every
    interface) and serves the native protocol from ``bookie`` as bookie ``bookie_id``."""

    def __init__(self, bookie: Bookie, port: int = 0, *, host: str,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_batch_read_size: int = DEFAULT_MAX_BATCH_READ_SIZE, bookie_id: str | None = None,
                 read_size: int = DEFAULT_READ_SIZE):
        self.processor = BookieRequestProcessor(bookie, max_batch_read_size, bookie_id)
        self.stats = bookie.request_stats
        self.in_progress = self.stats.in_progress()  # this server's share of the IN_PROGRESS and BLOCKED gauges
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        # The most one read of a connection brings (byteBufAllocatorSizeMax): a client's batch of adds arrives in
        # few reads, each stored as one journal record
        self.read_size = read_size
        self.connections: set[BookieRequestHandler] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> "BookieNettyServer":
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: BookieRequestHandler(self), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("native protocol served on %s:%d", self.host, self.port)
        return self

    async def stop(self) -> None:
        """Stop listening and close every connection (answers already queued go out first)."""
        if self._server is None:
            return
        self._server.close()
        for handler in list(self.connections):
            handler.close()
        await self._server.wait_closed()
        self._server = None
