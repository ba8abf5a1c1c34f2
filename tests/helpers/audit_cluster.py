"""A cluster prepared with known facts for the audit tests: ledgers deleted with their bytes still on disk, a
planted orphan, a SIGKILLed bookie whose ledgers are marked under-replicated (AutoRecovery disabled), a ledger
whose metadata names a bookie without its entries, a ledger on one bookie, open ledgers (one silent)."""
from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass, field

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from tests.helpers.gc import forced_pass
from tests.helpers.replication import unregistered
from tests.helpers.waiting import wait_for

# Small entry logs, so ledgers written in turns share finished logs: a deleted ledger's bytes stay on disk next to
# live ones (compaction suspended), and GC records the pass that saw it deleted. No timed GC pass.
SETTINGS = {"gcWaitTime": 3_600_000, "entryLogSizeLimit": 8192}
FORCED_PASSES = 3
ORPHAN = LedgerId(0, 0x7E57_0000_0001)  # no ledger of the cluster has this id


@dataclass
class Facts:
    healthy: list[int] = field(default_factory=list)  # closed, fully replicated (some on the killed bookie)
    deleted: list[int] = field(default_factory=list)
    moved: int = 0  # closed; its metadata names `stranger`, which never got its entries
    stranger: str = ""
    single: int = 0  # closed, ensemble of one
    single_bookie: str = ""
    orphan_bookie: str = ""
    killed: str = ""
    marked: dict[int, list[str]] = field(default_factory=dict)  # ledger -> missing replicas
    silent: int = 0  # open, nothing written after the first audit
    busy: object = None  # the open handle written between audits
    silent_handle: object = None


def _write_in_turns(handles, entries: int) -> None:
    for i in range(entries):
        for h in handles:
            h.append(f"{h.ledger_id}-{i}-".encode() * 40)


def plant_orphan(bookie: str, address: str) -> None:
    """Entries written straight to one bookie for a ledger the metadata does not have."""
    digest = DigestManager(ORPHAN, b"made-up", "crc32c")
    framed = entry_format.frame(digest.build_entry(e, e - 1, 0, b"orphan-%d" % e) for e in range(4))
    client = BookieClient(bookie, address=address)
    try:
        assert client.add(ORPHAN, b"made-up-master-key", framed).result(10).status == status.EOK
    finally:
        client.close()


def prepare(c, bk, store) -> Facts:
    facts = Facts()
    app = {"application": b"audit-test"}
    healthy = [bk.create_ledger(3, 2, 2, password=b"pw", custom_metadata=app) for _ in range(3)]
    deleted = [bk.create_ledger(3, 2, 2, password=b"pw") for _ in range(2)]
    moved = bk.create_ledger(2, 2, 2, password=b"pw", custom_metadata=app)
    single = bk.create_ledger(1, 1, 1, password=b"pw")
    _write_in_turns(healthy + deleted + [moved, single], 30)
    for h in healthy + deleted + [moved, single]:
        h.close()
    facts.healthy = [h.ledger_id for h in healthy]
    facts.deleted = [h.ledger_id for h in deleted]
    facts.moved, facts.single = moved.ledger_id, single.ledger_id
    (_, moved_ensemble), = bk.ledger_metadata(moved.ledger_id).ensembles
    facts.single_bookie = bk.ledger_metadata(single.ledger_id).ensembles[0][1][0]
    others = [b.bookie_id for b in c.bookies if b.bookie_id not in moved_ensemble]
    # The killed bookie: outside the moved ledger's ensemble and not the single ledger's; the stranger the moved
    # ledger's metadata will name: the other bookie outside its ensemble.
    facts.killed = next(b for b in others if b != facts.single_bookie)
    facts.stranger = next(b for b in others if b != facts.killed)

    for ledger in facts.deleted:
        bk.delete_ledger(ledger)
    for b in c.bookies:
        bk.bookie_client(b.bookie_id).garbage_collection(pb.GarbageCollectionRequest.SUSPEND, major=True, minor=True)
        for _ in range(FORCED_PASSES):
            forced_pass(bk, b.bookie_id)

    # The moved ledger's metadata rewritten by CAS: its second member replaced by the stranger.
    versioned = store.read_ledger(LedgerId(0, facts.moved))
    (first, ensemble), = versioned.value.ensembles
    store.write_ledger(LedgerId(0, facts.moved),
                       dataclasses.replace(versioned.value, ensembles=((first, (ensemble[0], facts.stranger)),)),
                       versioned.version)

    live = [b for b in c.bookies if b.bookie_id != facts.killed]
    facts.orphan_bookie = live[0].bookie_id
    plant_orphan(live[0].bookie_id, live[0].grpc_address)

    # AutoRecovery disabled; the killed bookie's ledgers marked as its auditor would mark them.
    manager = LedgerUnderreplicationManager(store)
    manager.disable_ledger_replication()
    for ledger in facts.healthy + [facts.single]:
        if any(facts.killed in ens for _, ens in bk.ledger_metadata(ledger).ensembles):
            manager.mark_ledger_underreplicated(LedgerId(0, ledger), [facts.killed])
            facts.marked[ledger] = [facts.killed]
    c.kill_bookie(next(b.index for b in c.bookies if b.bookie_id == facts.killed), signal.SIGKILL)
    wait_for(unregistered(bk, facts.killed), f"{facts.killed}'s registration to expire")

    # Open ledgers, created once the killed bookie is gone (their ensembles are all alive).
    facts.silent_handle = bk.create_ledger(2, 2, 2, password=b"pw")
    facts.busy = bk.create_ledger(2, 2, 2, password=b"pw")
    _write_in_turns([facts.silent_handle, facts.busy], 5)
    facts.silent = facts.silent_handle.ledger_id
    return facts
