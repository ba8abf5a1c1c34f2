"""What a read task receives (Spark InputPartitions): a slice of one fragment, and the packed partition of
many slices that one bookie serves.

A ``FragmentMemberPartition`` carries what reading a fragment needs and no more (ledger, the fragment's
ensemble, write quorum, digest type, log and segment): a task never needs a ledger's metadata. A
``PackedPartition`` is a table of numbers over shared kinds and is pickled as that table's bytes and the
kinds its rows use; its task reads it as ``SliceColumns``: a packed partition of many small ledgers holds
thousands of slices, and objects cost the planner and every task far more than arrays
(spark_bookkeeper/reader.py plans them, spark_bookkeeper/packed_read.py reads them).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
from pyspark.sql.datasource import InputPartition

from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BookieServiceInfo
from bookie.proto.checksum import DigestType
from bookie.util.gc_pause import gc_paused


@dataclass
class FragmentMemberPartition(InputPartition):
    """Entries ``first..last`` of one fragment of ``ledger`` read from ``ensemble[member]``: all of them
    (``striped`` false: WQ == E) or those it is first in the write set for (``e % E == member``). It carries
    what a task needs of the ledger's metadata (the fragment's ensemble, ``write_quorum``, ``digest_type``)
    and no more; ``services``: the registrations of (at least) the ensemble's bookies, so the executor
    picks each bookie's transport; ``log`` and ``segment``: the log segment it is, for a log read."""

    ledger: LedgerId
    ensemble: tuple[str, ...]
    member: int
    first: int
    last: int
    write_quorum: int
    digest_type: DigestType
    services: dict[str, BookieServiceInfo | None]
    striped: bool
    log: str | None
    segment: int | None

    def __init__(self, ledger: LedgerId, ensemble, member: int, first: int, last: int, *, write_quorum: int,
                 digest_type: DigestType, services: dict[str, BookieServiceInfo | None], striped: bool = True,
                 log: str | None = None, segment: int | None = None):
        super().__init__(None)
        self.ledger, self.ensemble, self.member, self.first, self.last = ledger, tuple(ensemble), member, first, last
        self.write_quorum, self.digest_type, self.services, self.striped = write_quorum, digest_type, services, striped
        self.log, self.segment = log, segment
        self.stride = stride_of(self.ensemble, striped)

    @property
    def bookie(self) -> str:
        return self.ensemble[self.member]

    def __reduce__(self):  # a plain tuple, rebuilt without __init__
        return fragment_member_partition, (self.ledger, self.ensemble, self.member, self.first, self.last,
                                            self.write_quorum, self.digest_type, self.services, self.striped,
                                            self.log, self.segment)


def stride_of(ensemble: tuple[str, ...], striped: bool) -> int:
    """Every ``stride``-th entry from ``member`` is a slice's (0: every entry of its range)."""
    return len(ensemble) if striped and len(ensemble) > 1 else 0


def fragment_member_partition(ledger, ensemble, member, first, last, write_quorum, digest_type, services, striped,
                               log_name, segment) -> FragmentMemberPartition:
    """A FragmentMemberPartition without ``__init__`` (a plan or a packed partition makes thousands)."""
    p = object.__new__(FragmentMemberPartition)
    p.__dict__ = {"value": None, "ledger": ledger, "ensemble": ensemble, "member": member, "first": first, "last": last,
                  "write_quorum": write_quorum, "digest_type": digest_type, "services": services, "striped": striped,
                  "log": log_name, "segment": segment, "stride": stride_of(ensemble, striped)}
    return p


# What a packed partition holds of each slice, as plain tuples (a plan of many small ledgers makes tens of
# thousands, and objects cost the planner and every task far more than tuples and arrays):
# a kind, shared by many slices: (ensemble, write quorum, digest type, striped, log, the ensemble's services);
# a row per slice: (kind index, scope id, ledger id, first, last, member, segment or -1).
SliceKind = tuple
SliceRow = tuple
ROW = 7  # numbers a slice row holds


class SliceKinds:
    """A plan's slice kinds, each once (``kinds``), and each kind's index."""

    def __init__(self):
        self.kinds: list[SliceKind] = []
        self._index: dict[tuple, int] = {}

    def index(self, ensemble, write_quorum: int, digest_type: DigestType, striped: bool, log: str | None,
              services: Callable[[], dict[str, BookieServiceInfo | None]]) -> int:
        """The kind's index; a new kind takes ``services()`` (the ensemble's registrations)."""
        key = (ensemble, write_quorum, digest_type, striped, log)
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self.kinds)
            self.kinds.append(key + (services(),))
        return k


