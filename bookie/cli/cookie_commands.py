"""The cookie verbs of ``bk shell``, after BookKeeper 4.17: ``cookie_create``, ``cookie_update``,
``cookie_delete``, ``cookie_get`` and ``cookie_generate`` (tools.cli.commands.cookie's CreateCookieCommand,
UpdateCookieCommand, DeleteCookieCommand, GetCookieCommand and GenerateCookieCommand, as BookieShell registers
them) and ``updatecookie`` (BookieShell.UpdateCookieCmd over cookie.AdminCommand).

    bk shell cookie_create BOOKIE -cf FILE    register FILE as the bookie's cookie; refused if it has one
    bk shell cookie_update BOOKIE -cf FILE    replace the bookie's registered cookie; refused if it has none
    bk shell cookie_delete BOOKIE             delete the bookie's registered cookie; refused if it has none
    bk shell cookie_get BOOKIE                print the bookie's registered cookie
    bk shell cookie_generate BOOKIE -j J -l L [-ix I] [-i INSTANCE] -o FILE   write a cookie file
    bk shell updatecookie --conf F (-bookieId hostname|ip | -expandstorage | -list | -delete [force])

A cookie file is BookKeeper's text format (bookie.server.cookie.Cookie). ``updatecookie`` works on the bookie
its configuration describes (its id and its journal, ledger and index directories), which must be stopped.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Callable

from bookie.cli.prompts import confirm
from bookie.cli.cluster_conf import metadata_store
from bookie.exceptions import BKIllegalOpException, BKMetadataVersionException, ConfigurationException, CookieException
from bookie.meta import layout
from bookie.meta.metadata_store import Versioned
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ServerConfiguration
from bookie.server.cookie import (Cookie, cookie_dirs, cookie_path, expected_cookie, read_cookie,
                                  read_registered_cookie, write_cookie, write_registered_cookie)

HOSTNAME, IP, FORCE = "hostname", "ip", "force"
Run = Callable[[argparse.Namespace, ServerConfiguration], int]


def register_shell(commands: argparse._SubParsersAction,
                   add_uri_args: Callable[[argparse.ArgumentParser], None]) -> None:
    def verb(name: str, help_text: str, run: Run, cookie_file: bool = False) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text)
        add_uri_args(parser)
        parser.add_argument("bookie_id", metavar="BOOKIE", help="the bookie's id (address:port, or its bookieId)")
        if cookie_file:
            parser.add_argument("-cf", "--cookie-file", required=True, help="the cookie file to upload")
        parser.set_defaults(run=run)
        return parser

    verb("cookie_create", "create a cookie for a given bookie", run_cookie_create, cookie_file=True)
    verb("cookie_update", "update a cookie for a given bookie", run_cookie_update, cookie_file=True)
    verb("cookie_delete", "delete a cookie for a given bookie", run_cookie_delete)
    verb("cookie_get", "retrieve a cookie for a given bookie", run_cookie_get)
    generate = verb("cookie_generate", "generate a cookie file for a given bookie", run_cookie_generate)
    generate.add_argument("-j", "--journal-dirs", required=True, help="the bookie's journal directories (dir1,dir2)")
    generate.add_argument("-l", "--ledger-dirs", required=True, help="the bookie's ledger directories (dir1,dir2)")
    generate.add_argument("-ix", "--index-dirs", help="the bookie's index directories (dir1,dir2; default: none, "
                                                     "the ledger directories)")
    generate.add_argument("-i", "--instance-id", help="the instance id of the bookie's cluster (default: the one of "
                                                      "the cluster this command connects to)")
    generate.add_argument("-o", "--output-file", required=True, help="the file to write the cookie to")

    update = commands.add_parser("updatecookie", help="update, list or delete the cookies of the (stopped) bookie "
                                                      "the configuration describes (BookKeeper's AdminCommand)")
    add_uri_args(update)
    action = update.add_mutually_exclusive_group(required=True)
    action.add_argument("-b", "-bookieId", "--bookieId", dest="bookie_id_kind", choices=(HOSTNAME, IP),
                        help="switch the bookie's id in its cookies (directories and metadata store) to its host "
                             "name or IP address; the configuration's useHostNameAsBookieID must say the same")
    action.add_argument("-e", "-expandstorage", "--expandstorage", action="store_true",
                        help="add the new, empty ledger/index directories of the configuration to the cookies")
    action.add_argument("-l", "-list", "--list", action="store_true",
                        help="list the bookie's cookie files and its cookie in the metadata store")
    # const True: -delete without a value (asks first); "force": deletes without asking.
    action.add_argument("-d", "-delete", "--delete", nargs="?", const=True, choices=(FORCE,), metavar=FORCE,
                        help="delete the bookie's cookies, locally and in the metadata store (asks first, "
                             "unless followed by 'force')")
    update.set_defaults(run=run_updatecookie)


# -- helpers the format verbs share ------------------------------------------------------------------
def ensure_stopped(store: ZKMetadataStore, bookie_id: str, doing: str) -> None:
    """RegistrationManager.isBookieRegistered: BKIllegalOpException while the bookie holds a registration
    (writable or read-only), i.e. it runs."""
    if store.registration_session(bookie_id) is not None:
        raise BKIllegalOpException(
            f"bookie {bookie_id} is registered under {store.root}/{layout.AVAILABLE_NODE}: it is running (or was "
            f"killed less than a ZooKeeper session ago); stop it before {doing}")


def is_empty(directory: str) -> bool:
    """Nothing in the directory (or no directory at all)."""
    return not os.path.isdir(directory) or not os.listdir(directory)


# -- cookie_create, cookie_update, cookie_delete, cookie_get, cookie_generate ---------------------------
def checked_bookie_id(text: str) -> str:
    """The bookie id argument, checked as BookieId.validateBookieId checks it (a custom id is fine)."""
    bookie_id = ServerConfiguration({"bookieId": text})["bookieId"]
    if not bookie_id:
        raise ConfigurationException("no bookie id: give one, e.g. 10.0.0.1:3181")
    return bookie_id


def _cookie_file(path: str) -> bytes:
    """The file's bytes, uploaded as they are, once they read as a cookie (CookieException otherwise)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ConfigurationException(f"cookie file {path} does not exist") from None
    Cookie.decode(data.decode("utf-8", errors="replace"), path)
    return data


