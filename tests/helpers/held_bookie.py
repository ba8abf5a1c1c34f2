"""A real bookie process that a test holds at one point, on command (tests/integration/, tests/spark/).

    python -m tests.helpers.held_bookie CONF_PATH CONTROL_DIR {fsync|write|gc-read-ledger|range-read|list-entries}

Runs ``bk bookie --conf CONF_PATH`` in this process after replacing one method here only (production
code has no switch for it):

- ``fsync`` (``Journal._fdatasync``): the force-write thread is held, then the fsync raises EIO, as a
  failing disk does; the journal thread meanwhile writes the groups queued behind it;
- ``write`` (``Journal._flush``): the journal thread is held before it writes a group, then writes it;
  meanwhile nothing is written or acknowledged and the journal queue fills (back-pressure);
- ``gc-read-ledger`` (``ZKMetadataStore.read_ledger``): the garbage collector is held just after it
  read the metadata of the ledger whose id the ``arm`` file holds, before it acts on what it read;
- ``range-read`` (``BookieServicer._range_message``, one message of a gRPC range read,
  ``multi_range_read.next_message``, one message of a read of several ranges, and
  ``batched_read_entry_processor.read_batch``, a native batch read): once the ``arm`` file exists, the bookie
  serves as many range reads as it holds (a number, 0 if empty), then holds the next one before it
  reads anything for it (its client is mid-read, waiting), while the other reads go on being served;
- ``list-entries`` (``BookieServicer._list_of_entries``, a ledger's list of entries for GetListOfEntriesOfLedger
  and GetListOfEntriesOfLedgers): once the ``arm`` file exists, every list is held until the release (a bookie
  slow to list a big ledger), then all are served.

The test drives the hold through files in CONTROL_DIR (``Hold`` below):

- it creates ``arm`` (with a ledger id for ``gc-read-ledger``, the reads to serve first for
  ``range-read``): the next matching call is the held one;
- that call creates ``holding`` and blocks reading the FIFO ``release``;
- the test writes to ``release``.
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bookie.cli.main import main
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server import batched_read_entry_processor, multi_range_read
from bookie.server.journal import Journal
from bookie.server.request_processor import BookieServicer
from tests.helpers.waiting import wait_for
from tests.procs import child_env

ARM, HOLDING, RELEASE = "arm", "holding", "release"
GC_THREAD = "GarbageCollectorThread"


def _armed(control_dir: str) -> str | None:
    """The arm file's text, None while it does not exist."""
    try:
        with open(os.path.join(control_dir, ARM)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def _wait_release(control_dir: str) -> None:
    open(os.path.join(control_dir, HOLDING), "w").close()
    with open(os.path.join(control_dir, RELEASE)) as fifo:  # blocks until the test writes
        fifo.read()


def held_before(control_dir: str, original: Callable, fail: bool) -> Callable:
    """``original`` whose first call after ``arm`` waits for the release, then fails with EIO or goes on."""
    fired = [False]

    def method(self, *args):
        if fired[0] or _armed(control_dir) is None:
            return original(self, *args)
        fired[0] = True
        _wait_release(control_dir)
        if fail:
            raise OSError(errno.EIO, "injected journal fsync failure")
        return original(self, *args)

    return method


def held_after_gc_read(control_dir: str, original: Callable) -> Callable:
    """``read_ledger`` that, called by the GC thread for the armed ledger, returns only after the release."""
    fired = [False]

    def method(self, ledger, *args, **kwargs):
        result = original(self, ledger, *args, **kwargs)
        if not fired[0] and threading.current_thread().name == GC_THREAD and \
                _armed(control_dir) == str(ledger.ledger_id):
            fired[0] = True
            _wait_release(control_dir)
        return result

    return method


def held_after_reads(control_dir: str, originals: dict[object, str]) -> None:
    """Replace each ``owner.name`` of ``originals`` (range reads; a class's method or a module's function):
    counted together once armed, the read after as many as the arm file says waits for the release, then
    goes on; the others are served meanwhile."""
    lock = threading.Lock()
    served, fired = [0], [False]

    def held(original: Callable) -> Callable:
        def method(*args):
            armed = _armed(control_dir)
            if armed is not None and not fired[0]:
                with lock:
                    hold = not fired[0] and served[0] >= int(armed or 0)
                    fired[0] = fired[0] or hold
                    served[0] += 1
                if hold:
                    _wait_release(control_dir)
            return original(*args)
        return method

    for cls, name in originals.items():
        setattr(cls, name, held(getattr(cls, name)))


def held_until_released(control_dir: str, original: Callable) -> Callable:
    """``original`` whose every call after ``arm`` waits for the one release (the calls held meanwhile all go on
    then: the FIFO's writer closing ends every reader's wait); later calls run at once."""
    released = threading.Event()

    def method(self, *args):
        if not released.is_set() and _armed(control_dir) is not None:
            _wait_release(control_dir)
            released.set()
        return original(self, *args)

    return method


def install(control_dir: str, mode: str) -> None:
    if mode == "gc-read-ledger":
        ZKMetadataStore.read_ledger = held_after_gc_read(control_dir, ZKMetadataStore.read_ledger)
    elif mode == "list-entries":
        BookieServicer._list_of_entries = held_until_released(control_dir, BookieServicer._list_of_entries)
    elif mode == "range-read":
        held_after_reads(control_dir, {BookieServicer: "_range_message", batched_read_entry_processor: "read_batch",
                                       multi_range_read: "next_message"})
    else:
        name = {"fsync": "_fdatasync", "write": "_flush"}[mode]
        setattr(Journal, name, held_before(control_dir, getattr(Journal, name), fail=mode == "fsync"))


# -- the test's side ---------------------------------------------------------------------------------
@dataclass
class Hold:
    control_dir: Path

    def arm(self, ledger_id: int | None = None, after_reads: int | None = None) -> None:
        """Arm the hold: ``ledger_id`` for ``gc-read-ledger``, ``after_reads`` (range reads served first) for
        ``range-read``."""
        value = ledger_id if after_reads is None else after_reads
        staged = self.control_dir / (ARM + ".new")  # renamed into place: the bookie never reads it half written
        staged.write_text("" if value is None else str(value))
        os.replace(staged, self.control_dir / ARM)

    def holding(self) -> bool:
        return (self.control_dir / HOLDING).exists()

    def wait_holding(self, what: str) -> None:
        wait_for(self.holding, what)

    def release(self) -> None:
        with open(self.control_dir / RELEASE, "w") as fifo:
            fifo.write("go")


def restart_held(cluster, index: int, control_dir: Path, mode: str) -> Hold:
    """Restart bookie ``index`` of a LocalBookKeeper as this process, on its own conf, and wait for its
    registration; the cluster still stops it by PID."""
    bookie = cluster.bookies[index]
    cluster.kill_bookie(index, signal.SIGTERM)
    control_dir.mkdir()
    with open(bookie.log_path, "ab") as log:
        bookie.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.held_bookie", bookie.conf_path, str(control_dir), mode],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=child_env())
    cluster.wait_registered(index)
    return Hold(control_dir)


if __name__ == "__main__":
    conf_path, control, hold_mode = sys.argv[1:4]
    os.mkfifo(os.path.join(control, RELEASE))
    install(control, hold_mode)
    sys.exit(main(["bookie", "--conf", conf_path]))
