"""The connection under a NativeBookieClient (BookKeeper's PerChannelBookieClient channel): one socket,
the write queue and the writer thread that writes it (everything queued by then in one ``sendmsg``), the
requests in flight by key, and the reader thread that answers them (``PendingCall``: one request and its
Future; ``PendingAddBatch``: the per-entry AddRequests of one framed batch, answered together) and expires
those past their deadline.

Writing to a socket costs the kernel's time for every byte, and on loopback the receiving side's too: the
writer thread spends it (without the GIL), so that neither the application thread that appends nor the
reader thread that answers a batch (and sends the next) waits for it, or for a bookie that reads slowly,
as Netty's event loop writes for the threads that queue.

A connection speaks one version of the protocol, as a Java client's channel does. v3 (``v3_answer``):
requests and answers are matched by txnId; a part of a batch of adds, whose txnIds are consecutive, is
registered once and answered by ranges of txnIds (a run of answers decoded as columns gives its txnIds as an
array). v2 (``v2_add_answer``, adds only, with ``useV2WireProtocol``): an answer names only its ledger and
entry, so requests are matched by
(ledger id, entry id), as PerChannelBookieClient's v2 completion keys; the same entry sent again before
its answer waits behind the first.
"""
from __future__ import annotations

import logging
import select
import socket
import threading
import time
from concurrent.futures import Future
from collections import deque
from dataclasses import dataclass
from typing import Callable, Hashable

import numpy as np
from google.protobuf.message import DecodeError

from bookie.exceptions import (BadRequestException, BKBookieHandleNotAvailableException, BKClientClosedException,
                               BKTimeoutException)
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import status, v2_add_columns, v3_add_columns
from bookie.proto.native_frames import FRAME_HEADER, FrameDecoder, FrameRun, FrameTooLargeException
from bookie.util.io import sendmsg_all

log = logging.getLogger(__name__)

RECEIVE_SIZE = 1 << 20
TIMEOUT_CHECK = 0.2  # seconds: how often the reader thread looks for requests past their deadline
MIN_ANSWER_RUN = 16  # same-size answers decoded as one run (a protocol with a columnar decoder) from this many on


class PendingCall:
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


def v3_answer(frame: bytes) -> tuple[int, v3.Response]:
    """A v3 answer and its key, its txnId."""
    response = v3.Response()
    response.ParseFromString(frame)
    return response.header.txnId, response


def v2_add_answer(frame: bytes) -> tuple[tuple[int, int], int]:
    """A v2 ADDENTRY answer: its key (ledger id, entry id) and its code as a v3 status."""
    rc, ledger_id, entry_id = v2.decode_add_response(frame)
    return (ledger_id, entry_id), v2.to_v3_status(rc)


@dataclass
class AddAnswers:
    """Answers to v3 adds, all with one status: their txnIds (decoded as columns)."""
    txns: np.ndarray
    code: int


def v3_answers(run: FrameRun) -> list[tuple[int, v3.Response]] | AddAnswers:
    """``v3_answer`` of a run of same-size answers: answers to adds laid out alike decoded as columns
    (v3_add_columns), their txnIds and status; any other run one by one."""
    decoded = v3_add_columns.decode_add_answers(run.block, run.payload_size, run.count)
    if decoded is None:
        return [v3_answer(payload) for payload in run.payloads()]
    return AddAnswers(*decoded)


def v2_add_answers(run: FrameRun) -> list[tuple[tuple[int, int], int]]:
    """``v2_add_answer`` of a run of answers, decoded as columns (v2_add_columns)."""
    rcs, ledgers, entries = v2_add_columns.decode_add_answers(run.block, run.payload_size, run.count)
    codes = [v2.to_v3_status(rc) for rc in rcs.tolist()] if rcs.any() else [status.EOK] * run.count
    return list(zip(zip(ledgers.tolist(), entries.tolist()), codes))


