from __future__ import annotations

import os

import pytest

from bookie.server import Bookie, ServerConfiguration


def engine_settings(root, **overrides) -> dict:
    """Settings for a storage engine under ``root``; tests pass BookKeeper keys to shrink limits."""
    settings = {
        "journalDirectories": os.path.join(str(root), "journal"),
        "ledgerDirectories": os.path.join(str(root), "ledgers"),
        "journalFlushWhenQueueEmpty": True,
        "flushInterval": 3600000,  # checkpoints only when a test asks, unless it overrides this
        "diskCheckInterval": 3600000,
        "journalPreAllocSizeMB": 1,
    }
    settings.update(overrides)
    return settings


@pytest.fixture
def make_bookie(tmp_path):
    """Start bookies on tmp_path; each is shut down at the end of the test if still running."""
    started: list[Bookie] = []

    def make(**overrides) -> Bookie:
        bookie = Bookie(ServerConfiguration(engine_settings(tmp_path, **overrides))).start()
        started.append(bookie)
        return bookie

    yield make
    for bookie in started:
        bookie.shutdown()


def run_then_sigkill(settings: dict, ops: list) -> None:
    """Run ``ops`` in a child engine (tests/helpers/engine_ops.py) and SIGKILL it once they are acknowledged."""
    import json

    from tests.procs import child

    with child("-m", "tests.helpers.engine_ops", json.dumps(settings), json.dumps(ops)) as proc:
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read()


def flip_byte(path, offset: int, mask: int = 0x40) -> None:
    """Corrupt one byte of a file in place, as a bad disk would."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ mask]))
