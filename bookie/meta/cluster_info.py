"""The current info about a cluster of bookies (BookKeeper's ClusterInfoCommand.ClusterInfo, which
ClusterInfoService answers too): is an auditor elected and who, is anything under-replicated, is
AutoRecovery enabled, and how many bookies there are: writable, read-only, unavailable.

The bookies of a cluster are those with a cookie in the metadata store (BookKeeper's getAllBookies), and any
registered one; those not registered, writable or read-only, are the unavailable ones.
"""
from __future__ import annotations

from bookie.meta import layout
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.metadata_store import MetadataStore


def all_bookies(store: MetadataStore) -> list[str]:
    """Every bookie of the cluster: with a cookie (RegistrationClient.getAllBookies), or registered."""
    registered = store.bookies(read_only=False) + store.bookies(read_only=True)
    return sorted(set(store.node_children(layout.COOKIE_NODE)) | set(registered))


def cluster_info(store: MetadataStore, auditor: str | None, extended: bool = False) -> dict[str, object]:
    """ClusterInfo's fields in its order; ``extended``: then two beyond it, the cluster's instance id and how
    many ledgers are marked under-replicated (which reads every mark, where ClusterInfo looks at the first).
    ``auditor``: the elected auditor's id (the replication layer's current_auditor), None if none is."""
    manager = LedgerUnderreplicationManager(store)
    marks = manager.list_underreplicated()
    under_replicated = sum(1 for _ in marks) if extended else int(next(marks, None) is not None)
    writable, read_only = store.bookies(read_only=False), store.bookies(read_only=True)
    total = len(all_bookies(store))
    info = {"auditorElected": auditor is not None, "auditorId": auditor or "",
            "clusterUnderReplicated": under_replicated > 0,
            "ledgerReplicationEnabled": manager.is_ledger_replication_enabled(),
            "totalBookiesCount": total, "writableBookiesCount": len(writable),
            "readonlyBookiesCount": len(read_only),
            "unavailableBookiesCount": total - len(writable) - len(read_only)}
    if extended:
        info.update(instanceId=store.instance_id(), underReplicatedLedgersCount=under_replicated)
    return info
