"""The audits as an operator runs them, each in a process of its own (its own Spark): the command line and
environment of ``bk audit``, and a healthy cluster's one ledger for them to find nothing wrong with."""
from __future__ import annotations

import os
import sys

from bookie.client import BookKeeper

BK_AUDIT = [sys.executable, "-m", "bookie.cli.main", "audit"]


def write_closed_ledger(uri: str, application: bytes) -> None:
    """One closed ledger of five entries (ensemble 3, write quorum 2) owned by ``application``."""
    with BookKeeper(uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=b"pw", custom_metadata={"application": application})
        for i in range(5):
            lh.append(b"entry-%d" % i)
        lh.close()


def audit_env(**extra: str) -> dict[str, str]:
    """An audit process's environment: this interpreter for Spark's Python workers too, and ``extra``."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **extra}
