"""What a read task receives (Spark InputPartitions): a slice of one fragment, and the packed partition of
many slices that one bookie serves.

A ``FragmentMemberPartition`` carries what reading a fragment needs and no more (ledger, the fragment's
ensemble, write quorum, digest type, log and segment): a task never needs a ledger's metadata. A
``PackedPartition`` is rows over shared kinds and is pickled as one array of numbers and the kinds its rows
use: a packed partition of many small ledgers holds thousands of slices, and objects cost the planner and
every task far more to pickle than an array (spark_bookkeeper/reader.py plans them).
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

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
_ROW = 7


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


class PackedPartition(InputPartition):
    """Slices (each read and read around exactly as a FragmentMemberPartition on its own) that one bookie
    serves, read in turn by one task over one set of connections. Held as rows over shared kinds (``kinds``
    may hold more than the rows use: the plan's, shared by its partitions), and sent to the task as one
    array of numbers and the kinds its rows use (``__reduce__``); the task makes its ``slices``."""

    def __init__(self, kinds: list[SliceKind], rows: list[SliceRow]):
        super().__init__(None)
        self.kinds, self.rows = kinds, rows

    @classmethod
    def of(cls, slices) -> "PackedPartition":
        """The packed partition of these FragmentMemberPartitions."""
        kinds = SliceKinds()
        rows = [(kinds.index(p.ensemble, p.write_quorum, p.digest_type, p.striped, p.log, lambda p=p: p.services),
                 p.ledger.scope_id, p.ledger.ledger_id, p.first, p.last, p.member, -1 if p.segment is None else p.segment)
                for p in slices]
        return cls(kinds.kinds, rows)

    @cached_property
    def slices(self) -> tuple[FragmentMemberPartition, ...]:
        kinds = self.kinds
        with gc_paused():  # thousands of slices
            return tuple(fragment_member_partition(LedgerId(scope, lid), kinds[k][0], member, first, last, kinds[k][1],
                                                    kinds[k][2], kinds[k][5], kinds[k][3], kinds[k][4],
                                                    None if segment < 0 else segment)
                         for k, scope, lid, first, last, member, segment in self.rows)

    @property
    def bookie(self) -> str:
        row = self.rows[0]
        return self.kinds[row[0]][0][row[5]]

    def __repr__(self) -> str:
        return f"PackedPartition({len(self.rows)} slices from {self.bookie})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PackedPartition) and self.slices == other.slices

    def __reduce__(self):
        used: dict[int, int] = {}  # the plan's kind -> this partition's
        numbers = []
        for row in self.rows:
            k = used.get(row[0])
            if k is None:
                k = used[row[0]] = len(used)
            numbers.append(k)
            numbers += row[1:]
        return _packed_partition, ([self.kinds[k] for k in used], array("q", numbers))


def _packed_partition(kinds: list[SliceKind], numbers: array) -> PackedPartition:
    flat = numbers.tolist()
    return PackedPartition(kinds, list(zip(*[iter(flat)] * _ROW)))
