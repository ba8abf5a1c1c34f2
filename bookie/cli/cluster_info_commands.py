"""The cluster-wide info verbs of ``bk shell``, after BookKeeper 4.17's BookieShell: ``clusterinfo``
(ClusterInfoCmd over bookies.ClusterInfoCommand) and ``endpointinfo`` (EndpointInfoCmd over
bookies.EndpointInfoCommand).

    bk shell clusterinfo -u URI              the auditor, the bookie counts and under-replication, as JSON
    bk shell endpointinfo -u URI -b BOOKIE   what the bookie registered: its properties and endpoints
                                             (BookieServiceInfo); exit 1 if it is unknown or publishes none

What a cluster's info is, and which bookies it has: bookie/meta/cluster_info.py.
"""
from __future__ import annotations

import argparse
import json
from typing import Callable

from bookie.cli.cluster_conf import metadata_store
from bookie.meta.bookie_service_info import BookieServiceInfo
from bookie.meta.cluster_info import all_bookies, cluster_info
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


# -- clusterinfo ---------------------------------------------------------------------------------------
def run_clusterinfo(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    with metadata_store(args) as store:
        info = cluster_info(store, current_auditor(store), extended=True)
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
