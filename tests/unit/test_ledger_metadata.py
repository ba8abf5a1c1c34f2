"""Ledger metadata without a server: BookKeeper's znode paths, the V3 and V2 formats, metadata service URIs
(several servers separated by ';' or ',', a root below a chroot).

The same metadata on a real ZooKeeper: tests/integration/test_zk_metadata_store.py."""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from google.protobuf.internal.decoder import _DecodeVarint32

from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta import ledger_metadata
from bookie.meta.service_uri import MetadataServiceUri
from bookie.proto.checksum import DigestType
from bookie.proto.data_formats_pb2 import LedgerMetadataFormat
from tests.helpers.sample_metadata import metadata


@pytest.mark.parametrize("ledger,manager,path", [
    (LedgerId(0, 12345), "hierarchical", "/ledgers/00/0001/L2345"),
    (LedgerId(0, 12345), "flat", "/ledgers/L0000012345"),
    (LedgerId(0, 12345), "longhierarchical", "/ledgers/000/0000/0000/0001/L2345"),
    (LedgerId(0, 1 << 40), "hierarchical", "/ledgers/000/0001/0995/1162/L7776"),
    (LedgerId(0xABC, 0x12), "hierarchical", "/ledgers/scoped/0000/0000/0000/0abc/0000/0000/0000/L0012"),
])
def test_ledger_paths(ledger, manager, path):
    assert layout.ledger_path("/ledgers", manager, ledger) == path
    assert layout.parse_ledger_path("/ledgers", path) == ledger


def test_metadata_serde_v3_and_v2():
    md = metadata(state=ledger_metadata.LedgerState.CLOSED, last_entry_id=41, length=4200, digest_type=DigestType.MAC)
    data = ledger_metadata.serialize(md)
    assert data.startswith(b"BookieMetadataFormatVersion\t3\n")
    assert ledger_metadata.parse(data) == md
    body = data[len(b"BookieMetadataFormatVersion\t3\n"):]
    size, start = _DecodeVarint32(body, 0)
    assert start + size == len(body)
    fmt = LedgerMetadataFormat.FromString(body[start:])
    assert fmt.quorumSize == 2 and fmt.state == LedgerMetadataFormat.CLOSED and fmt.segment[0].firstEntryId == 0
    v2 = b"BookieMetadataFormatVersion\t2\n" + text_format.MessageToString(fmt).encode()
    assert ledger_metadata.parse(v2) == md
    with pytest.raises(ValueError):
        ledger_metadata.parse(b"BookieMetadataFormatVersion\t1\nwhatever")
    # What a check of many ledgers decodes: the same password and digest type from either format.
    for znode in (data, v2):
        assert ledger_metadata.parse_access(znode) == ledger_metadata.LedgerAccess(b"pw", DigestType.MAC)
    with pytest.raises(ValueError):
        ledger_metadata.parse_access(b"BookieMetadataFormatVersion\t1\nwhatever")


@pytest.mark.parametrize("state", list(ledger_metadata.LedgerState))
@pytest.mark.parametrize("digest_type", list(DigestType))
def test_metadata_pickles_as_a_plain_tuple_and_comes_back_equal(state, digest_type):
    """LedgerMetadata.__reduce__ (Spark ships thousands per task): every field back, the enums as enums, the
    record as immutable as before."""
    import dataclasses
    import pickle
    md = metadata(state=state, digest_type=digest_type, last_entry_id=7, length=800,
                  custom_metadata=(("application", b"x"),))
    back = pickle.loads(pickle.dumps(md))
    assert back == md and hash(back) == hash(md)
    assert back.state is state and back.digest_type is digest_type
    assert {f.name: getattr(back, f.name) for f in dataclasses.fields(md)} == dataclasses.asdict(md)
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.length = 1


def test_service_uri():
    uri = MetadataServiceUri.parse("zk+longhierarchical://h1:2181,h2:2182/ledgers/")
    assert (uri.hosts, uri.root, uri.layout) == ("h1:2181,h2:2182", "/ledgers", "longhierarchical")
    for bad in ("", "http://h:1/ledgers", "zk://h:1", "zk://h/ledgers", "zk+weird://h:1/x"):
        with pytest.raises(ValueError, match="expected zk://host:port"):
            MetadataServiceUri.parse(bad)


