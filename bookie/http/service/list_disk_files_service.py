"""GET /api/v1/bookie/list_disk_file[?file_type=journal|entrylog|index] (BookKeeper's ListDiskFilesService): the
names of the journal (.txn), entry log (.log) and index (.idx) files under the configured directories, oldest
(last modified) first, each followed by a tab, under the keys "journal files", "entrylog files", "index files"."""
from __future__ import annotations

import os

from bookie.http.http_service import HttpEndpointService, HttpServiceRequest, HttpServiceResponse, RequestRefused
from bookie.server.disk_files import KINDS, disk_files


class ListDiskFilesService(HttpEndpointService):
    def __init__(self, conf):
        self.conf = conf

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        wanted = request.params.get("file_type")
        if wanted is not None and wanted not in KINDS:
            raise RequestRefused(f"file_type={wanted} is not valid: {', '.join(KINDS)} (none: all three)")
        return HttpServiceResponse.json({f"{kind} files": "".join(os.path.basename(path) + "\t"
                                                                  for path in disk_files(self.conf, kind))
                                         for kind in KINDS if wanted in (None, kind)})
