"""The format verbs of ``bk shell``, after BookKeeper 4.17's BookieShell: ``bookieformat`` (BookieFormatCmd:
bookie.FormatCommand over BookieImpl.format), ``metaformat`` (MetaFormatCmd: bookies.MetaFormatCommand over
BookKeeperAdmin.format), ``nukeexistingcluster`` (NukeExistingCluster: bookies.NukeExistingClusterCommand over
BookKeeperAdmin.nukeExistingCluster) and ``initbookie`` (InitBookieCmd: bookie.InitCommand over
BookKeeperAdmin.initBookie).

    bk shell bookieformat --conf F [-nonInteractive] [-force] [-deleteCookie]
        empty the stopped bookie's journal, ledger and index directories (-deleteCookie: and delete its
        registered cookie), so that it starts as a new bookie
    bk shell metaformat [-nonInteractive] [-force]
        delete every ledger's metadata, every cookie and under-replication mark; new LAYOUT and INSTANCEID
    bk shell nukeexistingcluster -zkledgersrootpath ROOT (-instanceid ID | -force)
        delete the whole cluster under ROOT, once no bookie is registered
    bk shell initbookie --conf F
        check that the cluster exists, the bookie's directories are empty and it has no cookie, then write its
        cookies (directories and metadata store) so that it can start

Data is deleted only after a confirmation, as BookKeeper asks it: without a terminal to answer, or with
-nonInteractive alone, the verb refuses and says to pass -force. A bookie's directories are touched only while
it is not registered (a running bookie is).
"""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Callable

from bookie.cli.cookie_commands import ensure_stopped, is_empty
from bookie.cli.prompts import confirm
from bookie.cli.cluster_conf import metadata_store
from bookie.exceptions import BKIllegalOpException, ConfigurationException, CookieException
from bookie.meta import layout
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ServerConfiguration
from bookie.server.cookie import cookie_dirs, expected_cookie, write_cookie, write_registered_cookie


def register_shell(commands: argparse._SubParsersAction,
                   add_uri_args: Callable[[argparse.ArgumentParser], None]) -> None:
    def verb(name: str, help_text: str, run: Callable[[argparse.Namespace, ServerConfiguration], int],
             formats: bool = False) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text)
        add_uri_args(parser)
        if formats:
            parser.add_argument("-n", "-nonInteractive", "--nonInteractive", dest="non_interactive",
                                action="store_true", help="do not ask: without -force, refuse when there is data")
            parser.add_argument("-f", "-force", "--force", dest="force", action="store_true",
                                help="delete the old data without asking")
        parser.set_defaults(run=run)
        return parser

    bookieformat = verb("bookieformat", "format the current (stopped) bookie's directories", run_bookieformat,
                        formats=True)
    bookieformat.add_argument("-d", "-deleteCookie", "--deleteCookie", dest="delete_cookie", action="store_true",
                              help="delete its cookie in the metadata store too")
    verb("metaformat", "format the BookKeeper metadata in ZooKeeper (every ledger's metadata is deleted)",
         run_metaformat, formats=True)
    nuke = verb("nukeexistingcluster", "nuke the cluster by deleting its metadata", run_nukeexistingcluster)
    nuke.add_argument("-p", "-zkledgersrootpath", "--zkledgersrootpath", dest="zkledgersrootpath", required=True,
                      help="the cluster's ledgers root path (must be the one of the metadata service URI)")
    nuke.add_argument("-i", "-instanceid", "--instanceid", dest="instanceid",
                      help="the cluster's instance id (checked; see whatisinstanceid)")
    nuke.add_argument("-f", "-force", "--force", dest="force", action="store_true",
                      help="nuke without checking the instance id (instead of -instanceid)")
    verb("initbookie", "initialize a new bookie: check, then write its cookies", run_initbookie)


def _may_delete(args: argparse.Namespace, verb: str, data: str | None, prompt: str) -> bool:
    """BookieImpl.format's and BookKeeperAdmin.format's consent to delete ``data`` (None: nothing there):
    -force gives it, -nonInteractive alone refuses, otherwise the operator is asked."""
    if data is None or args.force:
        return True
    if args.non_interactive:
        raise ConfigurationException(f"{verb} -nonInteractive would delete {data}: pass -force as well to delete it")
    return confirm(prompt, verb, "-force")


