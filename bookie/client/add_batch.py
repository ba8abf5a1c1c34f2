"""From appended payloads to what each bookie stores: pieces that fit one add message, framed
entries, and the per-bookie parts of a striped run of entries (RoundRobinDistributionSchedule).

The writer frames with ``view=True``: a batch framed by columns stays a read-only view of numpy's buffer,
as do the per-bookie parts of entries of one size (``read_only_view``); the transport copies them once, into
the add message.

Pure: no I/O and no locks, so the writer's arithmetic is tested without processes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.client.conf import ClientConfiguration
from bookie.exceptions import BKIncorrectParameterException
from bookie.proto import entry_format
from bookie.proto.checksum import DigestManager
from bookie.proto.columnar_framing import PayloadColumn, payload_sizes, read_only_view

# Room an AddRequest needs around its entries (ids, master key, flags): what is left of the bookie's
# largest message (nettyMaxFrameSizeBytes) carries the framed entries.
ADD_REQUEST_RESERVE = 1024
_PAYLOAD_TYPES = (bytes, bytearray, memoryview)  # what a payload may be
_PAYLOAD_TYPE_SET = frozenset(_PAYLOAD_TYPES)


@dataclass(frozen=True)
class AddMessageLimits:
    """How much one add message carries: at most ``max_entries`` entries (maxBatchEntries) whose frames
    fit in ``entry_bytes`` (nettyMaxFrameSizeBytes less ADD_REQUEST_RESERVE, 1 KiB for the request's ids,
    master key and flags); every entry costs ``entry_overhead`` bytes besides its payload."""

    netty_max_frame_size: int  # nettyMaxFrameSizeBytes, the largest message a bookie takes
    max_entries: int
    entry_overhead: int  # entry frame header, digest header and MAC

    @classmethod
    def of(cls, conf: ClientConfiguration, digest: DigestManager) -> AddMessageLimits:
        return cls(conf.nettyMaxFrameSizeBytes, conf.maxBatchEntries,
                   entry_format.FRAME_LEN + digest.header_len + digest.mac_length)

    @property
    def entry_bytes(self) -> int:
        """Room for framed entries in one add message."""
        return self.netty_max_frame_size - ADD_REQUEST_RESERVE

    @property
    def max_payload(self) -> int:
        """The largest payload an entry may have: alone, it fills one add message."""
        return self.entry_bytes - self.entry_overhead

    def pieces(self, ledger, payloads: list) -> list[int]:
        """Where to cut ``payloads`` so that each piece fits one add message: piece k is
        ``payloads[cuts[k]:cuts[k + 1]]``. Checks every payload first, so a bad one is refused before
        any entry id is taken."""
        overhead, budget, max_entries = self.entry_overhead, self.entry_bytes, self.max_entries
        max_payload = budget - overhead
        if isinstance(payloads, PayloadColumn):
            return self._column_pieces(ledger, payloads.sizes)
        if 0 < len(payloads) <= max_entries and set(map(type, payloads)) <= _PAYLOAD_TYPE_SET:
            # The usual batch, checked at C speed: all of it fits one add message.
            sizes = list(map(len, payloads))
            if max(sizes) <= max_payload and sum(sizes) + overhead * len(sizes) <= budget:
                return [0, len(payloads)]
        cuts, size, count = [0], 0, 0
        for k, payload in enumerate(payloads):
            if not isinstance(payload, _PAYLOAD_TYPES):
                raise BKIncorrectParameterException(f"ledger {ledger}: a payload is bytes, not {type(payload).__name__}")
            n = len(payload)
            if n > max_payload:
                raise self._too_large(ledger, n)
            if count and (count == max_entries or size + n + overhead > budget):
                cuts.append(k)
                size = count = 0
            size += n + overhead
            count += 1
        cuts.append(len(payloads))
        return cuts

    def _column_pieces(self, ledger, sizes: np.ndarray) -> list[int]:
        """``pieces`` of a ``PayloadColumn``: the same cuts, each found by a search of the running sizes."""
        if len(sizes) and int(sizes.max()) > self.max_payload:
            raise self._too_large(ledger, int(sizes.max()))
        ends = np.cumsum(sizes + self.entry_overhead)  # bytes of entries 0..k framed
        cuts = [0]
        while cuts[-1] < len(sizes):
            start = cuts[-1]
            before = int(ends[start - 1]) if start else 0
            fit = int(np.searchsorted(ends, before + self.entry_bytes, side="right"))  # entries start..fit-1 fit
            cuts.append(min(fit, start + self.max_entries, len(sizes)))
        return cuts

    def _too_large(self, ledger, size: int) -> BKIncorrectParameterException:
        return BKIncorrectParameterException(
            f"ledger {ledger}: an entry of {size} bytes is larger than a bookie takes: at most "
            f"{self.max_payload} bytes fit in one add message (nettyMaxFrameSizeBytes = "
            f"{self.netty_max_frame_size}); split the payload, or raise nettyMaxFrameSizeBytes on the "
            "bookies and this client alike")


def frame_and_stripe(digest: DigestManager, first: int, lac: int, length: int, payloads: list,
                     write_sets: list[tuple[int, ...]]) -> tuple[dict[int, bytes], tuple[tuple[int, ...], ...], int]:
    """``payloads`` framed as entries ``first..`` carrying ``lac`` (into one buffer: one copy of each
    payload) and split by bookie (``stripe``); returns the parts, the write sets, and the ledger's length
    through the last entry. When every bookie stores every entry they share the one buffer."""
    E, n = len(write_sets), len(payloads)
    if n > 1 and len(write_sets[0]) < E:
        sizes = payload_sizes(payloads)  # once, for the framing and the striping
        blob, length = digest.build_framed(first, lac, length, payloads, sizes, view=True)
        overhead = entry_format.FRAME_LEN + digest.header_len + digest.mac_length
        parts, quorums = stripe(first, blob, sizes + overhead, write_sets)
        return parts, quorums, length
    blob, length = digest.build_framed(first, lac, length, payloads, view=True)
    quorums = write_sets_used(first, n, write_sets)
    return {i: blob for i in (quorums[0] if n == 1 else range(E))}, quorums, length


def write_sets_used(first: int, count: int, write_sets: list[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The distinct write sets of entries ``first..first + count - 1``, each needing AQ acks
    (``write_sets[r]`` is the write set of the entries ``e`` with ``e mod E == r``)."""
    E = len(write_sets)
    return tuple(write_sets[r] for r in sorted({e % E for e in range(first, first + min(count, E))}))