class ChannelConnection:
    """One socket: the write queue, the in-flight requests by key, the reader thread. ``answer_of`` turns a
    received frame into (key, answer): ``v3_answer`` or ``v2_add_answer``."""

    def __init__(self, bookie_id: str, max_frame_size: int, sock: socket.socket,
                 answer_of: Callable[[bytes], tuple[Hashable, object]] = v3_answer,
                 answers_of: Callable[[FrameRun], list[tuple[Hashable, object]]] | None = v3_answers):
        self.bookie_id = bookie_id
        self.max_frame_size = max_frame_size
        self.sock = sock
        self.answer_of = answer_of
        self.answers_of = answers_of  # runs of same-size answers, if the protocol has a columnar decoder
        self.lock = threading.Lock()
        self.pending: dict[Hashable, PendingCall | PendingAddBatch] = {}
        # v3 adds in flight: a part of a batch is registered once, by its first txnId (the others follow on):
        # first txnId -> (its batch, where in the batch it starts, its entries)
        self.add_batches: dict[int, tuple[PendingAddBatch, int, int]] = {}
        self.waiting: dict[Hashable, deque] = {}  # v2: requests whose key was already in flight, in order
        self.deadlines: dict[Hashable, float] = {}  # key -> deadline, of the requests that have one (not adds)
        self.queued: list[bytes] = []  # frame headers and payloads, joined by the writer thread
        self.queued_ready = threading.Condition(self.lock)
        self.broken: Exception | None = None
        self.thread = threading.Thread(target=self._receive, name=f"bookie-rpc-{bookie_id}", daemon=True)
        self.writer = threading.Thread(target=self._write, name=f"bookie-rpc-write-{bookie_id}", daemon=True)
        self.thread.start()
        self.writer.start()

    def send(self, requests: list[tuple[Hashable, bytes, PendingCall | PendingAddBatch]]) -> None:
        """Register and queue serialized requests for the writer thread."""
        with self.lock:
            if self.broken is not None:
                raise self.broken
            framed = []
            for key, payload, handler in requests:
                self._register(key, handler)
                framed.append(FRAME_HEADER.pack(len(payload)))
                framed.append(payload)
            self._queue(framed)

    def send_block(self, keys: list[Hashable], blocks: list[bytes], handler: PendingAddBatch) -> None:
        """``send`` of one handler's requests already framed, back to back in ``blocks``, ``keys`` in their
        order."""
        with self.lock:
            if self.broken is not None:
                raise self.broken
            if self.pending.keys().isdisjoint(keys):  # none in flight already: registered in one pass
                self.pending.update(dict.fromkeys(keys, handler))
            else:
                for key in keys:
                    self._register(key, handler)
            self._queue(blocks)

    def send_adds(self, batch: PendingAddBatch, ranges: list[tuple[int, int]], blocks: list) -> bool:
        """Queue a v3 batch's framed requests: each part's txnIds follow on from its first, ``ranges`` holding
        (first txnId, entries) of each part in order. The batch is registered once a part, and answered by
        ranges of txnIds (``_answer_adds``). False (nothing sent) if a part's first txnId is in flight already
        (the same part sent to this bookie again before its answer)."""
        with self.lock:
            if self.broken is not None:
                raise self.broken
            if any(first in self.add_batches for first, _ in ranges):
                return False
            offset = 0
            for first, count in ranges:
                self.add_batches[first] = (batch, offset, count)
                offset += count
            self._queue(blocks)
        return True

    def _queue(self, blocks: list[bytes]) -> None:
        """Queue framed requests for the writer thread (lock held)."""
        if not self.queued:
            self.queued_ready.notify()
        self.queued += blocks

    def _register(self, key: Hashable, handler: PendingCall | PendingAddBatch) -> None:
        """A request in flight (lock held)."""
        if key in self.pending:  # v2 only (a txnId is never reused): answered after the one in flight
            self.waiting.setdefault(key, deque()).append(handler)
        else:
            self.pending[key] = handler
        if handler.deadline is not None:
            self.deadlines[key] = handler.deadline

    def _write(self) -> None:
        """The writer thread: writes what is queued, everything queued by then in one ``sendmsg`` (see the
        module's docstring)."""
        while True:
            with self.lock:
                while not self.queued and self.broken is None:
                    self.queued_ready.wait()
                if self.broken is not None:
                    return
                batch, self.queued = self.queued, []
            try:
                sendmsg_all(self.sock, batch)
            except OSError as exc:
                self.fail(BKBookieHandleNotAvailableException(f"write to bookie {self.bookie_id} failed: {exc}"))
                return

    def _receive(self) -> None:
        decoder = FrameDecoder(self.max_frame_size)
        next_check = time.monotonic() + TIMEOUT_CHECK
        try:
            while self.broken is None:
                # The socket stays blocking (sendall must not time out); select wakes the thread to expire requests.
                readable, _, _ = select.select([self.sock], [], [], TIMEOUT_CHECK)
                if readable:
                    data = self.sock.recv(RECEIVE_SIZE)
                    if not data:
                        raise ConnectionError("the bookie closed the connection")
                    runs = self.answers_of is not None
                    self._complete(decoder.feed_runs(data, MIN_ANSWER_RUN) if runs else decoder.feed(data))
                if self.deadlines and time.monotonic() >= next_check:
                    self._expire()
                    next_check = time.monotonic() + TIMEOUT_CHECK
        except (OSError, FrameTooLargeException, DecodeError, BadRequestException) as exc:
            self.fail(BKBookieHandleNotAvailableException(f"connection to bookie {self.bookie_id} lost: {exc}"))

    def _complete(self, frames: list[bytes]) -> None:
        """Answer the requests of what one read brought (the map is locked once for all of them); a frame
        that does not parse ends the connection after the answers before it."""
        answers: list[tuple[Hashable, object]] = []
        adds: list[AddAnswers] = []
        answer_of = self.answer_of
        try:
            for frame in frames:
                if type(frame) is FrameRun:
                    decoded = self.answers_of(frame)
                    if type(decoded) is AddAnswers:
                        adds.append(decoded)
                    else:
                        answers += decoded
                else:
                    answers.append(answer_of(frame))
        finally:
            self._answer(answers, adds)

    def _answer(self, answers: list[tuple[Hashable, object]], adds: list[AddAnswers] = ()) -> None:
        with self.lock:
            pending, deadlines, waiting = self.pending, self.deadlines, self.waiting
            answered = []
            for key, response in answers:
                handler = pending.pop(key, None)
                if handler is None:  # an add of a batch registered by its first txnId, or timed out earlier
                    if self.add_batches and type(response) is v3.Response:
                        adds.append(AddAnswers(np.array([key], dtype=np.int64), _v3_add_status(response)))
                    continue
                if deadlines:
                    deadlines.pop(key, None)
                if waiting and key in waiting:
                    queue = waiting[key]
                    pending[key] = queue.popleft()
                    if not queue:
                        del waiting[key]
                answered.append((key, response, handler))
            finished = self._answer_adds(adds) if adds else ()
        for batch in finished:
            batch.settle()
        bookie_id = self.bookie_id
        i, n = 0, len(answered)
        while i < n:
            handler = answered[i][2]
            if isinstance(handler, PendingAddBatch):  # a batch's answers in a row: counted together
                j = i + 1
                while j < n and answered[j][2] is handler:
                    j += 1
                handler.answer_many(answered[i:j])
                i = j
            else:
                handler.answer(answered[i][0], answered[i][1], bookie_id)
                i += 1

    def _answer_adds(self, adds: list[AddAnswers]) -> list[PendingAddBatch]:
        """Count answers to v3 adds against the parts in flight (lock held); the batches now answered whole."""
        finished = []
        for answer in adds:
            low, high = int(answer.txns.min()), int(answer.txns.max())
            for first, (batch, offset, count) in list(self.add_batches.items()):
                if first <= high and low < first + count:
                    part_done, batch_done = batch.take(answer.txns - first, offset, count, answer.code)
                    if part_done:
                        del self.add_batches[first]
                    if batch_done:
                        finished.append(batch)
        return finished

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
            handler.fail(BKTimeoutException(f"{handler.what} on bookie {self.bookie_id} timed out"))

    def fail(self, error: Exception) -> None:
        """The connection is unusable: every request in flight fails with ``error``."""
        with self.lock:
            if self.broken is None:
                self.broken = error
            handlers = [*self.pending.values(), *(h for queue in self.waiting.values() for h in queue),
                        *(batch for batch, _, _ in self.add_batches.values())]
            self.pending, self.waiting, self.deadlines, self.add_batches = {}, {}, {}, {}
            self.queued = []
            self.queued_ready.notify()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for handler in {id(h): h for h in handlers}.values():  # a batch's entries share one handler
            handler.fail(error)

    def close(self) -> None:
        self.fail(BKClientClosedException(f"client of bookie {self.bookie_id} is closed"))
        for thread in (self.thread, self.writer):
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        self.sock.close()


