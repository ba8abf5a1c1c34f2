"""GET /api/v1/bookie/sanity (BookKeeper's BookieSanityService over SanityTestCommand): a ledger on exactly this
bookie (E=WQ=AQ=1), entries written, the ledger closed, opened and read back, then deleted
(BookKeeperAdmin.sanity_test, as ``bk shell bookiesanity``); ``{"passed": bool, "readOnly": bool}``. A read-only
bookie (forceReadOnlyBookie, or switched at run time) is not written to: ``{"passed": false, "readOnly": true}``. One test at a time, as BookKeeper's: a request that
waits more than 5 s for the running one is answered 500.

Each test opens its own client, as SanityTestCommand does, with short timeouts and no ensemble change, so a bookie
that does not take the writes fails the test instead of being replaced.
"""
from __future__ import annotations

import asyncio
import logging

from bookie.client import BookKeeper
from bookie.client.bookkeeper_admin import BookKeeperAdmin
from bookie.http.http_service import INTERNAL_ERROR, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import BookieServerService

log = logging.getLogger(__name__)
LOCK_TIMEOUT = 5.0  # seconds a request waits for the test running (BookieSanityService's TIMEOUT_MS)
# Seconds each write and read may take. BookKeeper's default is 1 s; a probe that fails on a busy machine would
# flap, so a little more.
OP_TIMEOUT = 5.0


class BookieSanityService(BookieServerService):
    WRONG_METHOD = "Only support GET method to retrieve bookie sanity state."

    def __init__(self, conf, bookie_server=None):
        super().__init__(conf, bookie_server)
        self._lock = asyncio.Lock()

    async def answer(self, request: HttpServiceRequest) -> HttpServiceResponse:
        """A read-only bookie answers at once; a test waits its turn on the loop, then runs on a worker thread."""
        bookie = self.bookie_if_running()
        read_only = bookie.read_only if bookie is not None else self.conf["forceReadOnlyBookie"]
        if read_only:
            return HttpServiceResponse.json({"passed": False, "readOnly": True})
        try:
            await asyncio.wait_for(self._lock.acquire(), LOCK_TIMEOUT)
        except asyncio.TimeoutError:
            return HttpServiceResponse.text("Timing out due to max number of sanity request are running "
                                            "concurrently", INTERNAL_ERROR)
        try:
            return await super().answer(request)
        finally:
            self._lock.release()

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        server = self.bookie_server
        bookie_id = server.bookie_id if server is not None else self.conf.bookie_id
        client_conf = {"addEntryTimeout": OP_TIMEOUT, "readTimeout": OP_TIMEOUT, "maxNumEnsembleChanges": 0,
                       "zkTimeout": self.conf["zkTimeout"]}
        with BookKeeper(self.conf.metadata_service_uri, client_conf) as bk:
            error = BookKeeperAdmin(bk).sanity_test(bookie_id)
        if error is not None:
            log.warning("bookie sanity test failed on %s: %s", bookie_id, error)
        return HttpServiceResponse.json({"passed": error is None, "readOnly": False})