@dataclass(frozen=True)
class SliceColumns:
    """Slices of one bookie as columns (row k: slice k): what a task asks the bookie for in one call and sorts
    the answer by, without an object per slice. ``strides`` as ``FragmentMemberPartition.stride``; ``digests``:
    each slice's DigestType value; ``segments``: -1 where a slice is no log segment. Made by
    ``PackedPartition.columns``."""

    scopes: np.ndarray
    ledgers: np.ndarray
    firsts: np.ndarray
    lasts: np.ndarray
    members: np.ndarray
    strides: np.ndarray
    segments: np.ndarray
    digests: np.ndarray

    def __len__(self) -> int:
        return len(self.ledgers)

    def ledger(self, k: int) -> LedgerId:
        return LedgerId(int(self.scopes[k]), int(self.ledgers[k]))


# The head of a read (partition 0's, read first): per ledger, in the read's order, the slices of its first entries.
Head = tuple[tuple[FragmentMemberPartition, ...], ...]


class PackedPartition(InputPartition):
    """Slices (each read and read around exactly as a FragmentMemberPartition on its own) that one bookie
    serves, read in turn by one task over one set of connections. Held as a table of numbers (``table``:
    one row per slice, ROW columns) over shared kinds (``kinds`` may hold more than the rows use: the plan's,
    shared by its partitions), and sent to the task as that table's bytes and the kinds its rows use
    (``__reduce__``). The task reads the share as ``columns()`` and makes a slice object (``slice``) only for
    a slice the bookie did not serve whole.

    The first partition of a batch read may also carry the read's ``head``: its first entries, as the slices of
    every bookie that holds them (a striped fragment's members), grouped per ledger. The task reads them first
    and hands them over in entry order (what ``show()`` and ``take(n)`` see first); the table holds none of them."""

    def __init__(self, kinds: list[SliceKind], rows, head: Head = ()):
        super().__init__(None)
        self.kinds = kinds
        self.table = np.asarray(rows, dtype=np.int64).reshape(-1, ROW)
        self.head = head

    @classmethod
    def of(cls, slices) -> "PackedPartition":
        """The packed partition of these FragmentMemberPartitions."""
        kinds = SliceKinds()
        rows = [(kinds.index(p.ensemble, p.write_quorum, p.digest_type, p.striped, p.log, lambda p=p: p.services),
                 p.ledger.scope_id, p.ledger.ledger_id, p.first, p.last, p.member, -1 if p.segment is None else p.segment)
                for p in slices]
        return cls(kinds.kinds, rows)

    def __len__(self) -> int:
        return len(self.table)

    def slice(self, k: int) -> FragmentMemberPartition:
        kind, scope, lid, first, last, member, segment = self.table[k].tolist()
        ensemble, write_quorum, digest_type, striped, log_name, services = self.kinds[kind]
        return fragment_member_partition(LedgerId(scope, lid), ensemble, member, first, last, write_quorum, digest_type,
                                         services, striped, log_name, None if segment < 0 else segment)

    @cached_property
    def slices(self) -> tuple[FragmentMemberPartition, ...]:
        """Every slice it reads: the head's, then the table's."""
        with gc_paused():  # thousands of slices
            return tuple(p for group in self.head for p in group) + tuple(self.slice(k) for k in range(len(self.table)))

    def columns(self) -> SliceColumns:
        kinds = self.table[:, 0]
        per_kind = np.array([(stride_of(k[0], k[3]), int(k[2])) for k in self.kinds], dtype=np.int64).reshape(-1, 2)
        t = self.table
        return SliceColumns(t[:, 1], t[:, 2], t[:, 3], t[:, 4], t[:, 5], per_kind[kinds, 0], t[:, 6], per_kind[kinds, 1])

    def services(self) -> dict[str, BookieServiceInfo | None]:
        """The registrations of every bookie its slices' ensembles hold."""
        out: dict[str, BookieServiceInfo | None] = {}
        for k in np.unique(self.table[:, 0]).tolist():
            out.update(self.kinds[k][5])
        for group in self.head:
            for p in group:
                out.update(p.services)
        return out

    @property
    def bookie(self) -> str:
        kind, member = int(self.table[0, 0]), int(self.table[0, 5])
        return self.kinds[kind][0][member]

    def with_head(self, head: Head) -> "PackedPartition":
        """This partition with ``head`` read first."""
        return PackedPartition(self.kinds, self.table, head)

    def __repr__(self) -> str:
        head = f"a head of {sum(map(len, self.head))} slices, " if self.head else ""
        return f"PackedPartition({head}{len(self.table)} slices{f' from {self.bookie}' if len(self.table) else ''})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PackedPartition) and self.slices == other.slices

    def __reduce__(self):
        used, local = np.unique(self.table[:, 0], return_inverse=True)  # the plan's kinds -> this partition's
        table = self.table.copy()
        table[:, 0] = local.reshape(-1)
        return _packed_partition, ([self.kinds[k] for k in used.tolist()], table.tobytes(), self.head)


def _packed_partition(kinds: list[SliceKind], table: bytes, head: Head = ()) -> PackedPartition:
    return PackedPartition(kinds, np.frombuffer(table, dtype=np.int64), head)
