"""What a bookie's garbage collector reports (BookKeeper's GarbageCollectionStatus, extended with what
operators ask for: per-log usage, what was reclaimed, and which logs were skipped and why).

The GarbageCollectorThread keeps one of these up to date; the bookie returns a snapshot to the
GetGarbageCollectionStatus request (``bk shell gc``, the metadata tables, the audit jobs).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bookie.ledger_id import LedgerId


@dataclass(frozen=True)
class EntryLogUsage:
    entry_log_id: int
    total_size: int
    remaining_size: int
    ledger_count: int
    ledgers: tuple[tuple[LedgerId, int], ...] = ()  # live ledgers and their bytes in the log
    removed: tuple[tuple[LedgerId, int, int], ...] = ()  # deleted ledgers still in it: bytes, GC pass that saw it

    @property
    def usage(self) -> float:
        return self.remaining_size / self.total_size if self.total_size > 0 else 0.0


@dataclass(frozen=True)
class SkippedEntryLog:
    entry_log_id: int
    path: str
    reason: str


@dataclass
class GarbageCollectionStatus:
    force_compacting: bool = False
    major_compacting: bool = False
    minor_compacting: bool = False
    major_compaction_suspended: bool = False
    minor_compaction_suspended: bool = False
    passes: int = 0                       # GC passes finished since the bookie started
    last_pass_start_ms: int = 0           # wall clock, ms since the epoch (0: no pass yet)
    last_pass_duration_ms: int = 0
    last_major_compaction_ms: int = 0
    last_minor_compaction_ms: int = 0
    major_compaction_count: int = 0       # logs compacted by major compactions
    minor_compaction_count: int = 0
    ledgers_deleted: int = 0              # ledgers whose index this bookie removed
    entry_logs_deleted: int = 0
    bytes_reclaimed: int = 0              # entry-log bytes given back (deleted logs, compaction)
    entry_logs: list[EntryLogUsage] = field(default_factory=list)
    skipped: list[SkippedEntryLog] = field(default_factory=list)  # corrupt logs left alone, last pass
    pass_running: bool = False
    phase: str = ""                       # what the running pass does now ("ledgers", "entry logs", "compacting 1f")
    phase_done: int = 0                   # progress within the phase, of phase_total
    phase_total: int = 0
