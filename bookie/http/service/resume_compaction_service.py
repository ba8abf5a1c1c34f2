"""PUT /api/v1/bookie/gc/resume_compaction (BookKeeper's ResumeCompactionService): ``{"resumeMajor": bool,
"resumeMinor": bool}`` resumes the compactions set true."""
from __future__ import annotations

from bookie.http.service.suspend_compaction_service import Action, CompactionSwitchService


class ResumeCompactionService(CompactionSwitchService):
    WRONG_METHOD = ("Not found method. Should be PUT to resume major or minor compaction, Or GET to get "
                    "compaction state.")
    verb = "resume"
    action = Action.RESUME
