"""Reading a ledger's entries from its bookies (PendingReadOp, ReadLastConfirmedOp).

- One entry: ask the write set in order; a missing entry, a digest mismatch or a bookie error moves
  on to the next replica, and a replica slower than ``speculativeReadTimeout`` gets company.
- A range: per fragment, every bookie of the ensemble streams the entries it is first in the write
  set for (a stride filter), all in parallel; whatever did not arrive or failed its digest is
  range-read from the next bookie of its write set, then the next, and only what none sent is read
  entry by entry. A stream that sends nothing for ``readTimeout`` is given up on (its bookie counts as
  failed), so a bookie that hangs delays a read by ``readTimeout``, not by the stream's deadline.
- The LAC: ReadLac from every bookie of the last ensemble, accepted only under quorum coverage.
- Failure history (``enableBookieFailureTracking``, BookKeeper's LedgerHandle.bookieFailureHistory):
  a bookie that failed a read (or, for a writer's handle, an add) within
  ``bookieFailureHistoryExpirationMSec`` is asked after the other replicas.

"No such entry" (every replica said so) is BKNoSuchEntryException; anything else that leaves an entry
unread is BKReadException (or BKDigestMatchException when every copy failed its digest).
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from bookie.client.distribution_schedule import is_covered, write_set
from bookie.client.ledger_entry import LedgerEntry
from bookie.exceptions import (BKDigestMatchException, BKException, BKLedgerRecoveryException,
                               BKNoSuchEntryException, BKReadException, BKUnauthorizedAccessException)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.util.gc_pause import gc_paused

log = logging.getLogger(__name__)
NO_ENTRY = (status.ENOENTRY, status.ENOLEDGER)
_new_entry = tuple.__new__  # LedgerEntry(...) without the NamedTuple's Python-level __new__: by the million


@dataclass
class LastConfirmed:
    lac: int
    length: int  # the ledger length recorded with that LAC's entry (0 if unknown)


class _Stream:
    """One bookie's range read in progress: when it started or last sent something (None while its job
    waits for a thread: that is no bookie's silence), and whether the reader gave up on it (from then on it
    places nothing more)."""

    __slots__ = ("heard", "abandoned", "lock")

    def __init__(self) -> None:
        self.heard: float | None = None
        self.abandoned = False
        self.lock = threading.Lock()

    def abandon(self, silent_for: float) -> bool:
        """Give up on the stream if it has sent nothing for ``silent_for`` seconds."""
        with self.lock:
            if self.heard is None or time.monotonic() - self.heard < silent_for:
                return False
            self.abandoned = True
            return True


class LedgerReader:
    def __init__(self, bk, ledger: LedgerId, digest: DigestManager):
        self.bk = bk
        self.ledger = ledger
        self.digest = digest
        self.conf = bk.conf
        # ``bk`` may be any object with ``conf``, ``bookie_client`` and ``executor`` (Spark's PartitionClients).
        self._tracking = getattr(self.conf, "enableBookieFailureTracking", True)
        self._history = getattr(self.conf, "bookieFailureHistoryExpirationMSec", 60000) / 1000.0
        self._failed_at: dict[str, float] = {}  # bookie -> when it last failed this handle

    # -- failure history -----------------------------------------------------------------------------
    def bookie_failed(self, bookie: str) -> None:
        """``bookie`` failed this handle (a read, or the writer's add): asked last for a while."""
        if self._tracking:
            self._failed_at[bookie] = time.monotonic()

    def _read_failed(self, bookie: str) -> None:
        self.bookie_failed(bookie)
        tell = getattr(self.bk, "bookie_failed", None)  # the client's quarantine (BookKeeper.bookie_failed)
        if tell is not None:
            tell(bookie)

    def _recently_failed(self) -> set[str]:
        if not self._failed_at:
            return set()
        since = time.monotonic() - self._history
        failures = list(self._failed_at.items())  # one C call: range-read threads may add meanwhile
        for bookie, at in failures:
            if at <= since:
                self._failed_at.pop(bookie, None)
        return {bookie for bookie, at in failures if at > since}

    def _in_read_order(self, indexes, ensemble: list[str]) -> list[int]:
        """Write-set ``indexes`` in BookKeeper's order, those of recently failed bookies last."""
        recent = self._recently_failed()
        if not recent:
            return list(indexes)
        return sorted(indexes, key=lambda i: ensemble[i] in recent)

    # -- one entry -----------------------------------------------------------------------------------
    def read_entry(self, metadata: LedgerMetadata, entry_id: int, skip: tuple[str, ...] = ()) -> bytes:
        """The verified payload of one entry, from the first replica that has a good copy."""
        return self.read_verified(metadata, entry_id, skip)[1].tobytes()

    def read_verified(self, metadata: LedgerMetadata, entry_id: int, skip: tuple[str, ...] = ()):
        """(header, payload view) of one entry, verified, from the first replica that has a good copy."""
        return self.read_verified_in(metadata.ensemble_at(entry_id), metadata.write_quorum_size, entry_id, skip)

    def read_verified_in(self, ensemble, write_quorum: int, entry_id: int, skip: tuple[str, ...] = ()):
        """``read_verified`` of an entry of a fragment written to ``ensemble`` with ``write_quorum`` (what a
        Spark task knows of its slices, which carry no metadata)."""
        order = [ensemble[i] for i in self._in_read_order(write_set(entry_id, len(ensemble), write_quorum), ensemble)]
        order = [b for b in order if b not in skip] + [b for b in order if b in skip]
        return self._read_from(order, entry_id)

    def _read_from(self, bookies: list[str], entry_id: int):
        errors: list[str] = []
        no_entry = digest_bad = 0
        pending: dict[cf.Future, str] = {}
        remaining = list(bookies)
        speculative = self.conf.speculativeReadTimeout or None
        deadline = time.monotonic() + self.conf.readTimeout * len(bookies)
        while remaining or pending:
            if remaining and (not pending or speculative):
                bookie = remaining.pop(0)
                pending[self.bk.bookie_client(bookie).read_entry_async(self.ledger, entry_id, timeout=self.conf.readTimeout)] = bookie
            wait = speculative if remaining else max(0.0, deadline - time.monotonic())
            done, _ = cf.wait(pending, timeout=wait, return_when=cf.FIRST_COMPLETED)
            for future in done:
                bookie = pending.pop(future)
                try:
                    response = future.result()
                except BKException as exc:
                    errors.append(f"{bookie}: {exc}")
                    self._read_failed(bookie)
                    continue
                if response.status == status.EOK:
                    try:
                        return self.digest.verify(response.body, entry_id)
                    except BKDigestMatchException as exc:
                        digest_bad += 1
                        errors.append(f"{bookie}: {exc}")
                        log.warning("entry %d of ledger %s from bookie %s: %s; trying another replica",
                                    entry_id, self.ledger, bookie, exc)
                elif response.status in NO_ENTRY:
                    no_entry += 1
                else:
                    errors.append(f"{bookie}: {status.name_of(response.status)} {response.message}")
            if not done and not remaining and time.monotonic() >= deadline:
                errors.append("timed out")
                break
        if no_entry == len(bookies):
            raise BKNoSuchEntryException(f"entry {entry_id} of ledger {self.ledger} is on none of {', '.join(bookies)}")
        if digest_bad and digest_bad + no_entry == len(bookies):
            raise BKDigestMatchException(f"entry {entry_id} of ledger {self.ledger}: no replica passed the digest "
                                         f"check ({'; '.join(errors)})")
        raise BKReadException(f"could not read entry {entry_id} of ledger {self.ledger}: {'; '.join(errors)}")

    # -- ranges --------------------------------------------------------------------------------------
    def read_range(self, metadata: LedgerMetadata, first: int, last: int) -> list[LedgerEntry]:
        """Every entry in ``[first, last]``, in order, each verified."""
        out: list[LedgerEntry] = []
        for f_first, f_last, ensemble in metadata.fragments():
            f_last = last if f_last < 0 else f_last
            a, b = max(first, f_first), min(last, f_last)
            if a <= b:
                out += self._read_fragment(metadata, list(ensemble), a, b)
        return out

    def _read_fragment(self, metadata: LedgerMetadata, ensemble: list[str], first: int, last: int) -> list[LedgerEntry]:
        E = len(ensemble)
        result: list[LedgerEntry | None] = [None] * (last - first + 1)
        if metadata.write_quorum_size == E:
            # Every bookie holds every entry: each reads a contiguous share (sequential on its disk).
            share = -(-(last - first + 1) // E)
            plan = [(i, first + i * share, min(last, first + (i + 1) * share - 1), 0, 0)
                    for i in range(E) if first + i * share <= last]
        else:
            # Striped: each bookie sends the entries it is first in the write set for.
            plan = [(i, first, last, E, i) for i in range(E)]
        # Bookie i's share has the write set of entry i (striped: every entry of it; WQ == E: every bookie
        # holds it all): what a bookie did not send is range-read from the next bookie of that write set.
        orders = {i: self._in_read_order(write_set(i, E, metadata.write_quorum_size), ensemble) for i, *_ in plan}
        failed: set[str] = set()
        for k in range(metadata.write_quorum_size):
            jobs = {}
            for i, a, b, stride, offset in plan:
                share_ids = range(a + (offset - a) % stride, b + 1, stride) if stride else range(a, b + 1)
                todo = [e for e in share_ids if result[e - first] is None]
                if todo:
                    bookie, stream = ensemble[orders[i][k]], _Stream()
                    jobs[self.bk.executor.submit(self._stream_from, bookie, todo[0], todo[-1], stride, offset,
                                                 result, first, stream)] = (bookie, stream)
            if not jobs:
                break
            failed |= self._await_streams(jobs)
        lid = self.ledger.ledger_id
        for k, entry in enumerate(result):
            if entry is None:  # on no replica in one piece: entry by entry, which tells absence from failure
                entry_id = first + k
                result[k] = LedgerEntry(lid, entry_id, self.read_entry(metadata, entry_id, skip=tuple(failed)))
        return result

    def _await_streams(self, jobs: dict) -> set[str]:
        """Wait for a round of range reads (job -> (bookie, _Stream)); a stream silent for ``readTimeout``
        is given up on. Returns the bookies that failed or were given up on."""
        failed: set[str] = set()
        silent_for = self.conf.readTimeout
        pending = dict(jobs)
        while pending:
            heard = [stream.heard for _, stream in pending.values() if stream.heard is not None]
            wait = max(0.0, min(heard) + silent_for - time.monotonic()) if heard else silent_for
            done, _ = cf.wait(pending, timeout=wait, return_when=cf.FIRST_COMPLETED)
            for job in done:
                bookie, _ = pending.pop(job)
                if job.result():
                    failed.add(bookie)
            for job, (bookie, stream) in list(pending.items()):
                if stream.abandon(silent_for):  # its thread ends with the stream's own deadline
                    del pending[job]
                    failed.add(bookie)
                    self._read_failed(bookie)
                    log.warning("ledger %s: bookie %s sent nothing for readTimeout %.1f s; reading its entries "
                                "from the other replicas", self.ledger, bookie, silent_for)
        return failed

    def _stream_from(self, bookie: str, first: int, last: int, stride: int, offset: int, result: list,
                     base: int, stream: _Stream | None = None) -> str | None:
        """Put the entries of ``[first, last]`` with ``e % stride == offset`` from one bookie into
        ``result[e - base]`` (verified); returns what went wrong, if anything. Once ``stream`` is
        abandoned nothing more is placed."""
        if stream is not None:
            stream.heard = time.monotonic()  # started: silence counts from now
        try:
            for message in self.bk.bookie_client(bookie).read_entries(
                    self.ledger, first, last, self.conf.readBatchBytes, stride if stride > 1 else 0, offset,
                    timeout=self.conf.readTimeout * 12):
                if message.status != status.EOK:
                    return f"{status.name_of(message.status)} {message.message}"
                if stream is None:
                    with gc_paused():  # thousands of entries per message: see bookie/util/gc_pause.py
                        self._place(message.entries, bookie, first, last, result, base)
                    continue
                with stream.lock:
                    if stream.abandoned:
                        return "given up on: silent for readTimeout"
                    stream.heard = time.monotonic()
                    with gc_paused():
                        self._place(message.entries, bookie, first, last, result, base)
                    stream.heard = time.monotonic()
        except BKException as exc:  # a bookie failure or a bad copy (BKDigestMatchException)
            if not isinstance(exc, BKDigestMatchException) and not (stream is not None and stream.abandoned):
                self._read_failed(bookie)
            return str(exc)
        return None

    def _place(self, blob: bytes, bookie: str, first: int, last: int, result: list, base: int) -> None:
        """The verified entries of one range-read message, each at ``result[e - base]`` if in ``[first, last]``."""
        run = False
        blob = bytes(blob)  # (no copy when it is bytes already, as gRPC and protobuf give it)
        try:  # the whole message checked at once (numpy); each payload then cut out of it once
            ids, starts, ends, bad = self.digest.verify_spans(blob)
        except BKDigestMatchException:  # a frame cut short or of another ledger: entry by entry
            verified = self.digest.verify_frames(blob)
            bad = [entry_id for entry_id, payload in verified if payload is None]
            ids = [entry_id for entry_id, payload in verified if payload is not None]
            payloads = [payload for _, payload in verified if payload is not None]
        else:
            step = int(ids[1] - ids[0]) if len(ids) > 1 else 1
            run = len(ids) > 0 and step > 0 and first <= ids[0] and ids[-1] <= last \
                and bool((np.diff(ids) == step).all())
            ids = ids.tolist()
            payloads = map(blob.__getitem__, map(slice, starts.tolist(), ends.tolist()))
        for entry_id in bad:
            log.warning("ledger %s entry %d from bookie %s failed its digest check; reading it from "
                        "another replica", self.ledger, entry_id, bookie)
        entries = map(_new_entry, repeat(LedgerEntry), zip(repeat(self.ledger.ledger_id), ids, payloads))
        if run:  # every entry, or every stride-th, from ids[0] to ids[-1]: one slice of the result
            result[ids[0] - base: ids[-1] - base + 1: step] = list(entries)
            return
        for entry in entries:
            if first <= entry.entry_id <= last:
                result[entry.entry_id - base] = entry

    # -- recovery reads ------------------------------------------------------------------------------
    def recovery_scan(self, metadata: LedgerMetadata, first: int, count: int) -> tuple[list[bytes], bool]:
        """Entries from ``first`` on, in order, until one is known missing (WQ-AQ+1 bookies of its write
        set say so): (payloads, reached_end). Any other failure raises: recovery never truncates a
        ledger because a bookie could not answer.
        """
        ensemble = list(metadata.last_ensemble)
        E, WQ, AQ = len(ensemble), metadata.write_quorum_size, metadata.ack_quorum_size
        last = first + count - 1
        jobs = [self.bk.executor.submit(self._scan_bookie, bookie, first, last) for bookie in ensemble]
        answers = [job.result() for job in jobs]  # per bookie: (frames by id, covered up to, error)
        out: list[bytes] = []
        for entry_id in range(first, last + 1):
            ws = write_set(entry_id, E, WQ)
            payload, no_entry, problems = None, 0, []
            for i in ws:
                frames, covered, error = answers[i]
                frame = frames.get(entry_id)
                if frame is not None:
                    try:
                        payload = self.digest.verify(frame, entry_id)[1].tobytes()
                        break
                    except BKDigestMatchException as exc:
                        problems.append(f"{ensemble[i]}: {exc}")
                elif covered >= entry_id:
                    no_entry += 1
                else:
                    problems.append(f"{ensemble[i]}: {error or 'did not answer'}")
            if payload is not None:
                out.append(payload)
            elif no_entry >= WQ - AQ + 1:
                return out, True
            else:
                raise BKLedgerRecoveryException(
                    f"recovery of ledger {self.ledger} cannot tell whether entry {entry_id} exists "
                    f"({no_entry} of {WQ} bookies say it does not, need {WQ - AQ + 1}; {'; '.join(problems)})")
        return out, False

    def _scan_bookie(self, bookie: str, first: int, last: int):
        frames: dict[int, bytes] = {}
        covered = first - 1
        try:
            for message in self.bk.bookie_client(bookie).read_entries(self.ledger, first, last, self.conf.readBatchBytes,
                                                                       timeout=self.conf.readTimeout * 12):
                if message.status in NO_ENTRY:
                    return frames, last, None
                if message.status != status.EOK:
                    return frames, covered, f"{status.name_of(message.status)} {message.message}"
                for frame in entry_format.iter_frames(message.entries):
                    frames[entry_format.peek_ids(frame, 0)[2]] = bytes(frame)
                covered = message.lastEntryIdCovered
        except BKException as exc:
            return frames, covered, str(exc)
        return frames, covered, None

    # -- last add confirmed --------------------------------------------------------------------------
    def read_last_confirmed(self, metadata: LedgerMetadata, fence: bool = False, master_key: bytes = b"") -> LastConfirmed:
        """The LAC by quorum coverage over the last ensemble (fencing it first when ``fence``)."""
        ensemble = list(metadata.last_ensemble)
        E, WQ, AQ = len(ensemble), metadata.write_quorum_size, metadata.ack_quorum_size
        if fence:
            futures = [self.bk.bookie_client(b).read_entry_async(self.ledger, -1, fence=True, master_key=master_key,
                                                                  timeout=self.conf.readTimeout) for b in ensemble]
        else:
            futures = [self.bk.executor.submit(self.bk.bookie_client(b).read_lac, self.ledger) for b in ensemble]
        best = LastConfirmed(-1, 0)
        known: set[int] = set()
        problems = []
        for i, future in enumerate(futures):
            try:
                response = future.result()
            except BKException as exc:
                problems.append(f"{ensemble[i]}: {exc}")
                continue
            if response.status == status.EUA:
                raise BKUnauthorizedAccessException(f"bookie {ensemble[i]} refused the password of ledger {self.ledger}")
            if response.status in NO_ENTRY:
                known.add(i)
                continue
            if response.status != status.EOK:
                problems.append(f"{ensemble[i]}: {status.name_of(response.status)} {response.message}")
                continue
            try:
                for candidate in self._lacs_of(response, fence):
                    if candidate.lac > best.lac:
                        best = candidate
                known.add(i)
            except BKDigestMatchException as exc:
                problems.append(f"{ensemble[i]}: {exc}")
        if not is_covered(known, E, WQ, AQ):
            raise BKLedgerRecoveryException(
                f"{'fencing' if fence else 'reading the LAC of'} ledger {self.ledger}: too few bookies of "
                f"{', '.join(ensemble)} answered to cover every write quorum ({'; '.join(problems)})")
        return best

    def _lacs_of(self, response, fenced_read: bool) -> list[LastConfirmed]:
        bodies = [response.body] if fenced_read else [response.lastEntryBody]
        out = []
        for body in bodies:
            if body:
                header, _ = self.digest.verify(body)
                out.append(LastConfirmed(header.last_add_confirmed, 0))
        if not fenced_read and response.lacBody:
            out.append(LastConfirmed(self.digest.verify_lac(response.lacBody), 0))
        return out
