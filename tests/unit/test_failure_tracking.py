"""How a client keeps failed bookies out and bounds its waits (issue 30, item 3): replacements never taken
from the bookies that failed a writer, the client's quarantine (BookieQuarantine), the bounded wait for a
metadata update (within_doubt_window), the read order after failures, BookKeeper's keys. No processes."""
from __future__ import annotations

import threading
import types

import pytest

from bookie.client.conf import ClientConfiguration
from bookie.client.ensemble_change import abandon_check, within_doubt_window
from bookie.client.ensemble_placement import BookieQuarantine, replace_bookies
from bookie.client.ledger_reader import LedgerReader
from bookie.exceptions import (BKInterruptedException, BKNotEnoughBookiesException, BKZKConnectionLossException,
                               ConfigurationException)
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from tests.helpers.waiting import DEADLINE

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def avoided(quarantine: BookieQuarantine, clock: Clock, after: float = 0.0) -> set[str]:
    """What ``quarantine`` avoids ``after`` more seconds."""
    clock.now += after
    return quarantine.avoid()


def test_bookkeepers_keys_and_defaults():
    conf = ClientConfiguration()
    assert (conf.addEntryQuorumTimeoutSec, conf.maxNumEnsembleChanges, conf.enableBookieFailureTracking,
            conf.bookieFailureHistoryExpirationMSec, conf.bookieErrorThresholdPerInterval,
            conf.bookieHealthCheckIntervalSeconds, conf.bookieQuarantineTimeSeconds) == \
        (-1, 2 ** 31 - 1, True, 60000, 100, 60, 1800)
    with pytest.raises(ConfigurationException, match="maxNumEnsembleChanges -1 is below 0"):
        ClientConfiguration.of(maxNumEnsembleChanges=-1)


def test_a_bookie_that_failed_the_writer_is_never_its_replacement():
    for _ in range(20):
        assert replace_bookies(["a", "b", "c", "x", "d"], ["a", "b", "c"], {1}, set(), {"x"}) == ["a", "d", "c"]
    with pytest.raises(BKNotEnoughBookiesException):  # unlike a quarantined one, not even as a last resort
        replace_bookies(["a", "b", "c", "x"], ["a", "b", "c"], {1}, set(), {"x"})


def test_a_failed_bookie_is_avoided_for_the_failure_history_expiration():
    clock = Clock()
    quarantine = BookieQuarantine(ClientConfiguration(), clock)
    quarantine.failed("a")
    assert avoided(quarantine, clock) == {"a"}
    assert avoided(quarantine, clock, 59.9) == {"a"}
    assert avoided(quarantine, clock, 0.2) == set()


def test_without_failure_tracking_only_a_quarantine_avoids_a_bookie():
    clock = Clock()
    quarantine = BookieQuarantine(ClientConfiguration(enableBookieFailureTracking=False,
                                                      bookieErrorThresholdPerInterval=3), clock)
    quarantine.failed("a")
    quarantine.failed("a")
    assert quarantine.avoid() == set()
    quarantine.failed("a")
    assert quarantine.avoid() == {"a"}


def test_errors_past_the_threshold_within_one_interval_quarantine_a_bookie_for_the_quarantine_time():
    clock = Clock()
    conf = ClientConfiguration(enableBookieFailureTracking=False, bookieErrorThresholdPerInterval=3,
                               bookieHealthCheckIntervalSeconds=60, bookieQuarantineTimeSeconds=600)
    quarantine = BookieQuarantine(conf, clock)
    for _ in range(2):
        quarantine.failed("slow")
        clock.now += 40  # two errors, then a third in the next interval: no quarantine
    quarantine.failed("slow")
    assert quarantine.avoid() == set()
    quarantine.failed("slow")
    quarantine.failed("slow")
    assert avoided(quarantine, clock) == {"slow"}
    assert avoided(quarantine, clock, 599) == {"slow"}
    assert avoided(quarantine, clock, 2) == set()


def test_a_metadata_update_that_does_not_return_fails_after_the_doubt_window_and_writes_nothing_more():
    conf = types.SimpleNamespace(zkTimeout=20, zkConnectTimeout=0.2)  # doubt window: 0.2 s
    release, refused, transformed = threading.Event(), threading.Event(), []

    def update(abandoned):
        release.wait()  # a kazoo request queued while ZooKeeper cannot be reached
        try:
            return abandon_check(abandoned, transformed.append)("metadata")
        except BKInterruptedException:  # not a connection loss: the update loop would retry that
            refused.set()
            raise

    with pytest.raises(BKZKConnectionLossException, match="ledger 7 change: ZooKeeper did not answer within 0.2 s"):
        within_doubt_window(conf, "ledger 7 change", update)
    release.set()  # ZooKeeper answers again: the abandoned update transforms (writes) nothing
    assert refused.wait(DEADLINE)
    assert transformed == []
    assert within_doubt_window(conf, "ledger 7 change", lambda abandoned: "done") == "done"


def test_replicas_that_failed_are_read_last_while_in_the_history():
    ledger = LedgerId.of(5)
    bk = types.SimpleNamespace(conf=ClientConfiguration(bookieFailureHistoryExpirationMSec=60000))
    reader = LedgerReader(bk, ledger, DigestManager(ledger, b"pw"))
    ensemble = ["a", "b", "c"]
    assert reader._in_read_order([0, 1, 2], ensemble) == [0, 1, 2]
    reader.bookie_failed("a")
    assert reader._in_read_order([0, 1, 2], ensemble) == [1, 2, 0]
    assert reader._in_read_order([2, 0, 1], ensemble) == [2, 1, 0]
    reader._failed_at["a"] -= 61  # as if a minute had passed
    assert reader._in_read_order([0, 1, 2], ensemble) == [0, 1, 2]
    untracked = LedgerReader(types.SimpleNamespace(conf=ClientConfiguration(enableBookieFailureTracking=False)),
                             ledger, DigestManager(ledger, b"pw"))
    untracked.bookie_failed("a")
    assert untracked._in_read_order([0, 1, 2], ensemble) == [0, 1, 2]
