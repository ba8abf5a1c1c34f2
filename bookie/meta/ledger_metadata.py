"""Ledger metadata (LedgerMetadata) and its znode format (LedgerMetadataSerDe).

Written as format version 3: ``"BookieMetadataFormatVersion\\t3\\n"`` + a varint-length-delimited
binary ``LedgerMetadataFormat``. Version 2 (the same message in protobuf text format) is read too.
"""
from __future__ import annotations

import enum
import random
import sys
import time
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

from google.protobuf import text_format
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes

from bookie.proto.checksum import DigestType
from bookie.proto.data_formats_pb2 import LedgerMetadataFormat

HEADER_PREFIX = b"BookieMetadataFormatVersion\t"
CURRENT_FORMAT_VERSION = 3


class LedgerState(enum.IntEnum):
    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


@dataclass(frozen=True)
class LedgerMetadata:
    """One ledger's metadata. Immutable: updates make a new record (``with_*``), written by CAS."""

    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]  # (first entry id, bookie ids), by first entry
    password: bytes
    digest_type: DigestType = DigestType.CRC32C
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    ctime: int = field(default_factory=lambda: int(time.time() * 1000))
    custom_metadata: tuple[tuple[str, bytes], ...] = ()
    ctoken: int = field(default_factory=lambda: random.getrandbits(63))

    def __reduce__(self):
        # Pickled as a plain tuple (Spark ships thousands per task): no enum constructor calls, no dict.
        return _unpickle_metadata, (self.ensemble_size, self.write_quorum_size, self.ack_quorum_size, self.ensembles,
                                    self.password, int(self.digest_type), int(self.state), self.last_entry_id,
                                    self.length, self.ctime, self.custom_metadata, self.ctoken)

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        return self.ensembles[-1][1]

    def ensemble_at(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble of the fragment holding ``entry_id``."""
        chosen = self.ensembles[0][1]
        for first, bookies in self.ensembles:
            if first > entry_id:
                break
            chosen = bookies
        return chosen

    def fragments(self) -> list[tuple[int, int, tuple[str, ...]]]:
        """(first entry, last entry, ensemble) of each fragment; an open ledger's last one ends at -1."""
        out = []
        for i, (first, bookies) in enumerate(self.ensembles):
            last = self.ensembles[i + 1][0] - 1 if i + 1 < len(self.ensembles) else self.last_entry_id
            out.append((first, last, bookies))
        return out

    def with_state(self, state: LedgerState, last_entry_id: int | None = None, length: int | None = None):
        return replace(self, state=state, last_entry_id=self.last_entry_id if last_entry_id is None else last_entry_id,
                       length=self.length if length is None else length)

    def with_ensemble(self, first_entry_id: int, bookies: tuple[str, ...]) -> "LedgerMetadata":
        """A new fragment from ``first_entry_id`` on (replacing one that starts there)."""
        kept = tuple(e for e in self.ensembles if e[0] < first_entry_id)
        return replace(self, ensembles=kept + ((first_entry_id, tuple(bookies)),))

    def with_recovery_ensembles(self, new: dict[int, tuple[str, ...]]) -> "LedgerMetadata":
        """The fragments a recovery started (first entry -> ensemble) applied to this, the fresh copy
        (BookKeeper's closeRecovered): one starting at the last fragment's first entry replaces that
        fragment's ensemble, later ones are appended, and no earlier fragment is touched: a replicator
        may have replaced a bookie of one meanwhile. ValueError for one that starts earlier: nobody adds
        fragments to a ledger in recovery but the recovery itself."""
        last = self.ensembles[-1][0]
        ensembles = self.ensembles
        for first, bookies in sorted(new.items()):
            if first < last:
                raise ValueError(f"a fragment from entry {first} made in recovery starts before the last fragment "
                                 f"({last}) of the metadata: the ledger was changed while it was in recovery")
            kept = ensembles[:-1] if first == ensembles[-1][0] else ensembles
            ensembles = kept + ((first, tuple(bookies)),)
        return replace(self, ensembles=ensembles)

    def custom(self) -> dict[str, bytes]:
        return dict(self.custom_metadata)


def serialize(metadata: LedgerMetadata) -> bytes:
    fmt = LedgerMetadataFormat(
        quorumSize=metadata.write_quorum_size, ensembleSize=metadata.ensemble_size, length=metadata.length,
        lastEntryId=metadata.last_entry_id, state=int(metadata.state), digestType=int(metadata.digest_type),
        password=metadata.password, ackQuorumSize=metadata.ack_quorum_size, ctime=metadata.ctime,
        cToken=metadata.ctoken)
    for first, bookies in metadata.ensembles:
        fmt.segment.add(ensembleMember=list(bookies), firstEntryId=first)
    for key, value in metadata.custom_metadata:
        fmt.customMetadata.add(key=key, value=value)
    body = fmt.SerializeToString()
    return HEADER_PREFIX + str(CURRENT_FORMAT_VERSION).encode() + b"\n" + _VarintBytes(len(body)) + body


_FIELDS = tuple(f.name for f in fields(LedgerMetadata))
_DIGESTS = {int(d): d for d in DigestType}
_STATES = {int(s): s for s in LedgerState}


def _unpickle_metadata(*values) -> LedgerMetadata:
    """A LedgerMetadata of its field values in order (the enums as their codes)."""
    md = object.__new__(LedgerMetadata)
    state = dict(zip(_FIELDS, values))
    digest, ledger_state = _DIGESTS.get(state["digest_type"]), _STATES.get(state["state"])
    if digest is None or ledger_state is None:
        raise ValueError(f"unknown digest type {state['digest_type']} or ledger state {state['state']} (digest types: "
                         f"{sorted(_DIGESTS)}, states: {sorted(_STATES)})")
    state["digest_type"], state["state"] = digest, ledger_state
    object.__setattr__(md, "__dict__", state)
    return md


_ENSEMBLES: dict[tuple[str, ...], tuple[str, ...]] = {}
_MAX_SHARED_ENSEMBLES = 65536


def _shared(ensemble: tuple[str, ...]) -> tuple[str, ...]:
    """One object per distinct ensemble: a walk of many ledgers holds (and pickles, for Spark tasks) each
    ensemble once, not once per ledger. Bounded: past the limit the table starts again."""
    found = _ENSEMBLES.get(ensemble)
    if found is None:
        if len(_ENSEMBLES) >= _MAX_SHARED_ENSEMBLES:
            _ENSEMBLES.clear()
        found = _ENSEMBLES[ensemble] = tuple(sys.intern(b) for b in ensemble)
    return found


_V3_HEADER = HEADER_PREFIX + b"3\n"


def parse(data: bytes) -> LedgerMetadata:
    """Decode a ledger znode (format versions 2 and 3); ValueError if it is neither. A walk parses every
    ledger of a cluster (10,000 in a few dozen milliseconds): the common shapes take the short ways."""
    fmt = _message(data)
    segments = fmt.segment
    if len(segments) == 1:  # most ledgers: one fragment
        ensembles = ((segments[0].firstEntryId, _shared(tuple(segments[0].ensembleMember))),)
    else:
        ensembles = tuple([(s.firstEntryId, _shared(tuple(s.ensembleMember))) for s in segments])
    custom = fmt.customMetadata
    digest, state = _digest_of(fmt), _STATES.get(fmt.state)
    if state is None:
        raise ValueError(f"unknown ledger state {fmt.state} (states: {sorted(_STATES)})")
    # Built as unpickling builds it: no frozen-dataclass __init__.
    md = object.__new__(LedgerMetadata)
    object.__setattr__(md, "__dict__", {
        "ensemble_size": fmt.ensembleSize, "write_quorum_size": fmt.quorumSize,
        "ack_quorum_size": fmt.ackQuorumSize if fmt.HasField("ackQuorumSize") else fmt.quorumSize,
        "ensembles": ensembles, "password": fmt.password, "digest_type": digest, "state": state,
        "last_entry_id": fmt.lastEntryId if fmt.HasField("lastEntryId") else -1, "length": fmt.length,
        "ctime": fmt.ctime, "custom_metadata": tuple([(m.key, m.value) for m in custom]) if len(custom) else (),
        "ctoken": fmt.cToken})
    return md


class LedgerAccess(NamedTuple):
    """What a reader must match of a ledger's metadata: its password and digest type."""
    password: bytes
    digest_type: DigestType


def parse_access(data: bytes) -> LedgerAccess:
    """A ledger znode's LedgerAccess, the rest left undecoded: a check of many ledgers (a Spark read's load())
    costs a sixth of a whole parse."""
    fmt = _message(data)
    return LedgerAccess(fmt.password, _digest_of(fmt))


def _message(data: bytes) -> LedgerMetadataFormat:
    if data.startswith(_V3_HEADER):
        size, pos = _DecodeVarint32(data, len(_V3_HEADER))
        return LedgerMetadataFormat.FromString(data[pos: pos + size])
    return _parse_other_header(data)


def _digest_of(fmt: LedgerMetadataFormat) -> DigestType:
    digest = _DIGESTS.get(fmt.digestType if fmt.HasField("digestType") else DigestType.CRC32)
    if digest is None:
        raise ValueError(f"unknown digest type {fmt.digestType} (digest types: {sorted(_DIGESTS)})")
    return digest


def _parse_other_header(data: bytes) -> LedgerMetadataFormat:
    """The message of a znode whose header is not format version 3's exact bytes (version 2, or another)."""
    if not data.startswith(HEADER_PREFIX):
        raise ValueError("ledger metadata has no BookieMetadataFormatVersion header")
    newline = data.index(b"\n")
    version = int(data[len(HEADER_PREFIX): newline])
    fmt = LedgerMetadataFormat()
    rest = data[newline + 1:]
    if version == 3:
        size, pos = _DecodeVarint32(rest, 0)
        fmt.ParseFromString(rest[pos: pos + size])
    elif version == 2:
        text_format.Parse(rest.decode(), fmt)
    else:
        raise ValueError(f"ledger metadata format version {version} is not supported (2 and 3 are)")
    return fmt
