"""Cookies refuse wiped, swapped and foreign directories; disk usage switches read-only both ways."""
from __future__ import annotations

import os
import shutil

import pytest

from bookie.exceptions import CookieException, ReadOnlyException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server.cookie import Cookie, check_cookies, cookie_path, read_cookie
from bookie.server.ledger_dirs_monitor import disk_usage

KEY = generate_master_key(b"pw")


def test_cookie_written_everywhere_on_first_start(make_bookie):
    bookie = make_bookie()
    cookies = {d: read_cookie(d) for d in [*bookie.journal_dirs, *bookie.ledger_dirs]}
    assert all(c == bookie.cookie for c in cookies.values())
    assert open(cookie_path(bookie.journal_dirs[0])).read().startswith("5\nbookieHost: ")


def test_wiped_journal_directory_is_refused(make_bookie):
    bookie = make_bookie()
    bookie.shutdown()
    shutil.rmtree(bookie.journal_dirs[0])
    with pytest.raises(CookieException, match="no cookie.*wiped"):
        make_bookie()


def test_swapped_directories_are_refused(make_bookie, tmp_path):
    bookie = make_bookie()
    bookie.shutdown()
    with pytest.raises(CookieException, match="journal directories"):
        make_bookie(journalDirectories=bookie.ledger_dirs[0], ledgerDirectories=bookie.journal_dirs[0])


def test_directory_of_another_bookie_is_refused(make_bookie):
    make_bookie().shutdown()
    with pytest.raises(CookieException, match="bookie id"):
        make_bookie(bookiePort=3999)


def test_other_clusters_cookie_is_refused(tmp_path):
    from bookie.server import ServerConfiguration
    from tests.helpers.engine_ops import engine_settings
    conf = ServerConfiguration(engine_settings(tmp_path))
    check_cookies(conf, instance_id="cluster-a")
    with pytest.raises(CookieException, match="instance id"):
        check_cookies(conf, instance_id="cluster-b")
    registered = Cookie(conf.bookie_id, tuple(conf.journal_dirs), tuple(conf.ledger_dirs), "cluster-a")
    with pytest.raises(CookieException, match="cluster-a"):
        check_cookies(conf, instance_id="cluster-b", registered=registered)


def test_data_without_cookie_is_not_adopted(make_bookie, tmp_path):
    current = os.path.join(tmp_path, "ledgers", "current")
    os.makedirs(current)
    open(os.path.join(current, "0.log"), "wb").close()
    with pytest.raises(CookieException, match="hold bookie data but no cookie"):
        make_bookie()


def test_disk_usage_switches_read_only_both_ways(make_bookie):
    bookie = make_bookie()
    changes = []
    bookie.add_state_listener(changes.append)
    ledger = LedgerId(0, 1)
    digest = DigestManager(ledger, b"pw")
    usage = disk_usage(bookie.ledger_dirs[0])

    bookie.conf.set("diskUsageThreshold", max(0.0, usage - 0.05))  # the real disk is now "full"
    assert bookie.dirs_monitor.check() and bookie.read_only
    with pytest.raises(ReadOnlyException):
        bookie.add_entries(ledger, KEY, digest.build_framed(0, -1, 0, [b"a"])[0])
    assert bookie.add_entries(ledger, KEY, digest.build_framed(0, -1, 0, [b"a"])[0], recovery=True).result(10) == [0]

    bookie.conf.set("diskUsageThreshold", min(1.0, usage + 0.05))
    assert not bookie.dirs_monitor.check() and not bookie.read_only
    assert bookie.add_entries(ledger, KEY, digest.build_framed(1, 0, 0, [b"b"])[0]).result(10) == [1]
    assert changes == [True, False]
