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
    assert "someFutureKey" in conf.unknown and "unknown configuration key someFutureKey" in caplog.text


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
