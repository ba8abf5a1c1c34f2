"""What an audit run hands back: the tables it wrote, its findings, whether data is at risk, its report,
and the exit code a scheduler alerts on."""
from __future__ import annotations

from dataclasses import dataclass, field

from spark_bookkeeper.audit.history import Run

EXIT_OK = 0  # nothing at risk (warnings may still be in the report)
EXIT_FAILED = 1  # the audit itself failed (Python's code for an uncaught error; a Spark job that failed)
EXIT_USAGE = 2  # bad arguments, or the cluster could not be reached
EXIT_AT_RISK = 3  # the audit ran and found data at risk
# Ended by Ctrl-C, as a shell gives it (128 + SIGINT); bookie/cli/interrupts.py has the same for the other commands.
INTERRUPTED = 130


class RunAborted(Exception):
    """A run ended before it was published (Ctrl-C or a failure): its Spark jobs cancelled, its staging
    directories removed, nothing of it kept. ``str()`` is the one line that says so; the cause is chained."""

    def __init__(self, line: str, exit_code: int):
        super().__init__(line)
        self.exit_code = exit_code


@dataclass
class Finding:
    """One kind of finding: how many, whether it puts data at risk, one line a person reads."""
    kind: str  # the name of the table that lists them (e.g. "orphans")
    count: int
    at_risk: bool
    summary: str


@dataclass
class AuditResult:
    audit: str  # "storage" | "replication"
    run: Run
    tables: dict[str, str] = field(default_factory=dict)  # table -> the partition written
    findings: list[Finding] = field(default_factory=list)
    report: str | None = None  # path of the Markdown report

    @property
    def at_risk(self) -> bool:
        return any(f.at_risk and f.count > 0 for f in self.findings)

    @property
    def exit_code(self) -> int:
        return EXIT_AT_RISK if self.at_risk else EXIT_OK

    def finding(self, kind: str) -> Finding:
        for f in self.findings:
            if f.kind == kind:
                return f
        raise KeyError(f"no finding {kind!r}; the {self.audit} audit has {', '.join(f.kind for f in self.findings)}")
