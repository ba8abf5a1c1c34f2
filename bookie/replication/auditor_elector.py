"""Who is the auditor: BookKeeper's AuditorElector, a ZooKeeper leader election.

Every AutoRecovery process votes with an EPHEMERAL_SEQUENTIAL node
``<root>/underreplication/auditorelection/V_<seq>`` holding an ``AuditorVoteFormat`` (protobuf text format).
The lowest sequence number is the auditor; every other voter watches only its predecessor (no herd when
the auditor goes). The winner also writes its vote into the ``auditorelection`` node itself, where
BookKeeper's ``whoisauditor`` looks. A voter whose session expired (its vote gone with it) stops being the
auditor at once, before it votes again: meanwhile another participant may have been elected (BookKeeper's
AutoRecoveryMain shuts down on an expiry instead; here the participant stays and rejoins the election).
Each voter also watches its own vote, so it learns of the loss as soon as its client has a new session.

``LeaderElection`` is the recipe (kazoo's model: recipes apart from the client); ``AuditorElector`` runs it
on a thread and starts or stops the ``Auditor`` as the election turns. ``auditor_election_attempts`` counts
the attempts made after waiting for a predecessor to go (ZkLedgerAuditorManager's ELECTION_ATTEMPTS).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from google.protobuf import text_format

from bookie.exceptions import BKException
from bookie.meta import layout
from bookie.meta.metadata_store import MetadataStore
from bookie.proto.data_formats_pb2 import AuditorVoteFormat
from bookie.replication.replication_stats import ELECTION_ATTEMPTS
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)

ELECTION_ZNODE = "auditorelection"  # BookKeeperConstants / AuditorElector
VOTE_PREFIX = "V_"
ELECTION_PATH = f"{layout.UNDER_REPLICATION_NODE}/{ELECTION_ZNODE}"
RECHECK_SECONDS = 5.0  # safety net only: the watches wake the election; this covers a lost session


def encode_vote(bookie_id: str) -> bytes:
    return text_format.MessageToString(AuditorVoteFormat(bookieId=bookie_id)).encode()


def decode_vote(data: bytes) -> str:
    vote = AuditorVoteFormat()
    text_format.Merge(data.decode(), vote)
    return vote.bookieId


def vote_sequence(name: str) -> int:
    """The sequence number of a vote node ``V_0000000012`` (ElectionComparator orders by it)."""
    return int(name.rpartition("_")[2])


def ordered_votes(children: list[str]) -> list[str]:
    return sorted((c for c in children if c.startswith(VOTE_PREFIX)), key=vote_sequence)


def current_auditor(store: MetadataStore) -> str | None:
    """The auditor's id: the lowest vote's (as BookKeeper's AuditorElector.getCurrentAuditor); None if no
    one votes."""
    for name in ordered_votes(store.node_children(ELECTION_PATH)):
        node = store.read_node(f"{ELECTION_PATH}/{name}")
        if node is not None:  # a vote may go between the listing and the read: the next one leads then
            return decode_vote(node.value)
    return None


class LeaderElection:
    """One vote in the election: ``check()`` says whether it leads, and otherwise watches the predecessor
    so that ``wake`` is called when it may lead. It watches its own vote too: ``wake`` is called when the
    vote goes (its session expired), and the next ``check()`` calls ``on_lost`` before voting again."""

    def __init__(self, store: MetadataStore, path: str, data: bytes, wake: Callable[[], None],
                 on_lost: Callable[[], None] = lambda: None):
        self.store = store
        self.path = path
        self.data = data
        self.wake = wake
        self.on_lost = on_lost
        self.vote: str | None = None  # our node's name, e.g. V_0000000003
        self._unwatch_own: Callable[[], None] | None = None
        self._unwatch: Callable[[], None] | None = None

    def check(self) -> bool:
        """Vote if we have no live vote (``on_lost`` first if we had one), then True if ours is the lowest."""
        votes = ordered_votes(self.store.node_children(self.path))
        if self.vote is not None and self.vote not in votes:
            log.warning("the vote %s/%s is gone with its ZooKeeper session", self.path, self.vote)
            self._stop_watching()
            self.vote = None
            self.on_lost()
        if self.vote is None:
            created = self.store.create_node(f"{self.path}/{VOTE_PREFIX}", self.data, ephemeral=True, sequential=True)
            self.vote = created.rpartition("/")[2]
            log.info("voted for the auditor as %s/%s", self.path, self.vote)
            self._unwatch_own = self.store.watch_node(f"{self.path}/{self.vote}",
                                                      lambda node: node is None and self.wake())
            votes = ordered_votes(self.store.node_children(self.path))
            if self.vote not in votes:  # gone already (an expiry right after the vote): vote again at once
                self.wake()
                return False
        mine = votes.index(self.vote)
        self._stop_watching_predecessor()
        if mine == 0:
            return True
        # Watch the predecessor only (no herd when the auditor goes); gone already: look again at once.
        self._unwatch = self.store.watch_node(f"{self.path}/{votes[mine - 1]}",
                                              lambda node: node is None and self.wake())
        return False

    def _stop_watching_predecessor(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def _stop_watching(self) -> None:
        self._stop_watching_predecessor()
        if self._unwatch_own is not None:
            self._unwatch_own()
            self._unwatch_own = None

    def withdraw(self) -> None:
        self._stop_watching()
        if self.vote is not None:
            self.store.delete_node(f"{self.path}/{self.vote}")
            self.vote = None


class AuditorElector:
    """Runs the election for ``bookie_id`` and calls ``on_elected()`` when it becomes the auditor,
    ``on_revoked()`` when it stops being it (its vote lost with its session, or shutdown)."""

    def __init__(self, bookie_id: str, store: MetadataStore, on_elected: Callable[[], None],
                 on_revoked: Callable[[], None], stats_logger: StatsLogger = NULL_STATS_LOGGER):
        """``stats_logger``: the auditor's scope (``auditor``)."""
        self.bookie_id = bookie_id
        self._attempts = stats_logger.get_counter(ELECTION_ATTEMPTS)
        self.store = store
        self.on_elected = on_elected
        self.on_revoked = on_revoked
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.election = LeaderElection(store, ELECTION_PATH, encode_vote(bookie_id), self._wake.set, self._vote_lost)
        self.is_auditor = False
        self._thread = threading.Thread(target=self._run, name="AuditorElector", daemon=True)

    def start(self) -> "AuditorElector":
        self._thread.start()
        return self

    def _run(self) -> None:
        again = False  # a predecessor (or our vote) went: the next check is another attempt
        while not self._stop.is_set():
            self._wake.clear()
            try:
                if again:
                    self._attempts.inc()
                leads = self.election.check()
                if leads and not self.is_auditor:
                    self._become_auditor()
                elif not leads and self.is_auditor:
                    self._step_down()
            except BKException:
                if self._stop.is_set():  # stopping: the session was closed under the check
                    break
                log.exception("auditor election: ZooKeeper failed; trying again")
            again = self._wake.wait(RECHECK_SECONDS) and not self.is_auditor
        if self.is_auditor:
            self._step_down()

    def _become_auditor(self) -> None:
        # Where BookKeeper's whoisauditor and other tools read the auditor from.
        self.store.write_node(ELECTION_PATH, self.election.data, -1)
        self.is_auditor = True
        log.info("%s is the auditor", self.bookie_id)
        try:
            self.on_elected()
        except BKException:  # half started: stopped again, and started whole at a later check
            self._step_down()
            raise

    def _vote_lost(self) -> None:
        """Our vote went with our session: whoever leads now, it is not us until the new vote says so."""
        if self.is_auditor:
            log.warning("%s lost its ZooKeeper session: it stops being the auditor before voting again",
                        self.bookie_id)
            self._step_down()

    def _step_down(self) -> None:
        self.is_auditor = False
        log.info("%s is no longer the auditor", self.bookie_id)
        self.on_revoked()

    def stop(self) -> None:
        """Tell the election thread to end (``shutdown`` waits for it)."""
        self._stop.set()
        self._wake.set()

    def shutdown(self) -> None:
        self.stop()
        if self._thread.is_alive():
            self._thread.join()
        try:
            self.election.withdraw()
        except BKException:
            log.warning("could not withdraw the auditor vote (it goes with the session)")
