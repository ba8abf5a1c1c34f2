"""GET /api/v1/bookie/last_log_mark (BookKeeper's GetLastLogMarkService): each journal's LastLogMark, as
``{"LastLogMark: Journal Id - <id>(<hex id>.txn)": "Pos - <offset>"}``.

In a bookie, the live marks: what each journal has written and fsynced so far (Journal.getLastLogMark's current
mark). Without a running bookie (``bk autorecovery``, or a bookie still replaying) the marks persisted in the
configuration's ledger directories, which is what BookKeeper's service reads in every case.
"""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import BookieServerService
from bookie.server.journal import LogMark
from bookie.server.last_log_mark import read_last_mark


class GetLastLogMarkService(BookieServerService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        return HttpServiceResponse.json({f"LastLogMark: Journal Id - {mark.log_id}({mark.log_id:x}.txn)":
                                         f"Pos - {mark.offset}" for mark in self._marks()})

    def _marks(self) -> list[LogMark]:
        bookie = self.bookie_if_running()
        if bookie is not None:
            return [journal.last_log_mark for journal in bookie.journals]
        count = len(self.conf.journal_dirs)
        return [read_last_mark(self.conf.ledger_dirs, i, count) for i in range(count)]
