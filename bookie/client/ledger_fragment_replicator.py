"""Copying a fragment's lost share to a replacement bookie (BookKeeper's LedgerFragmentReplicator).

For each bad bookie index of a closed fragment: a replacement (writable, not in the ensemble), the
entries that index stores by the striping, read from surviving replicas and written to the
replacement with RECOVERY_ADD exactly as stored (framed header + digest + payload: nothing is
re-encoded, and a copy whose digest fails is fetched from another replica instead), then the
fragment's ensemble entry replaced by CAS through the shared update loop, refused if another worker
changed that ensemble meanwhile.

Batches: BookKeeper reads ``rereplicationEntryBatchSize`` (10) entries at a time because it issues one
read per entry. Here one range read streams a window of entries (every entry of one stripe of the
fragment, stride E) in messages of ``readBatchBytes``, and each message goes on to the replacement
as one add message, so a batch is bounded by bytes; the window is ``maxBatchEntries`` entries (or the
configured batch size if larger), and the adds of a window are in flight together.

Metrics (LedgerFragmentReplicator's, under the worker's ``replication_worker`` scope): per range-read message
and per add, one event of its entries (NUM_ENTRIES_READ/WRITTEN, NUM_BYTES_READ/WRITTEN, READ/WRITE_DATA_LATENCY).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from bookie.client.distribution_schedule import stores, write_set
from bookie.client.ensemble_placement import replace_bookies
from bookie.client.ledger_checker import LedgerFragment
from bookie.exceptions import (BKMetadataVersionException, BKReadException, BKReplicationException,
                               BKUnrecoverableEntriesException, BKException)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata
from bookie.proto import entry_format, status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)

# ReplicationStats' names of the copies (BookKeeper's LedgerFragmentReplicator records them).
NUM_ENTRIES_READ = "NUM_ENTRIES_READ"
NUM_BYTES_READ = "NUM_BYTES_READ"
NUM_ENTRIES_WRITTEN = "NUM_ENTRIES_WRITTEN"
NUM_BYTES_WRITTEN = "NUM_BYTES_WRITTEN"
READ_DATA_LATENCY = "READ_DATA_LATENCY"
WRITE_DATA_LATENCY = "WRITE_DATA_LATENCY"


def residue_range(first: int, last: int, ensemble_size: int, residue: int) -> range:
    """The entries ``e`` of ``first .. last`` with ``e % ensemble_size == residue``."""
    return range(first + (residue - first) % ensemble_size, last + 1, ensemble_size)


def segment_ensemble(md: LedgerMetadata, first: int) -> tuple[str, ...] | None:
    """The ensemble of the segment starting at entry ``first``; None if no segment starts there."""
    return next((bookies for start, bookies in md.ensembles if start == first), None)


@dataclass
class Progress:
    """What a replication has done so far, for the state node: entries and bytes written."""
    fragment: LedgerFragment
    targets: dict[str, str]  # lost bookie -> its replacement
    entries: int = 0
    bytes: int = 0
    expected: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # stripes copy side by side

    def add(self, entries: int, size: int) -> None:
        with self.lock:
            self.entries += entries
            self.bytes += size


class LedgerFragmentReplicatorStats:
    """The copies' metrics: entries counted, their mean size and their latency per read message and per add."""

    def __init__(self, stats_logger: StatsLogger):
        self.entries_read = stats_logger.get_counter(NUM_ENTRIES_READ)
        self.bytes_read = stats_logger.get_op_stats_logger(NUM_BYTES_READ)
        self.entries_written = stats_logger.get_counter(NUM_ENTRIES_WRITTEN)
        self.bytes_written = stats_logger.get_op_stats_logger(NUM_BYTES_WRITTEN)
        self.read_latency = stats_logger.get_op_stats_logger(READ_DATA_LATENCY)
        self.write_latency = stats_logger.get_op_stats_logger(WRITE_DATA_LATENCY)

    def read(self, latency: float, entries: int, framed_bytes: int) -> None:
        if entries:
            self.entries_read.inc(entries)
            self.bytes_read.register_successful_value((framed_bytes - entry_format.FRAME_LEN * entries) / entries,
                                                      entries)
            self.read_latency.register_successful_event(latency, entries)

    def written(self, sent: float, framed_bytes: int, future) -> None:
        """An add's done callback: its entries written (EOK) or a failed write."""
        latency = time.monotonic() - sent
        try:
            response = future.result()
        except Exception:  # noqa: BLE001 - counted; the copy's own wait reports it
            self.write_latency.register_failed_event(latency)
            return
        entries = response.entryCount
        if response.status != status.EOK or not entries:
            self.write_latency.register_failed_event(latency)
            return
        self.entries_written.inc(entries)
        self.bytes_written.register_successful_value((framed_bytes - entry_format.FRAME_LEN * entries) / entries,
                                                     entries)
        self.write_latency.register_successful_event(latency, entries)


