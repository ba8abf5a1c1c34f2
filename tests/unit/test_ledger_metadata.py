"""Ledger metadata without a server: BookKeeper's znode paths, the V3 and V2 formats, metadata service URIs.

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


def test_service_uri():
    uri = MetadataServiceUri.parse("zk+longhierarchical://h1:2181,h2:2182/ledgers/")
    assert (uri.hosts, uri.root, uri.layout) == ("h1:2181,h2:2182", "/ledgers", "longhierarchical")
    for bad in ("", "http://h:1/ledgers", "zk://h:1", "zk://h/ledgers", "zk+weird://h:1/x"):
        with pytest.raises(ValueError, match="expected zk://host:port"):
            MetadataServiceUri.parse(bad)


def test_a_recoverys_fragments_apply_to_the_fresh_metadata_without_touching_earlier_ones():
    """BookKeeper's closeRecovered: a fragment from the last one's first entry replaces its ensemble,
    later ones are appended, earlier fragments stay as the fresh copy has them."""
    fresh = metadata(ensembles=((0, ("fixed", "b")), (10, ("c", "d")), (15, ("e", "f"))))
    closed = fresh.with_recovery_ensembles({15: ("g", "f"), 18: ("g", "h")})
    assert closed.ensembles == ((0, ("fixed", "b")), (10, ("c", "d")), (15, ("g", "f")), (18, ("g", "h")))
    assert fresh.with_recovery_ensembles({}).ensembles == fresh.ensembles
    with pytest.raises(ValueError, match="starts before the last fragment"):
        fresh.with_recovery_ensembles({10: ("x", "d")})
