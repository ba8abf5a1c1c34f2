"""The cluster-wide info verbs of ``bk shell``, after BookKeeper 4.17's BookieShell: ``clusterinfo``
(ClusterInfoCmd over bookies.ClusterInfoCommand) and ``endpointinfo`` (EndpointInfoCmd over
bookies.EndpointInfoCommand).

    bk shell clusterinfo -u URI              the auditor, the bookie counts and under-replication, as JSON
    bk shell endpointinfo -u URI -b BOOKIE   what the bookie registered: its properties and endpoints
                                             (BookieServiceInfo); exit 1 if it is unknown or publishes none

The bookies of a cluster are those with a cookie in the metadata store (BookKeeper's getAllBookies), and any
registered one; those not registered, writable or read-only, are the unavailable ones.
"""
from __future__ import annotations

import argparse
import json
from typing import Callable

from bookie.cli.cluster_conf import metadata_store
from bookie.meta import layout
from bookie.meta.bookie_service_info import BookieServiceInfo
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.metadata_store import MetadataStore
from bookie.replication.auditor_elector import current_auditor
from bookie.server.conf import ServerConfiguration


def register_shell(commands: argparse._SubParsersAction,
                   add_uri_args: Callable[[argparse.ArgumentParser], None]) -> None:
    info = commands.add_parser("clusterinfo", help="the current info about the cluster of bookies (JSON)")
    add_uri_args(info)
    info.set_defaults(run=run_clusterinfo)

    endpoint = commands.add_parser("endpointinfo", help="a bookie's registered properties and endpoints")
    add_uri_args(endpoint)
    endpoint.add_argument("-b", "-bookieid", "--bookieid", dest="bookie", required=True,
                          help="the bookie's id (address:port, or its bookieId)")
    endpoint.set_defaults(run=run_endpointinfo)


def all_bookies(store: MetadataStore) -> list[str]:
    """Every bookie of the cluster: with a cookie (RegistrationClient.getAllBookies), or registered."""
    registered = store.bookies(read_only=False) + store.bookies(read_only=True)
    return sorted(set(store.node_children(layout.COOKIE_NODE)) | set(registered))


# -- clusterinfo ---------------------------------------------------------------------------------------
def cluster_info(store: MetadataStore) -> dict[str, object]:
    """ClusterInfoCommand.ClusterInfo, its fields in its order, then two beyond it: the cluster's instance id
    and how many ledgers are marked under-replicated."""
    manager = LedgerUnderreplicationManager(store)
    under_replicated = sum(1 for _ in manager.list_underreplicated())
    auditor = current_auditor(store)
    writable, read_only = store.bookies(read_only=False), store.bookies(read_only=True)
    total = len(all_bookies(store))
    return {"auditorElected": auditor is not None, "auditorId": auditor or "",
            "clusterUnderReplicated": under_replicated > 0,
            "ledgerReplicationEnabled": manager.is_ledger_replication_enabled(),
            "totalBookiesCount": total, "writableBookiesCount": len(writable),
            "readonlyBookiesCount": len(read_only),
            "unavailableBookiesCount": total - len(writable) - len(read_only),
            "instanceId": store.instance_id(), "underReplicatedLedgersCount": under_replicated}


def run_clusterinfo(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    with metadata_store(args) as store:
        info = cluster_info(store)
    print("--------- Cluster Info ---------")
    print(json.dumps(info, separators=(",", ":")))  # JsonUtil.toJson's compact form
    return 0


# -- endpointinfo --------------------------------------------------------------------------------------
def describe_service_info(bookie: str, info: BookieServiceInfo) -> list[str]:
    """EndpointInfoCommand's lines: the bookie id, its properties, then each endpoint."""
    lines = [f"BookiedId: {bookie}"]  # sic: BookKeeper's spelling, for scripts that read it
    if info.properties:
        lines.append("Properties")
        lines += [f"{key} : {value}" for key, value in sorted(info.properties.items())]
    for e in info.endpoints:
        lines += [f"Endpoint: {e.id}", f"Protocol: {e.protocol}", f"Address: {e.host} : {e.port}",
                  f"Auth: [{', '.join(e.auth)}]", f"Extensions: [{', '.join(e.extensions)}]"]
    return lines


def run_endpointinfo(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    with metadata_store(args) as store:
        known = all_bookies(store)
        info = store.bookie_service_info(args.bookie) if args.bookie in known else None
    if args.bookie not in known:
        print(f"Bookie {args.bookie} does not exist, only [{', '.join(known)}]")
        return 1
    if info is None:
        print(f"Bookie {args.bookie} is not registered: it publishes no endpoint info while it is down")
        return 1
    for line in describe_service_info(args.bookie, info):
        print(line)
    if not info.endpoints:
        print("Bookie did not publish any endpoint info. Maybe it is down")
        return 1
    return 0