@pytest.mark.parametrize("text,hosts,root", [
    # BookKeeper's documented form: ';' between the servers
    ("zk://zk1:2181;zk2:2181;zk3:2181/ledgers", "zk1:2181,zk2:2181,zk3:2181", "/ledgers"),
    # a ZooKeeper connect string's ',' too, and both mixed
    ("zk://zk1:2181,zk2:2181;zk3:2181/ledgers", "zk1:2181,zk2:2181,zk3:2181", "/ledgers"),
    # a root below a chroot, at any depth; a trailing '/' is dropped
    ("zk://10.0.0.1:2181;10.0.0.2:2181/chroot/ledgers/", "10.0.0.1:2181,10.0.0.2:2181", "/chroot/ledgers"),
    ("zk://zk-1.example.com:2181/a/b/c/ledgers", "zk-1.example.com:2181", "/a/b/c/ledgers"),
    ("zk://[::1]:2181;[fe80::1%eth0]:2182/ledgers", "[::1]:2181,[fe80::1%eth0]:2182", "/ledgers"),
])
def test_service_uri_servers_and_chroot(text, hosts, root):
    uri = MetadataServiceUri.parse(text)
    assert (uri.hosts, uri.root) == (hosts, root)
    assert uri.servers == tuple(hosts.split(","))
    assert str(uri) == "zk://" + hosts.replace(",", ";") + root  # printed in BookKeeper's form
    assert MetadataServiceUri.parse(str(uri)) == uri


@pytest.mark.parametrize("text,message", [
    ("zk://zk1:2181;;zk2:2181/ledgers", "empty server between separators"),
    ("zk://zk1:2181;/ledgers", "empty server between separators"),
    ("zk://zk1;zk2:2181/ledgers", "server 'zk1' is not host:port, the host a name or an IPv4 address, or an IPv6 "
                                  "address in brackets, the port 1-65535"),
    ("zk://zk1:2181:2182/ledgers", "server 'zk1:2181:2182' is not host:port"),
    ("zk://zk 1:2181/ledgers", "server 'zk 1:2181' is not host:port"),
    ("zk://::1:2181/ledgers", "server '::1:2181' is not host:port"),
    ("zk://zk1:0/ledgers", "server 'zk1:0': port '0' is not 1-65535"),
    ("zk://zk1:65536/ledgers", "server 'zk1:65536': port '65536' is not 1-65535"),
    ("zk://zk1:http/ledgers", "server 'zk1:http': port 'http' is not 1-65535"),
    ("zk://zk1:2181/chroot//ledgers", "root path '/chroot//ledgers' must be /name"),
    ("zk://zk1:2181/chroot/../ledgers", "root path '/chroot/../ledgers' must be /name"),
    ("zk://zk1:2181/", "needs servers and a root path"),
])
def test_a_bad_service_uri_names_what_is_allowed(text, message):
    with pytest.raises(ValueError) as error:
        MetadataServiceUri.parse(text)
    assert message in str(error.value)
    assert "expected zk://host:port[;host:port...]/ledgers (servers separated by ';' or ','" in str(error.value)


def test_a_recoverys_fragments_apply_to_the_fresh_metadata_without_touching_earlier_ones():
    """BookKeeper's closeRecovered: a fragment from the last one's first entry replaces its ensemble,
    later ones are appended, earlier fragments stay as the fresh copy has them."""
    fresh = metadata(ensembles=((0, ("fixed", "b")), (10, ("c", "d")), (15, ("e", "f"))))
    closed = fresh.with_recovery_ensembles({15: ("g", "f"), 18: ("g", "h")})
    assert closed.ensembles == ((0, ("fixed", "b")), (10, ("c", "d")), (15, ("g", "f")), (18, ("g", "h")))
    assert fresh.with_recovery_ensembles({}).ensembles == fresh.ensembles
    with pytest.raises(ValueError, match="starts before the last fragment"):
        fresh.with_recovery_ensembles({10: ("x", "d")})