class LedgerFragmentReplicator:
    def __init__(self, bk, entry_batch_size: int = 10,
                 on_progress: Callable[[Progress], None] | None = None, stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the worker's scope (``replication_worker``)."""
        self.bk = bk
        self.stats = LedgerFragmentReplicatorStats(stats_logger)
        # Entries per range-read window: a range read costs one request whatever its size (see above).
        self.window = max(entry_batch_size, bk.conf.maxBatchEntries)
        self.on_progress = on_progress

    def choose_targets(self, ledger: LedgerId, fragment: LedgerFragment) -> tuple[str, ...]:
        """The fragment's ensemble with each bad bookie replaced (ensemble_placement: writable, not in
        the ensemble; ledgers of a non-zero scope only on gRPC bookies)."""
        writable = self.bk.writable_bookies(grpc_only=ledger.scope_id != 0)
        return tuple(replace_bookies(writable, list(fragment.ensemble), set(fragment.bad), self.bk.quarantined()))

    def replicate(self, handle, fragment: LedgerFragment, targets: tuple[str, ...] | None = None) -> Versioned[LedgerMetadata]:
        """Copy the bad bookies' shares of a closed fragment to replacements, then CAS the ensemble
        entry; returns the new metadata. BKUnrecoverableEntriesException if entries are on no
        surviving replica, BKMetadataVersionException if the ensemble changed meanwhile."""
        if not fragment.closed:
            raise BKReplicationException(f"{fragment}: the fragment is still open; fence and close the ledger first")
        md = handle.metadata
        self._ensemble_unchanged(handle.ledger, fragment, self.bk.store.read_ledger(handle.ledger).value)  # copy nothing in vain
        new_ensemble = targets or self.choose_targets(handle.ledger, fragment)
        progress = Progress(fragment, {fragment.ensemble[i]: new_ensemble[i] for i in sorted(fragment.bad)})
        E, WQ = len(fragment.ensemble), md.write_quorum_size
        # Striping repeats every E entries: the shares are counted by residue, never entry by entry.
        progress.expected = sum(len(residue_range(fragment.first, fragment.last, E, r))
                                for i in fragment.bad for r in range(E) if stores(i, r, E, WQ))
        self._check_survivors(handle.ledger, fragment, WQ)
        digest = DigestManager(handle.ledger, md.password, md.digest_type)
        master_key = generate_master_key(md.password)
        for index in sorted(fragment.bad):
            self._copy_share(handle.ledger, fragment, md, index, new_ensemble[index], digest, master_key, progress)
        return self._replace_ensemble(handle.ledger, fragment, new_ensemble)

    @staticmethod
    def _check_survivors(ledger: LedgerId, fragment: LedgerFragment, WQ: int) -> None:
        """Entries whose whole write set is lost cannot be copied: say which, before copying anything."""
        E = len(fragment.ensemble)
        orphans = [residue_range(fragment.first, fragment.last, E, r) for r in range(E)
                   if all(j in fragment.bad for j in write_set(r, E, WQ))]
        orphans = [ids for ids in orphans if len(ids)]
        if orphans:
            first, last = min(ids[0] for ids in orphans), max(ids[-1] for ids in orphans)
            raise BKUnrecoverableEntriesException(
                f"ledger {ledger}: {sum(len(ids) for ids in orphans)} entries in {first}..{last} are on no surviving "
                f"replica (write quorum {WQ}; lost: {', '.join(fragment.bad_bookies)})", first, last)

    def _copy_share(self, ledger: LedgerId, fragment: LedgerFragment, md: LedgerMetadata, index: int, target: str,
                    digest: DigestManager, master_key: bytes, progress: Progress) -> None:
        """Entries of ``fragment`` that bookie ``index`` stores, window by window, to ``target``."""
        E, WQ = len(fragment.ensemble), md.write_quorum_size
        if WQ == E:  # every bookie holds every entry: one contiguous read
            stripes = [(0, 0, fragment.ensemble)]
        else:  # one stripe per residue r (entries e % E == r share a write set, hence their sources)
            stripes = [(E, r, tuple(fragment.ensemble[j] for j in write_set(r, E, WQ)))
                       for r in sorted({(index - k) % E for k in range(WQ)})]

        def copy_stripe(stride: int, offset: int, replicas: tuple[str, ...]) -> None:
            entries = residue_range(fragment.first, fragment.last, stride, offset) if stride else \
                range(fragment.first, fragment.last + 1)
            for a in entries[::self.window]:  # windows of self.window entries of the stripe
                b = min(fragment.last, a + self.window * (stride or 1) - 1)
                self._copy_window(ledger, fragment, a, b, stride, offset, replicas, target, digest, master_key,
                                  progress)

        # The stripes come from different replicas: copied side by side (the first error is raised).
        jobs = [self.bk.executor.submit(copy_stripe, *stripe) for stripe in stripes]
        for job in jobs:
            job.result()

    def _copy_window(self, ledger: LedgerId, fragment: LedgerFragment, a: int, b: int, stride: int, offset: int,
                     replicas: tuple[str, ...], target: str, digest: DigestManager, master_key: bytes,
                     progress: Progress) -> None:
        """The entries ``a..b`` (``e % stride == offset`` when striding; ``replicas`` their write set)
        from the first surviving replica that has them, each message forwarded to ``target`` as one
        RECOVERY_ADD batch."""
        wanted = set(range(a, b + 1, stride or 1))
        lost = set(fragment.bad_bookies)
        adds = []
        errors = []
        stats = self.stats
        for source in (r for r in replicas if r not in lost):
            if not wanted:
                break
            try:
                asked = time.monotonic()
                for message in self.bk.bookie_client(source).read_entries(
                        ledger, min(wanted), max(wanted), self.bk.conf.readBatchBytes, stride, offset,
                        timeout=self.bk.conf.readTimeout * 12):
                    if message.status != status.EOK:
                        errors.append(f"{source}: {status.name_of(message.status)} {message.message}")
                        break
                    before = len(wanted)
                    blob = self._good_frames(message.entries, digest, wanted, source)
                    stats.read(time.monotonic() - asked, before - len(wanted), len(blob))
                    if blob:
                        sent = time.monotonic()
                        future = self.bk.bookie_client(target).add(ledger, master_key, blob, recovery=True)
                        future.add_done_callback(lambda f, t=sent, n=len(blob): stats.written(t, n, f))
                        adds.append((future, blob))
                    asked = time.monotonic()  # the next message's wait starts now
            except BKException as exc:
                errors.append(f"{source}: {exc}")
        self._wait_adds(ledger, target, adds, progress)
        if not wanted:
            return
        missing = sorted(wanted)
        if errors:  # some replica could not answer: the entries may still exist; try again later
            raise BKReadException(f"ledger {ledger}: entries {missing[0]}..{missing[-1]} for {target} could not be "
                                  f"read: {'; '.join(errors)}")
        raise BKUnrecoverableEntriesException(
            f"ledger {ledger}: entries {missing[0]}..{missing[-1]} ({len(missing)} entries) are on no surviving "
            f"replica (their write set: {', '.join(replicas)}; lost: {', '.join(sorted(lost & set(replicas)))})",
            missing[0], missing[-1])

    @staticmethod
    def _good_frames(blob: bytes, digest: DigestManager, wanted: set[int], source: str) -> bytes:
        """The framed entries of ``blob`` that pass their digest check and are still wanted (removed
        from ``wanted``); the blob itself when that is all of it (no copy)."""
        verified = digest.verify_frames(blob)
        if all(payload is not None and e in wanted for e, payload in verified):
            wanted.difference_update(e for e, _ in verified)
            return blob
        keep = []
        for (entry_id, payload), body in zip(verified, entry_format.iter_frames(blob)):
            if payload is None:
                log.warning("entry %d from %s failed its digest check; reading it from another replica", entry_id, source)
            elif entry_id in wanted:
                wanted.discard(entry_id)
                keep.append(body)
        return entry_format.frame(keep)

    def _wait_adds(self, ledger: LedgerId, target: str, adds, progress: Progress) -> None:
        failures = []
        for future, blob in adds:
            try:
                response = future.result(timeout=self.bk.conf.addEntryTimeout * 4)
            except Exception as exc:  # noqa: BLE001 - any failure fails this copy; the worker retries later
                failures.append(str(exc))
                continue
            if response.status != status.EOK:
                failures.append(f"{status.name_of(response.status)} {response.message}")
                continue
            progress.add(response.entryCount, len(blob))
        if failures:
            raise BKReplicationException(f"ledger {ledger}: RECOVERY_ADD to {target} failed: {'; '.join(failures)}")
        if self.on_progress is not None and adds:
            self.on_progress(progress)

    @staticmethod
    def _ensemble_unchanged(ledger: LedgerId, fragment: LedgerFragment, md: LedgerMetadata) -> None:
        """BKMetadataVersionException if the fragment's segment no longer has the ensemble it was checked on
        (another worker replaced a bookie of it)."""
        found = segment_ensemble(md, fragment.first)
        if found != fragment.ensemble:
            raise BKMetadataVersionException(
                f"ledger {ledger}: the ensemble of entries {fragment.first}.. changed meanwhile "
                f"({','.join(fragment.ensemble)} -> {','.join(found or ())}); not replacing it")

    def _replace_ensemble(self, ledger: LedgerId, fragment: LedgerFragment,
                          new_ensemble: tuple[str, ...]) -> Versioned[LedgerMetadata]:
        """CAS the segment starting at ``fragment.first`` from the old ensemble to ``new_ensemble``."""
        store = self.bk.store

        def needs_update(md: LedgerMetadata) -> bool:
            if segment_ensemble(md, fragment.first) == new_ensemble:
                return False  # ours landed (a lost reply re-read)
            self._ensemble_unchanged(ledger, fragment, md)
            return True

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            return replace(md, ensembles=tuple((first, new_ensemble if first == fragment.first else bookies)
                                               for first, bookies in md.ensembles))

        return update_ledger_metadata(store, ledger, store.read_ledger(ledger), needs_update, transform,
                                      doubt_window(self.bk.conf))
