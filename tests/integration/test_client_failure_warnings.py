"""What a writer logs when a bookie fails (issue 33): one warning per failure, naming the bookie, however many
add messages were in flight to it (up to maxInflightBatchesPerBookie fail with it), and a warning again for a
later failure of another bookie. Real ZooKeeper and bookie processes, a bookie SIGKILLed mid-write."""
from __future__ import annotations

import logging
import os
import signal

import pytest

from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"
ENTRIES = 400  # appended one at a time: the first maxInflightBatchesPerBookie go out alone, the rest wait


def fail_mid_write(c, lh, bookie: str) -> None:
    """Stop ``bookie`` (SIGSTOP) while ENTRIES are appended: the other bookies acknowledge them (AQ=2) and
    maxInflightBatchesPerBookie add messages wait on it; then SIGKILL it, failing them all at once, and wait for
    the ensemble change that replaces it."""
    index = next(b.index for b in c.bookies if b.bookie_id == bookie)
    os.killpg(c.bookies[index].proc.pid, signal.SIGSTOP)
    futures = [lh.append_async(b"entry-%d" % i) for i in range(ENTRIES)]
    for future in futures:
        future.result(DEADLINE)
    c.kill_bookie(index, signal.SIGKILL)
    wait_for(lambda: bookie not in lh.ensemble, f"the ensemble change replacing {bookie}")
    lh.append_batch([b"after"] * 10).result(DEADLINE)


def warnings_naming(caplog, bookie: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("bookie.client") and bookie in r.getMessage()]


@pytest.mark.parametrize("protocol", ["auto", "native"])  # auto: gRPC, which these bookies register
def test_a_bookie_failure_is_warned_about_once_and_the_next_failure_again(bk_cluster, caplog, protocol):
    c, bk = bk_cluster(5, client_conf={"bookieProtocol": protocol})
    lh = bk.create_ledger(3, 3, 2, password=PW)
    lh.append_batch([b"warm-up"] * 10).result(DEADLINE)  # connections to the ensemble are up
    first, second = lh.ensemble[0], lh.ensemble[1]
    caplog.set_level(logging.DEBUG, logger="bookie.client")

    fail_mid_write(c, lh, first)
    said = warnings_naming(caplog, first)
    assert len(said) == 1 and "changing the ensemble" in said[0], said

    fail_mid_write(c, lh, second)  # a distinct failure of another bookie: warned about too
    assert len(warnings_naming(caplog, second)) == 1, warnings_naming(caplog, second)
    assert len(warnings_naming(caplog, first)) == 1
    lh.close()
