"""A real bookie process whose journal a test holds, on command (tests/integration/).

    python -m tests.helpers.held_journal_bookie CONF_PATH CONTROL_DIR {fsync|write}

Runs ``bk bookie --conf CONF_PATH`` in this process after replacing one ``Journal`` method here only
(production code has no switch for it):

- ``fsync`` (``Journal._fdatasync``): the force-write thread is held, then the fsync raises EIO, as a
  failing disk does; the journal thread meanwhile writes the groups queued behind it;
- ``write`` (``Journal._flush``): the journal thread is held before it writes a group, then writes it;
  meanwhile nothing is written or acknowledged and the journal queue fills (back-pressure).

The test drives the hold through files in CONTROL_DIR (``JournalHold`` below):

- it creates ``arm``: the next call of the method is the held one;
- that call creates ``holding`` and blocks reading the FIFO ``release``;
- the test writes to ``release``.
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bookie.cli.main import main
from bookie.server.journal import Journal
from tests.helpers.waiting import wait_for
from tests.procs import child_env

ARM, HOLDING, RELEASE = "arm", "holding", "release"
MODES = {"fsync": "_fdatasync", "write": "_flush"}


def held(control_dir: str, original: Callable, fail: bool) -> Callable:
    """``original`` whose first call after ``arm`` waits for the release, then fails with EIO or goes on."""
    fired = [False]

    def method(self: Journal, *args):
        if fired[0] or not os.path.exists(os.path.join(control_dir, ARM)):
            return original(self, *args)
        fired[0] = True
        open(os.path.join(control_dir, HOLDING), "w").close()
        with open(os.path.join(control_dir, RELEASE)) as fifo:  # blocks until the test writes
            fifo.read()
        if fail:
            raise OSError(errno.EIO, "injected journal fsync failure")
        return original(self, *args)

    return method


def install(control_dir: str, mode: str) -> None:
    name = MODES[mode]
    setattr(Journal, name, held(control_dir, getattr(Journal, name), fail=mode == "fsync"))


# -- the test's side ---------------------------------------------------------------------------------
@dataclass
class JournalHold:
    control_dir: Path

    def arm(self) -> None:
        (self.control_dir / ARM).touch()

    def wait_holding(self, what: str) -> None:
        wait_for((self.control_dir / HOLDING).exists, what)

    def release(self) -> None:
        with open(self.control_dir / RELEASE, "w") as fifo:
            fifo.write("go")


def restart_with_held_journal(cluster, index: int, control_dir: Path, mode: str) -> JournalHold:
    """Restart bookie ``index`` of a LocalBookKeeper as this process, on its own conf, and wait for its
    registration; the cluster still stops it by PID."""
    bookie = cluster.bookies[index]
    cluster.kill_bookie(index, signal.SIGTERM)
    control_dir.mkdir()
    with open(bookie.log_path, "ab") as log:
        bookie.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.held_journal_bookie", bookie.conf_path, str(control_dir), mode],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=child_env())
    cluster.wait_registered(index)
    return JournalHold(control_dir)


if __name__ == "__main__":
    conf_path, control, hold_mode = sys.argv[1:4]
    os.mkfifo(os.path.join(control, RELEASE))
    install(control, hold_mode)
    sys.exit(main(["bookie", "--conf", conf_path]))
