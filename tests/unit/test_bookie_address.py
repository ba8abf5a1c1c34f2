"""The bookie's address and id from bk_server.conf, as BookieImpl.getBookieAddress / getBookieId derive them:
precedence, host names, the loopback refusal, bookieId's syntax (issue 30, item 1)."""
from __future__ import annotations

import pytest

from bookie.server import conf as conf_module
from bookie.server.conf import WILDCARD, ConfigurationException, ServerConfiguration, interface_address


@pytest.fixture
def host(monkeypatch):
    """This host's address is 10.1.2.3, named bk-1.rack-7.example.com (no resolver asked)."""
    monkeypatch.setattr(conf_module, "_host_address", lambda: "10.1.2.3")
    monkeypatch.setattr(conf_module, "_canonical_name",
                        lambda ip: {"10.1.2.3": "bk-1.rack-7.example.com", "127.0.0.1": "localhost"}.get(ip, ip))


def test_without_network_keys_the_address_is_this_hosts_and_every_interface_listens(host):
    conf = ServerConfiguration({"bookiePort": 3181})
    assert conf.address == conf_module.BookieAddress(WILDCARD, "10.1.2.3", "10.1.2.3")
    assert conf.bookie_address == conf.bookie_id == "10.1.2.3:3181"
    assert conf.check_address() is conf.address  # not loopback: accepted without allowLoopback


def test_a_listening_interface_gives_both_the_bind_and_the_bookie_address(host):
    conf = ServerConfiguration({"listeningInterface": "lo", "allowLoopback": True})
    assert conf.address == conf_module.BookieAddress("127.0.0.1", "127.0.0.1", "127.0.0.1")
    assert conf.bookie_id == "127.0.0.1:3181"


def test_advertised_address_wins_and_is_not_checked_for_loopback(host):
    conf = ServerConfiguration({"listeningInterface": "lo", "advertisedAddress": " bk.example.com ",
                                "useHostNameAsBookieID": True})
    assert conf.address == conf_module.BookieAddress("127.0.0.1", "bk.example.com", None)
    assert conf.check_address().host == "bk.example.com"  # BookKeeper checks only a derived address


def test_host_names_full_or_short(host):
    assert ServerConfiguration({"useHostNameAsBookieID": True}).bookie_id == "bk-1.rack-7.example.com:3181"
    short = ServerConfiguration({"useHostNameAsBookieID": True, "useShortHostName": True})
    assert short.bookie_id == "bk-1:3181"
    assert ServerConfiguration({"useShortHostName": True}).bookie_id == "10.1.2.3:3181"  # only with host names


def test_a_custom_bookie_id_names_the_bookie_and_the_address_stays(host):
    conf = ServerConfiguration({"bookieId": "bookie-a"})
    assert conf.bookie_id == "bookie-a" and conf.bookie_address == "10.1.2.3:3181"


@pytest.mark.parametrize("bad", ["readonly", "ReadOnly", "two words", "a/b", "é"])
def test_a_bookie_id_has_bookkeepers_syntax(bad):
    with pytest.raises(ConfigurationException, match="bookieId=.* is not valid: a bookie id is"):
        ServerConfiguration({"bookieId": bad})


def test_a_loopback_address_is_refused_unless_allowed(monkeypatch):
    monkeypatch.setattr(conf_module, "_host_address", lambda: "127.0.1.1")  # a Debian host's name
    conf = ServerConfiguration()
    with pytest.raises(ConfigurationException, match=r"127\.0\.1\.1 \(from this host's name .*\) is a loopback "
                                                     r"address: refused unless allowLoopback=true"):
        conf.check_address()
    conf.set("allowLoopback", "true")
    assert conf.check_address().host == "127.0.1.1"


def test_the_address_is_resolved_once_and_again_after_a_network_key_changes(monkeypatch):
    calls = []
    monkeypatch.setattr(conf_module, "_host_address", lambda: calls.append(1) or "10.9.9.9")
    conf = ServerConfiguration()
    assert conf.bookie_id == conf.bookie_id == "10.9.9.9:3181" and len(calls) == 1
    conf.set("advertisedAddress", "10.0.0.1")
    assert conf.bookie_id == "10.0.0.1:3181"


def test_interfaces_by_name():
    assert interface_address("lo") == "127.0.0.1"
    with pytest.raises(ConfigurationException, match="listeningInterface=nosuch0: no such network interface .*lo"):
        interface_address("nosuch0")
    with pytest.raises(ConfigurationException, match="no such network interface"):
        interface_address("x" * 40)
