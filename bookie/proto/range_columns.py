"""The ranges of a ReadEntriesOfLedgers call as columns (ReadRangesRequest's packed fields).

A Spark task that packs many small ledgers asks one bookie for tens of thousands of ranges at once.
As ``ReadRangeRequest`` messages each range costs the client an object to build and the bookie an
object to parse and check; as six packed columns both sides handle arrays, and the bookie checks them
all with a few numpy comparisons. The bookie still takes ranges as messages (``ranges``), from older
clients and the Auditor's probes: ``RangeColumns.of_request`` reads either form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.proto import bookkeeper_pb2 as pb

_COLUMNS = ("scopes", "ledgers", "firsts", "lasts", "strides", "offsets")
_FIELDS = ("ledgerScopeIds", "ledgerIds", "firstEntryIds", "lastEntryIds", "strides", "offsets")
_RANGE_FIELDS = ("ledgerScopeId", "ledgerId", "firstEntryId", "lastEntryId", "stride", "offset")


@dataclass(frozen=True)
class RangeColumns:
    """Range k reads entries ``firsts[k]..lasts[k]`` of ledger ``(scopes[k], ledgers[k])`` with
    ``e % strides[k] == offsets[k]`` (stride 0: every entry). All int64 arrays of one length."""

    scopes: np.ndarray
    ledgers: np.ndarray
    firsts: np.ndarray
    lasts: np.ndarray
    strides: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, scopes, ledgers, firsts, lasts, strides=None, offsets=None) -> "RangeColumns":
        """Columns of equal length (array-likes; None: all 0)."""
        ledgers = np.asarray(ledgers, dtype=np.int64)
        zeros = np.zeros(len(ledgers), dtype=np.int64)
        return cls(*(zeros if c is None else np.asarray(c, dtype=np.int64)
                     for c in (scopes, ledgers, firsts, lasts, strides, offsets)))

    @classmethod
    def of_request(cls, request: pb.ReadRangesRequest) -> "RangeColumns":
        """The request's ranges, from its messages or its columns; ValueError naming what does not fit."""
        if len(request.ranges):
            if any(len(getattr(request, name)) for name in _FIELDS):
                raise ValueError("a ReadRangesRequest has its ranges as messages or as columns, not both")
            rows = np.array([[getattr(r, name) for name in _RANGE_FIELDS] for r in request.ranges], dtype=np.int64)
            return cls(*rows.T.copy())
        columns = {name: np.array(getattr(request, name), dtype=np.int64) for name in _FIELDS}
        n = len(columns["ledgerIds"])
        for name, column in columns.items():
            if len(column) != n and not (len(column) == 0 and name in ("ledgerScopeIds", "strides", "offsets")):
                raise ValueError(f"column {name} has {len(column)} values, ledgerIds {n} (every column has one "
                                 "value per range; ledgerScopeIds, strides and offsets may be empty: all 0)")
            if not len(column):
                columns[name] = np.zeros(n, dtype=np.int64)
        return cls(*columns.values())

    def request(self, max_bytes: int = 0) -> pb.ReadRangesRequest:
        """The ReadRangesRequest with these ranges as columns (the all-0 ones left empty)."""
        request = pb.ReadRangesRequest(maxBytesPerMessage=max_bytes)
        for name, field in zip(_COLUMNS, _FIELDS):
            column = getattr(self, name)
            if name in ("ledgers", "firsts", "lasts") or column.any():
                getattr(request, field).extend(column.tolist())
        return request

    def __len__(self) -> int:
        return len(self.ledgers)

    def __getitem__(self, rows: slice) -> "RangeColumns":
        return RangeColumns(*(getattr(self, name)[rows] for name in _COLUMNS))

    def row(self, k: int) -> pb.ReadRangeRequest:
        """Range ``k`` as the message a ReadEntries call takes."""
        return pb.ReadRangeRequest(**{field: int(getattr(self, name)[k]) for name, field in zip(_COLUMNS, _RANGE_FIELDS)})

    def lists(self) -> tuple[list[int], ...]:
        """The six columns as lists of ints (for a loop over ranges: an int from a list costs far less than one
        from an array)."""
        return tuple(getattr(self, name).tolist() for name in _COLUMNS)