# -- bookieformat --------------------------------------------------------------------------------------
def _empty_directory(directory: str) -> None:
    """BookieImpl.cleanDir: delete everything in the directory, keep the directory."""
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def run_bookieformat(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    dirs = cookie_dirs(conf)
    with metadata_store(args) as store:
        bookie_id = conf.bookie_id
        ensure_stopped(store, bookie_id, "formatting its directories")
        holding = [d for d in dirs if not is_empty(d)]
        data = f"the data in {', '.join(holding)}" if holding else None
        if not _may_delete(args, "bookieformat", data, "Are you sure to format Bookie data..?"):
            print("Bookie format aborted: nothing was deleted")
            return 1
        for directory in dirs:
            _empty_directory(directory)
        print(f"Bookie format completed successfully: {', '.join(dirs)} are empty")
        if args.delete_cookie:
            _delete_registered_cookie(store, bookie_id)
    return 0


def _delete_registered_cookie(store: ZKMetadataStore, bookie_id: str) -> None:
    location = store.cookie_location(bookie_id)
    if store.read_cookie(bookie_id) is None:
        print(f"bookie {bookie_id} has no cookie in the metadata store ({location})")
        return
    store.delete_cookie(bookie_id)
    print(f"deleted the cookie of bookie {bookie_id} ({location})")


# -- metaformat ------------------------------------------------------------------------------------------
def _cluster_exists(store: ZKMetadataStore) -> bool:
    return store.read_node("") is not None


def run_metaformat(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    with metadata_store(args) as store:
        data = f"the metadata of every ledger under {store.root}" if _cluster_exists(store) else None
        prompt = "Ledger root already exists. Are you sure to format bookkeeper metadata? This may cause data loss."
        if not _may_delete(args, "metaformat", data, prompt):
            print("metaformat aborted: nothing was deleted")
            return 1
        store.format_metadata()
        print(f"Successfully formatted BookKeeper metadata at {store.uri} (new instance id {store.instance_id()})")
    return 0


# -- nukeexistingcluster ---------------------------------------------------------------------------------
def _check_instance_id(store: ZKMetadataStore, given: str) -> None:
    """The cluster's instance id is ``given`` (not said otherwise: knowing it is the check)."""
    found = store.read_node(layout.INSTANCEID)
    if found is None or found.value.decode() != given:
        raise BKIllegalOpException(f"-instanceid {given} is not the instance id of the cluster at {store.uri}"
                                   + ("" if found else " (it has none)") + ": nothing was nuked; see whatisinstanceid")


def _check_nukable(store: ZKMetadataStore) -> None:
    """No bookie is registered, and everything under the root is the cluster's."""
    registered = store.bookies(read_only=False) + store.bookies(read_only=True)
    if registered:
        raise BKIllegalOpException(f"bookies are still registered with the cluster at {store.uri} "
                                   f"({', '.join(registered)}): stop every bookie first; nothing was nuked")
    foreign = [name for name in store.node_children("") if not layout.is_cluster_node(name)]
    if foreign:
        raise BKIllegalOpException(f"{store.root} holds znodes that are not BookKeeper's ({', '.join(foreign)}): is "
                                   "it really the cluster's root? Nothing was nuked")


def run_nukeexistingcluster(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    if args.force == (args.instanceid is not None):
        raise ConfigurationException("nukeexistingcluster needs either -instanceid (the cluster's, checked) or "
                                     "-force (no check), not both: nothing was nuked")
    with metadata_store(args) as store:
        if args.zkledgersrootpath != store.root:
            raise ConfigurationException(f"-zkledgersrootpath {args.zkledgersrootpath} is not the ledgers root of "
                                         f"{store.uri} ({store.root}): nothing was nuked")
        if not args.force:
            _check_instance_id(store, args.instanceid)
        if not _cluster_exists(store):
            print(f"There is no existing cluster with ledgersRootPath {store.root} in ZKServers {store.uri.hosts}: "
                  "nothing to nuke")
            return 0
        _check_nukable(store)
        store.delete_tree("")
        print(f"Successfully nuked existing cluster, ZKServers: {store.uri.hosts} ledger root path: {store.root}")
    return 0


# -- initbookie ------------------------------------------------------------------------------------------
def run_initbookie(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    dirs = cookie_dirs(conf)
    for directory in dirs:
        if not is_empty(directory):
            raise CookieException(f"directory {directory} is not empty: format the bookie first (bk shell "
                                  "bookieformat); nothing was written")
    with metadata_store(args) as store:
        instance_id = store.instance_id()  # BKZKException when there is no cluster
        bookie_id = conf.bookie_id
        ensure_stopped(store, bookie_id, "initializing it")
        location = store.cookie_location(bookie_id)
        if store.read_cookie(bookie_id) is not None:
            raise CookieException(f"cookie still exists for bookie {bookie_id} ({location}): format the bookie with "
                                  "its cookie first (bk shell bookieformat -deleteCookie); nothing was written")
        cookie = expected_cookie(conf, instance_id)
        for directory in dirs:
            write_cookie(directory, cookie)
        write_registered_cookie(store, bookie_id, cookie, None)
        print(f"initialized bookie {bookie_id} of cluster {instance_id}: its cookie is in {', '.join(dirs)} and "
              f"{location}")
    return 0
