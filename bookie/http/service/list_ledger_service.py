"""GET /api/v1/ledger/list (BookKeeper's ListLedgerService): every ledger (BookKeeper's, scope 0) as
``{"id": null, ...}`` in id order.

``print_metadata=true``: each with its metadata, by default as BookKeeper gives it, the znode's serialized
form read as UTF-8 text, here without the password (a password-less copy is serialized); with
``decode_meta=true`` as a JSON object (GetLedgerMetaService's form). ``page=N`` (with print_metadata only, as
BookKeeper) lists one batch of LIST_LEDGER_BATCH_SIZE, at BookKeeper's positions."""
from __future__ import annotations

import itertools
from dataclasses import replace

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService
from bookie.http.service.get_ledger_meta_service import ledger_metadata_json
from bookie.meta.ledger_metadata import serialize

LIST_LEDGER_BATCH_SIZE = 100  # ledgers per page


class ListLedgerService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        print_metadata = request.bool_param("print_metadata")
        decode = request.bool_param("decode_meta")
        page = request.int_param("page", -1) if print_metadata else -1
        store = self.cluster.store()
        ledgers = store.iterate_ledgers(0)
        if not print_metadata:
            return HttpServiceResponse.json({str(ledger): None for ledger in ledgers})
        if page > 0:
            # ListLedgerService counts positions from 1 and takes those from (page-1)*100 to that + 99: page 1
            # holds the first 99 ledgers, each later page the next 100 (its own test: page 5 of 430 has 31).
            first = (page - 1) * LIST_LEDGER_BATCH_SIZE
            ledgers = itertools.islice(ledgers, max(first - 1, 0), first + LIST_LEDGER_BATCH_SIZE - 1)
        listed = {}
        for ledger, versioned in store.read_ledgers(ledgers):
            if versioned is None:
                continue  # deleted since it was listed
            md = versioned.value
            listed[str(ledger)] = (ledger_metadata_json(ledger, md) if decode else
                                   serialize(replace(md, password=b"")).decode("utf-8", "replace"))
        return HttpServiceResponse.json(listed)
