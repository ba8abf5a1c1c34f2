"""bk_server.conf: BookKeeper key names, defaults, overrides, unknown keys and bad values."""
from __future__ import annotations

import logging

import pytest

from bookie.server.conf import ConfigurationException, ServerConfiguration


def test_properties_file_with_bookkeeper_keys(tmp_path, caplog):
    path = tmp_path / "bk_server.conf"
    path.write_text("# comment\nbookiePort=3282\njournalDirectories=/a, /b\nledgerDirectories : /c\n"
                    "logSizeLimit=65536\njournalSyncData=false\nsomeFutureKey=1\nadvertisedAddress=10.0.0.5\n")
    with caplog.at_level(logging.WARNING):
        conf = ServerConfiguration.load(path, {"bookiePort": 4000})
    assert conf["bookiePort"] == 4000  # the command line wins over the file
    assert conf.journal_dirs == ["/a", "/b"] and conf.ledger_dirs == ["/c"] and conf.index_dirs == ["/c"]
    assert conf["entryLogSizeLimit"] == 65536 and conf["journalSyncData"] is False
    assert conf["journalMaxGroupWaitMSec"] == 2 and conf["gcWaitTime"] == 600000  # BookKeeper defaults
    assert conf.bookie_id == "10.0.0.5:4000"
    assert "someFutureKey" in conf.unknown and "someFutureKey" in "".join(conf.notices())


def test_keys_are_bookkeepers_own_names():
    """Keys spelled as BookKeeper 4.17's ServerConfiguration spells them (its setter's spelling accepted too)."""
    conf = ServerConfiguration({"verifyMetadataOnGC": "true", "journalRemoveFromPageCache": "false"})
    assert conf["verifyMetadataOnGC"] is True and conf["journalRemoveFromPageCache"] is False and not conf.unknown
    assert ServerConfiguration({"verifyMetadataOnGc": True})["verifyMetadataOnGC"] is True


@pytest.mark.parametrize("key,value,message", [
    ("bookiePort", "http", "bookiePort='http' is not valid"),
    ("journalSyncData", "maybe", "expected true or false"),
    ("journalMaxSizeMB", "0", "must be at least 1"),
])
def test_bad_values_name_the_key(key, value, message):
    with pytest.raises(ConfigurationException, match=message):
        ServerConfiguration({key: value})


def test_missing_directories_are_explained():
    with pytest.raises(ConfigurationException, match="journalDirectories is not set"):
        ServerConfiguration().journal_dirs


def test_java_properties_are_read_as_java_reads_them(tmp_path):
    path = tmp_path / "bk_server.conf"
    path.write_text("bookiePort 3999\nkey\\:x=1\njournalDirectories=/a,\\\n    /b\n! a comment\n"
                    "ledgerDirectories:/c\n")
    conf = ServerConfiguration.load(path)
    assert conf["bookiePort"] == 3999  # "key value", the form without = or :
    assert conf.unknown == {"key:x": "1"}  # an escaped colon belongs to the key
    assert conf.journal_dirs == ["/a", "/b"] and conf.ledger_dirs == ["/c"]


def test_what_is_not_done_is_said_once_and_plainly():
    conf = ServerConfiguration({"ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
                                "journalDirectorys": "/j", "statsProviderClass": "x"})
    notices = conf.notices()
    assert len(notices) == 2
    assert notices[0].startswith("ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage is not "
                                 "supported: this bookie stores ledgers as InterleavedLedgerStorage does")
    assert "journalDirectorys (did you mean journalDirectory?)" in notices[1] and "statsProviderClass" in notices[1]
    interleaved = "org.apache.bookkeeper.bookie.InterleavedLedgerStorage"
    assert ServerConfiguration({"ledgerStorageClass": interleaved}).notices() == []


def test_zk_servers_name_the_cluster_when_metadata_service_uri_is_unset():
    conf = ServerConfiguration({"zkServers": "zk1:2181, zk2:2181", "zkLedgersRootPath": "/bk/ledgers"})
    assert conf.metadata_service_uri == "zk://zk1:2181;zk2:2181/bk/ledgers"
    both = ServerConfiguration({"zkServers": "zk1:2181", "metadataServiceUri": "zk://other:2181/ledgers"})
    assert both.metadata_service_uri == "zk://other:2181/ledgers"
    assert ServerConfiguration().metadata_service_uri == ""
