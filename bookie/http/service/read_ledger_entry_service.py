"""GET /api/v1/ledger/read?ledger_id=N[&start_entry_id=A][&end_entry_id=B][&page=P] (BookKeeper's
ReadLedgerEntryService): ``{"entryId": "payload", ...}``, each payload read as US-ASCII text as BookKeeper
reads it (a byte beyond ASCII becomes U+FFFD). The ledger is read as an admin reads it
(BookKeeperAdmin.readEntries): with the password in its metadata, never fenced; an open ledger up to its LAC.

``end_entry_id`` -1 (the default) reads to the ledger's end; ``page=P`` reads the Pth ENTRIES_PER_PAGE entries
(within start/end when they are narrower) and says so under ``"Entries for page: "``, as BookKeeper does.
One request reads at most MAX_ENTRIES_PER_REQUEST entries: a wider range is refused (400) rather than read
into one answer; narrow it, or read it page by page."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse, RequestRefused
from bookie.http.service.cluster_service import ClusterService

ENTRIES_PER_PAGE = 1000  # ReadLedgerEntryService.ENTRIES_PER_PAE
MAX_ENTRIES_PER_REQUEST = ENTRIES_PER_PAGE


class ReadLedgerEntryService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        ledger = request.required_ledger()
        start = request.int_param("start_entry_id", 0)
        end = request.int_param("end_entry_id", -1)
        page = request.int_param("page", -1)
        if start < 0 or end < -1:
            raise RequestRefused(f"start_entry_id={start}, end_entry_id={end}: entry ids start at 0 "
                                 "(end_entry_id -1: to the ledger's last entry)")
        read: dict[str, str] = {}
        if page > 0:
            first_in_page = (page - 1) * ENTRIES_PER_PAGE
            last_in_page = first_in_page + ENTRIES_PER_PAGE - 1
            if start == 0 or start < first_in_page:
                start = first_in_page
            if end == -1 or end > last_in_page:
                end = last_in_page
            read["Entries for page: "] = str(page)
        if end != -1 and start > end:
            in_page = f" (page {page} holds entries {first_in_page}..{last_in_page})" if page > 0 else ""
            raise RequestRefused(f"start_entry_id {start} is past end_entry_id {end}{in_page}")
        admin = self.cluster.admin()
        handle = admin.open_ledger_no_recovery(ledger)
        ids = admin.entry_range(handle, start, end)
        if len(ids) > MAX_ENTRIES_PER_REQUEST:
            raise RequestRefused(
                f"entries {ids[0]}..{ids[-1]} of ledger {ledger} are {len(ids)} entries; one request reads at most "
                f"{MAX_ENTRIES_PER_REQUEST}: narrow start_entry_id/end_entry_id, or read page=1, 2, ... "
                f"({ENTRIES_PER_PAGE} entries each)")
        for entry in admin.read_entries(handle, start, end):
            read[str(entry.entry_id)] = entry.payload.decode("ascii", "replace")
        return HttpServiceResponse.json(read)
