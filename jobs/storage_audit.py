"""The storage audit as a Spark job: ``spark-submit jobs/storage_audit.py --metadata-service-uri URI --output DIR``.

Per bookie live vs garbage bytes, what the next compactions would reclaim, logs skipped as corrupt, bytes of
ledgers the metadata lacks still on disk (reclaimable, with their age and the GC passes since: a warning),
orphans (metadata naming a bookie without the entries), space by owner. Exit code 0: nothing at risk; 3: data
at risk (orphans, corrupt logs); 2: bad arguments or no cluster; 1: the job failed; 130: interrupted (Ctrl-C). A run
that does not finish keeps nothing (its tables and report are published together at the end). The logic is
spark_bookkeeper.audit.storage (``bk audit storage`` runs the same).
"""
import sys

from spark_bookkeeper.audit.cli import main

if __name__ == "__main__":
    sys.exit(main("storage"))