def _registered(store: ZKMetadataStore, bookie_id: str, otherwise: str) -> Versioned[bytes]:
    """The bookie's registered cookie; CookieException saying ``otherwise`` if it has none."""
    found = store.read_cookie(bookie_id)
    if found is None:
        raise CookieException(f"cookie not found for bookie {bookie_id} ({store.cookie_location(bookie_id)})"
                              f"{otherwise}")
    return found


def run_cookie_create(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    bookie_id, data = checked_bookie_id(args.bookie_id), _cookie_file(args.cookie_file)
    with metadata_store(args) as store:
        exists = CookieException(f"cookie already exists for bookie {bookie_id} ({store.cookie_location(bookie_id)}): "
                                 "use cookie_update to replace it")
        if store.read_cookie(bookie_id) is not None:
            raise exists
        try:
            store.write_cookie(bookie_id, data, None)
        except BKMetadataVersionException:
            raise exists from None
        print(f"created the cookie of bookie {bookie_id} at {store.cookie_location(bookie_id)}")
    return 0


def run_cookie_update(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    bookie_id, data = checked_bookie_id(args.bookie_id), _cookie_file(args.cookie_file)
    with metadata_store(args) as store:
        found = _registered(store, bookie_id, " to update: use cookie_create to create it")
        store.write_cookie(bookie_id, data, found.version)
        print(f"updated the cookie of bookie {bookie_id} at {store.cookie_location(bookie_id)}")
    return 0


def run_cookie_delete(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    bookie_id = checked_bookie_id(args.bookie_id)
    with metadata_store(args) as store:
        _registered(store, bookie_id, ": nothing to delete")
        store.delete_cookie(bookie_id)
        print(f"deleted the cookie of bookie {bookie_id} at {store.cookie_location(bookie_id)}")
    return 0


def run_cookie_get(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    bookie_id = checked_bookie_id(args.bookie_id)
    with metadata_store(args) as store:
        found = _registered(store, bookie_id, ": the bookie never started, or its cookie was deleted")
        text = found.value.decode("utf-8", errors="replace")
        Cookie.decode(text, store.cookie_location(bookie_id))  # a cookie, or CookieException naming where
        print(f"Cookie for bookie '{bookie_id}' is:\n---\n{text}\n---")
    return 0


def _dir_list(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def run_cookie_generate(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    bookie_id = checked_bookie_id(args.bookie_id)
    instance_id = args.instance_id
    if instance_id is None:
        with metadata_store(args) as store:
            instance_id = store.instance_id()
    index = _dir_list(args.index_dirs) if args.index_dirs else ()
    cookie = Cookie(bookie_id, _dir_list(args.journal_dirs), _dir_list(args.ledger_dirs), instance_id or None,
                    index or None)
    with open(args.output_file, "w", encoding="utf-8") as f:
        f.write(cookie.encode())
    print(f"Successfully saved the generated cookie to {args.output_file}")
    return 0


# -- updatecookie (AdminCommand) ---------------------------------------------------------------------
def run_updatecookie(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    with metadata_store(args) as store:
        if args.bookie_id_kind:
            return _switch_bookie_id(store, conf, args.bookie_id_kind == HOSTNAME)
        if args.expandstorage:
            return _expand_storage(store, conf)
        if args.list:
            return _list_cookies(store, conf)
        return _delete_cookies(store, conf, args.delete == FORCE)


def _bookie_id_when(conf: ServerConfiguration, use_host_name: bool) -> str:
    """The bookie id the configuration gives with useHostNameAsBookieID=``use_host_name``."""
    saved = conf["useHostNameAsBookieID"]
    conf.set("useHostNameAsBookieID", use_host_name)
    try:
        return conf.bookie_id
    finally:
        conf.set("useHostNameAsBookieID", saved)


def switched_ids(conf: ServerConfiguration, use_host_name: bool) -> tuple[str, str]:
    """(old, new) bookie id of a switch to the host name (or to the IP address); ConfigurationException if
    the configuration does not ask for it or there is nothing to switch."""
    wanted = str(use_host_name).lower()
    if conf["useHostNameAsBookieID"] != use_host_name:
        raise ConfigurationException(f"-bookieId {HOSTNAME if use_host_name else IP} expects useHostNameAsBookieID="
                                     f"{wanted} in the configuration: set it there, then run updatecookie again")
    if conf["bookieId"]:
        raise ConfigurationException(f"bookieId={conf['bookieId']} is set: the bookie's id does not come from its "
                                     "address, so there is nothing to switch")
    old, new = _bookie_id_when(conf, not use_host_name), conf.bookie_id
    if old == new:
        raise ConfigurationException(f"the bookie's id is {new} with useHostNameAsBookieID true and false alike "
                                     "(advertisedAddress, or a name that does not resolve): nothing to switch")
    return old, new


def _check_dir_cookies(conf: ServerConfiguration, old: Cookie, new: Cookie) -> None:
    """Every directory holds the bookie's cookie, as it was (``old``) or already switched (``new``)."""
    for directory in cookie_dirs(conf):
        found = read_cookie(directory)
        if found is None:
            raise CookieException(f"directory {directory} has no cookie: it is not bookie {old.bookie_host}'s, or it "
                                  "was wiped; check journalDirectories/ledgerDirectories, nothing was changed")
        if found != new and (problem := found.mismatch(old)):
            raise CookieException(f"directory {directory} holds another cookie than bookie {old.bookie_host}'s "
                                  f"({problem}); nothing was changed")


def _switch_bookie_id(store: ZKMetadataStore, conf: ServerConfiguration, use_host_name: bool) -> int:
    old_id, new_id = switched_ids(conf, use_host_name)
    for bookie_id in (old_id, new_id):
        ensure_stopped(store, bookie_id, "updating its cookie")
    old = read_registered_cookie(store, old_id)
    if old is None:
        raise CookieException(f"no cookie for bookie {old_id} ({store.cookie_location(old_id)}): either it is already "
                              f"updated with useHostNameAsBookieID={str(use_host_name).lower()}, or none exists")
    new = dataclasses.replace(old.value, bookie_host=new_id)
    current = read_registered_cookie(store, new_id)
    if current is not None and current.value != new:
        raise CookieException(f"bookie {new_id} already has another cookie ({store.cookie_location(new_id)}): "
                              "nothing was changed; delete it (cookie_delete) if it is stale")
    _check_dir_cookies(conf, old.value, new)
    for directory in cookie_dirs(conf):
        write_cookie(directory, new)
    if current is None:
        write_registered_cookie(store, new_id, new, None)
    store.delete_cookie(old_id)
    print(f"bookie {old_id} is now {new_id}: its cookie is updated in {', '.join(cookie_dirs(conf))} and "
          f"{store.cookie_location(new_id)}")
    return 0


def _new_directories(conf: ServerConfiguration, registered: Cookie, expected: Cookie) -> list[str]:
    """The directories of the configuration without a cookie, each checked to be new and empty; the others
    must hold a cookie the expansion can grow (Cookie.verifyIsSuperSet)."""
    known = {*registered.journal_dirs, *registered.ledger_dirs, *(registered.index_dirs or ())}
    added = []
    for directory in cookie_dirs(conf):
        found = read_cookie(directory)
        if found is not None:
            if problem := found.mismatch(expected, superset=True):
                raise CookieException(f"directory {directory}: {problem}; nothing was changed")
        elif directory in known:
            raise CookieException(f"directory {directory} has no cookie but the bookie has used it: its data was "
                                  "wiped or its disk is not mounted; restore it, nothing was changed")
        elif not is_empty(os.path.join(directory, "current")):
            raise CookieException(f"new directory {directory} is not empty: only empty directories can be added; "
                                  "nothing was changed")
        else:
            added.append(directory)
    return added


def _expand_storage(store: ZKMetadataStore, conf: ServerConfiguration) -> int:
    """LegacyCookieValidation.checkCookies with allowStorageExpansion: stamp the configuration's cookie on
    every directory and in the metadata store, once the new directories are empty and nothing else changed."""
    bookie_id = conf.bookie_id
    ensure_stopped(store, bookie_id, "expanding its storage")
    registered = read_registered_cookie(store, bookie_id)
    if registered is None:
        raise CookieException(f"no cookie for bookie {bookie_id} ({store.cookie_location(bookie_id)}): a bookie "
                              "that never started writes its cookies with all its directories at its first start")
    expected = expected_cookie(conf, store.instance_id())
    if problem := registered.value.mismatch(expected, superset=True):
        raise CookieException(f"cannot expand the storage of bookie {bookie_id}: {problem} (only ledger and index "
                              "directories can be added); nothing was changed")
    added = _new_directories(conf, registered.value, expected)
    if not added and registered.value == expected:
        print(f"bookie {bookie_id}: no new directory, its cookies are up to date")
        return 0
    for directory in cookie_dirs(conf):
        write_cookie(directory, expected)
    write_registered_cookie(store, bookie_id, expected, registered.version)
    print(f"expanded the storage of bookie {bookie_id} with {', '.join(added) or 'no new directory'}: its cookie "
          f"is updated in {', '.join(cookie_dirs(conf))} and {store.cookie_location(bookie_id)}")
    return 0


def _local_cookie_files(conf: ServerConfiguration) -> list[str]:
    return [path for path in map(cookie_path, cookie_dirs(conf)) if os.path.isfile(path)]


def _list_cookies(store: ZKMetadataStore, conf: ServerConfiguration) -> int:
    bookie_id = conf.bookie_id
    files = _local_cookie_files(conf)
    print(f"Listing local Cookie Files of Bookie: {bookie_id}" if files else
          f"No local cookies for Bookie: {bookie_id}")
    for path in files:
        print(os.path.realpath(path))
    if store.read_cookie(bookie_id) is None:
        print(f"No cookie for {bookie_id} in metadata store")
    else:
        print(f"Cookie of Bookie {bookie_id} in metadata store: {store.cookie_location(bookie_id)}")
    return 0


def _delete_cookies(store: ZKMetadataStore, conf: ServerConfiguration, force: bool) -> int:
    """Both questions come first: a refusal (no terminal) leaves everything as it was."""
    bookie_id = conf.bookie_id
    ensure_stopped(store, bookie_id, "deleting its cookies")
    files = _local_cookie_files(conf)
    verb, skip = "updatecookie -delete", f"-delete {FORCE}"
    local = bool(files) and (force or confirm("Are you sure you want to delete Cookies locally?", verb, skip))
    registered = store.read_cookie(bookie_id) is not None
    remote = registered and (force or confirm("Are you sure you want to delete Cookies from metadata store?", verb,
                                              skip))
    for path in files if local else []:
        os.remove(path)
    print(f"Deleted Local Cookies of Bookie: {bookie_id}" if local else
          f"Skipping deleting local Cookies of Bookie: {bookie_id}" if files else
          f"No local cookies for Bookie: {bookie_id}")
    if remote:
        store.delete_cookie(bookie_id)
    print(f"Deleted Cookie from metadata store for Bookie: {bookie_id}" if remote else
          f"Skipping deleting cookie from metadata store for Bookie: {bookie_id}" if registered else
          f"No cookie for {bookie_id} in metadata store")
    return 0
