"""Client configuration: BookKeeper's ClientConfiguration keys and defaults."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from bookie.exceptions import ConfigurationException

# allocatorPoolingPolicy (BookKeeper's PoolingPolicy): PooledDirect reuses large buffers (bookie/util/allocator.py).
POOLED_DIRECT, UNPOOLED_HEAP = "PooledDirect", "UnpooledHeap"
POOLING_POLICIES = (POOLED_DIRECT, UNPOOLED_HEAP)
# bookieProtocol: "auto" speaks gRPC to a bookie that registers it and BookKeeper's native protocol otherwise;
# "native" speaks the native protocol to every bookie (as a Java client does), e.g. to measure it.
AUTO, NATIVE = "auto", "native"
BOOKIE_PROTOCOLS = (AUTO, NATIVE)


def _key(default, doc: str):
    """A key with its default and one line of meaning (docs/reference/ renders them)."""
    return field(default=default, metadata={"doc": doc})


@dataclass
class ClientConfiguration:
    addEntryTimeout: float = _key(5.0, "seconds; a bookie slower than this to acknowledge an add is replaced "
                                       "(BookKeeper's addEntryTimeoutSec)")
    readTimeout: float = _key(5.0, "seconds a read waits for a bookie (BookKeeper's readEntryTimeoutSec)")
    speculativeReadTimeout: float = _key(2.0, "seconds before the next replica is asked too; 0 = off")
    explicitLacInterval: float = _key(0.0, "seconds; an idle writer sends its LAC this often (0 = off)")
    zkTimeout: int = _key(10000, "ZooKeeper session timeout, milliseconds")
    zkConnectTimeout: float = _key(15.0, "seconds to wait for ZooKeeper at start")
    maxPendingAdds: int = _key(50000, "entries in flight per ledger before an append blocks (back-pressure)")
    maxBatchEntries: int = _key(1024, "entries per add message to one bookie")
    maxBatchBytes: int = _key(1 << 20, "bytes per add message to one bookie")
    maxInflightBatchesPerBookie: int = _key(4, "add messages in flight to one bookie; more entries wait and batch")
    readBatchBytes: int = _key(4 << 20, "bytes per range-read message")
    enableDigestTypeAutodetection: bool = _key(True, "a reader takes the digest type from the ledger's metadata")
    # How a writer that cannot reach its bookies ends (BookKeeper's keys and defaults):
    addEntryQuorumTimeoutSec: float = _key(-1, "seconds; an add not acknowledged by AQ bookies within it fails the "
                                               "writer with BKAddEntryQuorumTimeoutException "
                                               "(PendingAddOp.timeoutQuorumWait); <= 0: off")
    maxNumEnsembleChanges: int = _key(2 ** 31 - 1, "per handle; the change past it fails the writer "
                                                   "(BKWriteException)")
    enableBookieFailureTracking: bool = _key(True, "a handle remembers the bookies that failed it: reads ask them "
                                                   "last (for bookieFailureHistoryExpirationMSec) and an ensemble "
                                                   "change never takes one back as a replacement until the writer's "
                                                   "next acknowledged entry (when none is left: "
                                                   "BKNotEnoughBookiesException)")
    bookieFailureHistoryExpirationMSec: int = _key(60000, "milliseconds a handle remembers a bookie that failed it")
    bookieErrorThresholdPerInterval: int = _key(100, "errors of one bookie within bookieHealthCheckIntervalSeconds "
                                                     "that quarantine it (BookieWatcherImpl.quarantineBookie)")
    bookieHealthCheckIntervalSeconds: int = _key(60, "the interval bookieErrorThresholdPerInterval counts in")
    bookieQuarantineTimeSeconds: int = _key(1800, "new ensembles and replacements avoid a quarantined bookie this "
                                                  "long, if others will do")
    nettyMaxFrameSizeBytes: int = _key(5 * 1024 * 1024, "the largest message a bookie takes (the same key as the "
                                                        "bookie's)")
    allocatorPoolingPolicy: str = _key(POOLED_DIRECT, "PooledDirect (glibc keeps freed multi-megabyte blocks for "
                                                      "reuse) or UnpooledHeap (the allocator left alone)")
    bookieProtocol: str = _key(AUTO, "auto: gRPC to a bookie that registers it, BookKeeper's native protocol "
                                     "otherwise; native: the native protocol to every bookie (as a Java client)")
    useV2WireProtocol: bool = _key(False, "native-protocol bookies: adds as v2 ADDENTRY (no protobuf; as Pulsar "
                                          "runs BookKeeper's client), on a connection of their own; the other "
                                          "requests stay v3, range reads are v2 batch reads")

    def __post_init__(self) -> None:
        if self.allocatorPoolingPolicy not in POOLING_POLICIES:
            raise ConfigurationException(f"allocatorPoolingPolicy {self.allocatorPoolingPolicy!r} is not one of "
                                         f"{', '.join(POOLING_POLICIES)}")
        if self.bookieProtocol not in BOOKIE_PROTOCOLS:
            raise ConfigurationException(f"bookieProtocol {self.bookieProtocol!r} is not one of "
                                         f"{', '.join(BOOKIE_PROTOCOLS)}")
        if self.maxNumEnsembleChanges < 0:
            raise ConfigurationException(f"maxNumEnsembleChanges {self.maxNumEnsembleChanges} is below 0")

    @classmethod
    def of(cls, values: dict | None = None, **overrides) -> "ClientConfiguration":
        names = {f.name for f in fields(cls)}
        merged = {**(values or {}), **overrides}
        unknown = sorted(set(merged) - names)
        if unknown:
            raise ConfigurationException(f"unknown client configuration keys {unknown}; allowed: {sorted(names)}")
        return cls(**merged)
