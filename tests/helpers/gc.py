"""Driving a bookie's garbage collector from tests (the GarbageCollection request, as ``bk shell gc``)."""
from __future__ import annotations

from bookie.client import BookKeeper
from bookie.proto import bookkeeper_pb2 as pb
from tests.helpers.waiting import wait_for

NO_TIMED_PASS = {"gcWaitTime": 3_600_000}  # only forced passes run


def forced_pass(bk: BookKeeper, bookie: str) -> pb.GarbageCollectionResponse:
    """Force a GC pass on ``bookie``, wait until it has run; the bookie's GC state after it."""
    client = bk.bookie_client(bookie)
    target = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
    wait_for(lambda: client.garbage_collection().passes >= target, f"GC pass {target} of {bookie}")
    return client.garbage_collection()