def stripe(first: int, blob: bytes, frame_sizes: np.ndarray, write_sets: list[tuple[int, ...]]
           ) -> tuple[dict[int, bytes], tuple[tuple[int, ...], ...]]:
    """What each bookie stores of entries ``first..``, framed back to back in ``blob`` (``frame_sizes``
    bytes each), and the write sets they use: ``parts`` maps a bookie index to its entries' frames in
    entry order, copied out of the one buffer (as the rows of a matrix when all have one size)."""
    E, n = len(write_sets), len(frame_sizes)
    residues = np.arange(first, first + n, dtype=np.int64) % E
    quorums = write_sets_used(first, n, write_sets)
    uniform = bool((frame_sizes == frame_sizes[0]).all())
    if uniform:
        rows = np.frombuffer(blob, dtype=np.uint8).reshape(n, int(frame_sizes[0]))
    else:
        view, ends = memoryview(blob), np.cumsum(frame_sizes)
        starts = ends - frame_sizes
    parts = {}
    for i in sorted({i for ws in quorums for i in ws}):
        stored = np.array([i in ws for ws in write_sets])[residues]  # entry k is on bookie i: by its residue
        if uniform:
            parts[i] = read_only_view(rows[stored])  # boolean indexing copied already: not copied again
        else:
            parts[i] = b"".join(map(view.__getitem__, map(slice, starts[stored].tolist(), ends[stored].tolist())))
    return parts, quorums
