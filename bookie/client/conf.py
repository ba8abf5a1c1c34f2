"""Client configuration: BookKeeper's ClientConfiguration keys and defaults."""
from __future__ import annotations

from dataclasses import dataclass, fields

from bookie.exceptions import ConfigurationException

# allocatorPoolingPolicy (BookKeeper's PoolingPolicy): PooledDirect reuses large buffers (here: glibc keeps
# freed multi-megabyte blocks for reuse, bookie/util/allocator.py); UnpooledHeap leaves the allocator alone.
POOLED_DIRECT, UNPOOLED_HEAP = "PooledDirect", "UnpooledHeap"
POOLING_POLICIES = (POOLED_DIRECT, UNPOOLED_HEAP)
# bookieProtocol: "auto" speaks gRPC to a bookie that registers it and BookKeeper's native protocol otherwise;
# "native" speaks the native protocol to every bookie (as a Java client does), e.g. to measure it.
AUTO, NATIVE = "auto", "native"
BOOKIE_PROTOCOLS = (AUTO, NATIVE)


@dataclass
class ClientConfiguration:
    addEntryTimeout: float = 5.0  # seconds; a bookie slower than this is replaced (addEntryTimeoutSec)
    readTimeout: float = 5.0  # seconds (readEntryTimeoutSec)
    speculativeReadTimeout: float = 2.0  # seconds before the next replica is asked too; 0 = off
    explicitLacInterval: float = 0.0  # seconds; an idle writer sends its LAC this often (0 = off)
    zkTimeout: int = 10000  # ms
    zkConnectTimeout: float = 15.0  # seconds to wait for ZooKeeper at start
    maxPendingAdds: int = 50000  # entries in flight per ledger before append blocks (back-pressure)
    maxBatchEntries: int = 1024  # entries per add message to one bookie
    maxBatchBytes: int = 1 << 20  # bytes per add message to one bookie
    maxInflightBatchesPerBookie: int = 4  # add messages in flight to one bookie; more entries wait and batch
    readBatchBytes: int = 4 << 20  # bytes per range-read message
    enableDigestTypeAutodetection: bool = True
    # How a writer that cannot reach its bookies ends (BookKeeper's keys and defaults):
    addEntryQuorumTimeoutSec: float = -1  # seconds; an add not acknowledged by AQ bookies within it fails the
    #   writer with BKAddEntryQuorumTimeoutException (PendingAddOp.timeoutQuorumWait); <= 0: off
    maxNumEnsembleChanges: int = 2 ** 31 - 1  # per handle; the change past it fails the writer (BKWriteException)
    enableBookieFailureTracking: bool = True  # a handle remembers the bookies that failed it: reads ask them
    #   last (for bookieFailureHistoryExpirationMSec) and an ensemble change never takes one back as a
    #   replacement until the writer's next acknowledged entry (when none is left: BKNotEnoughBookiesException)
    bookieFailureHistoryExpirationMSec: int = 60000
    bookieErrorThresholdPerInterval: int = 100  # errors of one bookie within bookieHealthCheckIntervalSeconds
    bookieHealthCheckIntervalSeconds: int = 60  # that quarantine it (BookieWatcherImpl.quarantineBookie):
    bookieQuarantineTimeSeconds: int = 1800  # new ensembles and replacements avoid it this long, if others will do
    nettyMaxFrameSizeBytes: int = 5 * 1024 * 1024  # the largest message a bookie takes (same key as the bookie's)
    allocatorPoolingPolicy: str = POOLED_DIRECT  # see POOLING_POLICIES
    bookieProtocol: str = AUTO  # see BOOKIE_PROTOCOLS
    useV2WireProtocol: bool = False  # native-protocol bookies: adds as v2 ADDENTRY (no protobuf; as Pulsar runs
    #   BookKeeper's client), on a connection of their own; the other requests stay v3, range reads are v2 batch reads

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
