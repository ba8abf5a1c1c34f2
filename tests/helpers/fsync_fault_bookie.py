"""A real bookie process whose journal fsync fails once, on command (tests/test_journal_faults.py).

    python -m tests.helpers.fsync_fault_bookie CONF_PATH CONTROL_DIR

Runs ``bk bookie --conf CONF_PATH`` in this process after replacing ``Journal._fdatasync`` here only
(production code has no switch for it). The test drives the fault through files in CONTROL_DIR:

- it creates ``arm``: the next journal fsync is the one that fails;
- that fsync creates ``holding`` and blocks reading the FIFO ``release`` (so the test can queue more
  groups behind it while the force-write thread is held);
- the test writes to ``release``: the fsync raises EIO, as a failing disk does.
"""
from __future__ import annotations

import errno
import os
import sys

from bookie.cli.main import main
from bookie.server.journal import Journal


def install(control_dir: str) -> None:
    original = Journal._fdatasync
    fired = [False]

    def fdatasync(self: Journal, fd: int) -> None:
        if fired[0] or not os.path.exists(os.path.join(control_dir, "arm")):
            return original(self, fd)
        fired[0] = True
        open(os.path.join(control_dir, "holding"), "w").close()
        with open(os.path.join(control_dir, "release")) as fifo:  # blocks until the test writes
            fifo.read()
        raise OSError(errno.EIO, "injected journal fsync failure")

    Journal._fdatasync = fdatasync


if __name__ == "__main__":
    conf_path, control = sys.argv[1], sys.argv[2]
    os.mkfifo(os.path.join(control, "release"))
    install(control)
    sys.exit(main(["bookie", "--conf", conf_path]))
