"""`bk shell` cookie and format verbs (issue 33, item 2), with BookKeeper 4.17's names, flags and behaviour:
cookie_create, cookie_get, cookie_update, cookie_delete, cookie_generate, updatecookie, bookieformat, metaformat,
nukeexistingcluster and initbookie. Real ZooKeeper and real bookie processes; `bk shell` runs as a subprocess
without a terminal (stdin is /dev/null), so a verb that would ask refuses and names the flag that skips the
question. Every refusal exits 2 with one line saying why, and leaves the directories and ZooKeeper as they were.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket

import pytest

from bookie.client import BookKeeper
from bookie.meta.metadata_store import Versioned
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.cookie import Cookie, cookie_path, read_cookie
from bookie.testing.local_bookkeeper import LocalBookKeeper, LocalBookie
from tests.helpers.shell import bk_shell, bk_shell_run
from tests.helpers.waiting import wait_for

OTHER_BOOKIE = "10.0.0.9:3181"  # a bookie id no bookie of the test cluster has


def refused(cluster: LocalBookKeeper, *args: str) -> str:
    """``bk shell ARGS``, which must refuse (exit 2): its message, one line."""
    result = bk_shell_run(cluster, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("bk: "), result.stderr
    return last


def registered(cluster: LocalBookKeeper, bookie_id: str) -> Versioned[bytes] | None:
    with ZKMetadataStore(cluster.metadata_service_uri) as store:
        return store.read_cookie(bookie_id)


def registered_cookie(cluster: LocalBookKeeper, bookie_id: str) -> Cookie | None:
    found = registered(cluster, bookie_id)
    return None if found is None else Cookie.decode(found.value.decode(), bookie_id)


def instance_id(cluster: LocalBookKeeper) -> str:
    with ZKMetadataStore(cluster.metadata_service_uri) as store:
        return store.instance_id()


def stop(cluster: LocalBookKeeper, index: int = 0) -> LocalBookie:
    """Stop the bookie cleanly; returns it once its registration is gone."""
    bookie = cluster.bookies[index]
    cluster.kill_bookie(index, signal.SIGTERM)
    with ZKMetadataStore(cluster.metadata_service_uri) as store:
        wait_for(lambda: store.registration_session(bookie.bookie_id) is None, "the bookie's registration to go")
    return bookie


def files(bookie: LocalBookie) -> dict[str, tuple[int, int]]:
    """Every file in the bookie's directories (but a running bookie's short-lived ``.tmp`` files), with its
    size and modification time."""
    found = {}
    for directory in (bookie.journal_dir, bookie.ledger_dir):
        for top, _, names in os.walk(directory):
            for path in (os.path.join(top, name) for name in names if not name.endswith(".tmp")):
                with contextlib.suppress(FileNotFoundError):  # a running bookie's file, gone meanwhile
                    stat = os.stat(path)
                    found[path] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_cookie_verbs_create_get_update_delete_and_generate(cluster, tmp_path):
    c = cluster(1)
    bookie, cluster_id = c.bookies[0], instance_id(c)
    out = bk_shell(c, "cookie_get", bookie.bookie_id)  # printed as BookKeeper's GetCookieCommand prints it
    assert out.startswith(f"Cookie for bookie '{bookie.bookie_id}' is:\n---\n5\n") and out.endswith("\n---\n")
    assert f'bookieHost: "{bookie.bookie_id}"' in out and f'instanceId: "{cluster_id}"' in out

    first, second = tmp_path / "first.cookie", tmp_path / "second.cookie"
    out = bk_shell(c, "cookie_generate", OTHER_BOOKIE, "-j", "/data/journal", "-l", "/data/l1,/data/l2",
                   "-o", str(first))
    assert f"Successfully saved the generated cookie to {first}" in out
    # Without -i the cookie is for the cluster the command connects to.
    assert Cookie.decode(first.read_text(), str(first)) == Cookie(OTHER_BOOKIE, ("/data/journal",),
                                                                  ("/data/l1", "/data/l2"), cluster_id)
    bk_shell(c, "cookie_generate", OTHER_BOOKIE, "--journal-dirs", "/data/journal", "--ledger-dirs",
             "/data/l1,/data/l2,/data/l3", "-ix", "/data/index", "-i", "another-cluster", "-o", str(second))
    assert Cookie.decode(second.read_text(), str(second)) == Cookie(
        OTHER_BOOKIE, ("/data/journal",), ("/data/l1", "/data/l2", "/data/l3"), "another-cluster", ("/data/index",))

    assert "created the cookie" in bk_shell(c, "cookie_create", OTHER_BOOKIE, "-cf", str(first))
    assert registered(c, OTHER_BOOKIE).value == first.read_bytes()  # uploaded as it is
    assert first.read_text() in bk_shell(c, "cookie_get", OTHER_BOOKIE)
    assert "updated the cookie" in bk_shell(c, "cookie_update", OTHER_BOOKIE, "--cookie-file", str(second))
    assert registered(c, OTHER_BOOKIE).value == second.read_bytes()
    assert "deleted the cookie" in bk_shell(c, "cookie_delete", OTHER_BOOKIE)
    assert registered(c, OTHER_BOOKIE) is None
    assert f"cookie not found for bookie {OTHER_BOOKIE}" in refused(c, "cookie_get", OTHER_BOOKIE)
    assert registered_cookie(c, bookie.bookie_id).bookie_host == bookie.bookie_id  # the bookie's own is untouched


def test_cookie_verbs_refuse_an_existing_or_a_missing_cookie(cluster, tmp_path):
    c = cluster(1)
    bookie = c.bookies[0]
    path, junk = tmp_path / "bookie.cookie", tmp_path / "junk"
    bk_shell(c, "cookie_generate", bookie.bookie_id, "-j", bookie.journal_dir, "-l", bookie.ledger_dir, "-o", str(path))
    junk.write_text("not a cookie\n")
    before = registered(c, bookie.bookie_id)

    err = refused(c, "cookie_create", bookie.bookie_id, "-cf", str(path))
    assert f"cookie already exists for bookie {bookie.bookie_id}" in err and "cookie_update" in err
    err = refused(c, "cookie_delete", OTHER_BOOKIE)
    assert f"cookie not found for bookie {OTHER_BOOKIE}" in err and "nothing to delete" in err
    err = refused(c, "cookie_update", OTHER_BOOKIE, "-cf", str(path))
    assert f"cookie not found for bookie {OTHER_BOOKIE}" in err and "cookie_create" in err
    assert "does not exist" in refused(c, "cookie_create", OTHER_BOOKIE, "-cf", str(tmp_path / "absent"))
    assert "not a version-5 cookie" in refused(c, "cookie_update", bookie.bookie_id, "-cf", str(junk))
    assert "bookieId='a/b' is not valid" in refused(c, "cookie_get", "a/b")
    assert registered(c, bookie.bookie_id) == before and registered(c, OTHER_BOOKIE) is None


def host_name(ip: str) -> str:
    try:
        return socket.gethostbyaddr(ip)[0]
    except OSError:
        return ip


def test_updatecookie_switches_the_bookie_id_between_ip_and_host_name(cluster, tmp_path):
    c = cluster(1)
    bookie = c.bookies[0]
    host = host_name("127.0.0.1")
    if host == "127.0.0.1":
        pytest.skip("127.0.0.1 has no host name on this machine: both ids would be the same")
    ip_id, host_id = bookie.bookie_id, f"{host}:{bookie.port}"
    by_name = tmp_path / "by-name.conf"
    by_name.write_text(open(bookie.conf_path).read() + "useHostNameAsBookieID=true\n")
    before = registered(c, ip_id)

    err = refused(c, "updatecookie", "-bookieId", "hostname", "--conf", str(by_name))
    assert f"bookie {ip_id} is registered" in err and "stop it before updating its cookie" in err
    stop(c)
    err = refused(c, "updatecookie", "-bookieId", "hostname", "--conf", bookie.conf_path)
    assert "expects useHostNameAsBookieID=true" in err
    assert registered(c, ip_id) == before and registered(c, host_id) is None

    out = bk_shell(c, "updatecookie", "-bookieId", "hostname", "--conf", str(by_name))
    assert f"bookie {ip_id} is now {host_id}" in out
    assert registered(c, ip_id) is None and registered_cookie(c, host_id).bookie_host == host_id
    assert read_cookie(bookie.journal_dir).bookie_host == host_id == read_cookie(bookie.ledger_dir).bookie_host
    out = bk_shell(c, "updatecookie", "-list", "--conf", str(by_name))
    assert f"Listing local Cookie Files of Bookie: {host_id}" in out
    assert os.path.realpath(cookie_path(bookie.ledger_dir)) in out and f"cookies/{host_id}" in out

    out = bk_shell(c, "updatecookie", "-b", "ip", "--conf", bookie.conf_path)
    assert f"bookie {host_id} is now {ip_id}" in out
    assert registered(c, host_id) is None and registered_cookie(c, ip_id) == read_cookie(bookie.journal_dir)
    c.start_bookie(0)  # the bookie accepts its cookies again: it registers


def test_updatecookie_delete_asks_first_and_force_deletes(cluster):
    c = cluster(1)
    bookie = stop(c)
    before, cookie = files(bookie), registered(c, bookie.bookie_id)
    err = refused(c, "updatecookie", "-delete", "--conf", bookie.conf_path)
    assert "updatecookie -delete" in err and "pass -delete force" in err
    assert files(bookie) == before and registered(c, bookie.bookie_id) == cookie

    out = bk_shell(c, "updatecookie", "-delete", "force", "--conf", bookie.conf_path)
    assert f"Deleted Local Cookies of Bookie: {bookie.bookie_id}" in out
    assert f"Deleted Cookie from metadata store for Bookie: {bookie.bookie_id}" in out
    assert read_cookie(bookie.journal_dir) is None and read_cookie(bookie.ledger_dir) is None
    assert registered(c, bookie.bookie_id) is None
    assert f"No local cookies for Bookie: {bookie.bookie_id}" in bk_shell(c, "updatecookie", "-list", "--conf",
                                                                          bookie.conf_path)


def test_updatecookie_expandstorage_adds_an_empty_ledger_directory(cluster):
    c = cluster(1)
    bookie = stop(c)
    added = os.path.join(bookie.directory, "ledgers2")
    stray = os.path.join(added, "current", "stray.log")
    os.makedirs(os.path.dirname(stray))
    with open(stray, "w") as f:
        f.write("left by someone\n")
    expand = ("updatecookie", "-expandstorage", "--conf", bookie.conf_path, "--ledger-dir",
              f"{bookie.ledger_dir},{added}")
    before = registered(c, bookie.bookie_id)
    assert f"new directory {added} is not empty" in refused(c, *expand)
    assert registered(c, bookie.bookie_id) == before and read_cookie(added) is None

    os.remove(stray)
    assert f"expanded the storage of bookie {bookie.bookie_id} with {added}" in bk_shell(c, *expand)
    cookie = registered_cookie(c, bookie.bookie_id)
    assert cookie.ledger_dirs == (bookie.ledger_dir, added) and cookie.instance_id == instance_id(c)
    assert read_cookie(added) == cookie == read_cookie(bookie.journal_dir) == read_cookie(bookie.ledger_dir)


def test_bookieformat_refuses_a_running_bookie(cluster):
    c = cluster(1)
    bookie = c.bookies[0]
    before = files(bookie)
    err = refused(c, "bookieformat", "-nonInteractive", "-force", "-deleteCookie", "--conf", bookie.conf_path)
    assert f"bookie {bookie.bookie_id} is registered" in err and "stop it before formatting its directories" in err
    assert set(before) <= set(files(bookie))  # the running bookie may add files; none is gone
    assert read_cookie(bookie.journal_dir) is not None and registered(c, bookie.bookie_id) is not None


def test_bookieformat_asks_first_and_without_a_terminal_refuses(cluster):
    c = cluster(1)
    bookie = stop(c)
    before, cookie = files(bookie), registered(c, bookie.bookie_id)
    err = refused(c, "bookieformat", "-deleteCookie", "--conf", bookie.conf_path)
    assert "bookieformat" in err and "not a terminal" in err and "pass -force" in err
    err = refused(c, "bookieformat", "-nonInteractive", "--conf", bookie.conf_path)
    assert "bookieformat -nonInteractive would delete" in err and bookie.journal_dir in err
    assert "pass -force as well" in err
    assert files(bookie) == before and registered(c, bookie.bookie_id) == cookie


def test_bookieformat_and_initbookie_let_a_wiped_bookie_start_again(cluster):
    c = cluster(1)
    bookie = stop(c)
    before, cookie = files(bookie), registered(c, bookie.bookie_id)
    err = refused(c, "initbookie", "--conf", bookie.conf_path)
    assert f"directory {bookie.journal_dir} is not empty" in err and "bookieformat" in err
    assert files(bookie) == before and registered(c, bookie.bookie_id) == cookie

    out = bk_shell(c, "bookieformat", "-nonInteractive", "-force", "--conf", bookie.conf_path)
    assert "Bookie format completed successfully" in out
    assert os.listdir(bookie.journal_dir) == [] and os.listdir(bookie.ledger_dir) == []
    err = refused(c, "initbookie", "--conf", bookie.conf_path)  # its cookie is still registered
    assert f"cookie still exists for bookie {bookie.bookie_id}" in err and "bookieformat -deleteCookie" in err
    assert os.listdir(bookie.journal_dir) == [] and registered(c, bookie.bookie_id) == cookie

    out = bk_shell(c, "bookieformat", "-nonInteractive", "-force", "-deleteCookie", "--conf", bookie.conf_path)
    assert f"deleted the cookie of bookie {bookie.bookie_id}" in out and registered(c, bookie.bookie_id) is None
    out = bk_shell(c, "initbookie", "--conf", bookie.conf_path)
    assert f"initialized bookie {bookie.bookie_id}" in out
    written = registered_cookie(c, bookie.bookie_id)
    assert written.instance_id == instance_id(c) and read_cookie(bookie.journal_dir) == written
    c.start_bookie(0)  # its cookies are accepted: it registers, and it serves
    with BookKeeper(c.metadata_service_uri) as bk:
        lh = bk.create_ledger(1, 1, 1)
        assert lh.append(b"after the format") == 0
        lh.close()


def test_metaformat_asks_first_then_deletes_every_ledger_and_renews_the_instance_id(cluster):
    c = cluster(1)
    bookie = c.bookies[0]
    with BookKeeper(c.metadata_service_uri) as bk:
        lh = bk.create_ledger(1, 1, 1)
        lh.append(b"entry")
        lh.close()
    old_id = instance_id(c)
    err = refused(c, "metaformat")
    assert "metaformat" in err and "not a terminal" in err and "pass -force" in err
    assert "metaformat -nonInteractive would delete" in refused(c, "metaformat", "-nonInteractive")
    with ZKMetadataStore(c.metadata_service_uri) as store:
        assert list(store.iterate_ledgers()) == [lh.ledger] and store.instance_id() == old_id
        assert store.read_cookie(bookie.bookie_id) is not None

    assert "Successfully formatted BookKeeper metadata" in bk_shell(c, "metaformat", "-nonInteractive", "-force")
    with ZKMetadataStore(c.metadata_service_uri) as store:
        assert list(store.iterate_ledgers()) == [] and store.instance_id() != old_id
        assert store.read_cookie(bookie.bookie_id) is None and store.manager == "hierarchical"
        assert store.bookies() == [bookie.bookie_id]  # registrations stay


def test_nukeexistingcluster_needs_the_instance_id_or_force_and_stopped_bookies(cluster):
    c = cluster(1)
    bookie, cluster_id = c.bookies[0], instance_id(c)
    nuke = ("nukeexistingcluster", "-zkledgersrootpath", c.root)
    with ZKMetadataStore(c.metadata_service_uri) as store:
        store.write_node("stranger", b"", None)
        before = store.node_children("")

        assert "needs either -instanceid" in refused(c, *nuke)
        assert "not both" in refused(c, *nuke, "-instanceid", cluster_id, "-force")
        err = refused(c, *nuke, "-instanceid", "00000000-0000-0000-0000-000000000000")
        assert "is not the instance id of the cluster" in err and cluster_id not in err
        assert "is not the ledgers root" in refused(c, "nukeexistingcluster", "-zkledgersrootpath", c.root + "-other",
                                                    "-instanceid", cluster_id)
        err = refused(c, *nuke, "-instanceid", cluster_id)
        assert "bookies are still registered" in err and bookie.bookie_id in err
        stop(c)
        err = refused(c, *nuke, "-force")
        assert "not BookKeeper's (stranger)" in err
        assert store.node_children("") == before and store.instance_id() == cluster_id

        store.delete_node("stranger")
        out = bk_shell(c, *nuke, "-instanceid", cluster_id)
        assert f"Successfully nuked existing cluster, ZKServers: {store.uri.hosts} ledger root path: {c.root}" in out
        assert store.read_node("") is None
        assert "nothing to nuke" in bk_shell(c, *nuke, "-force")