def _v3_add_status(response: v3.Response) -> int:
    """An AddRequest's answer: the add's status, else the header's (as BookKeeper's bookie answers a request
    it cannot parse)."""
    add = response.addResponse if response.HasField("addResponse") else None
    return add.status if add is not None and add.HasField("status") else response.status


class PendingAddBatch:
    """The entries of one framed batch, sent as AddRequests, answered as one AddResponse when every entry is
    answered (or failed as a whole by the transport). v3: the txnIds of each part of the batch are consecutive,
    and answers come as ranges of txnIds (``take``); v2: each is keyed by (ledger id, entry id), and answered with
    its status as its connection matches it (``answer_many``)."""
    deadline = None  # no deadline of its own: the writer's addEntryTimeout fails it, as on the gRPC add stream

    def __init__(self, ledger: LedgerId, entry_ids: list[int]):
        self.future: Future = Future()
        self.entry_ids = entry_ids
        first, last = (entry_ids[0], entry_ids[-1]) if entry_ids else (-1, -1)
        self.response = pb.AddResponse(status=status.EOK, ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id,
                                       firstEntryId=first, lastEntryId=last, entryCount=len(entry_ids))
        self.count = self.remaining = len(entry_ids)
        self.answered: np.ndarray | None = None  # v3: which entries were answered
        self.settled = False
        self.lock = threading.Lock()

    def take(self, at: np.ndarray, offset: int, count: int, code: int) -> tuple[bool, bool]:
        """Answers (all with status ``code``) to the requests of the part whose ``count`` entries start at
        ``offset`` in the batch, ``at`` places in it (txnIds less the part's first; those outside it are another
        part's), under the connection's lock (its reader thread is the only one answering): whether the part is
        answered whole now, and the batch. An entry answered again counts once."""
        at = at[(at >= 0) & (at < count)] + offset
        if not len(at):
            return False, False
        if self.answered is None:
            self.answered = np.zeros(self.count, dtype=bool)
        if code != status.EOK and self.response.status == status.EOK:
            fresh = at[~self.answered[at]]
            if len(fresh):
                self._failed(self.entry_ids[int(fresh.min())], code)
        self.answered[at] = True
        self.remaining = self.count - int(np.count_nonzero(self.answered))
        return bool(self.answered[offset:offset + count].all()), self.remaining == 0

    def answer_many(self, answers: list[tuple[tuple[int, int], int, object]]) -> None:
        """v2: the answers of several of the batch's entries: ((ledger id, entry id), status, this batch) each."""
        failed = next(((key, code) for key, code, _ in answers if code != status.EOK), None)  # the first failure
        with self.lock:
            self.remaining -= len(answers)
            if failed is not None and self.response.status == status.EOK:
                self._failed(failed[0][1], failed[1])
            finished = self.remaining == 0
        if finished:
            self.settle()

    def _failed(self, entry_id: int, code: int) -> None:
        """The batch's first failure: its status."""
        self.response.status = code
        self.response.message = f"entry {entry_id}: {status.name_of(code)}"

    def settle(self) -> None:
        """Answered whole: the future gets the batch's AddResponse."""
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
