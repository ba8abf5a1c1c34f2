"""The replication audit as a Spark job: ``spark-submit jobs/replication_audit.py --metadata-service-uri URI
--output DIR``.

Under-replicated ledgers with reasons and age, fragments with fewer copies than the write quorum (as bookies that
answered show), fragments not verified because a bookie did not answer (a warning), ledgers on one bookie, open
ledgers whose writer went silent. Exit code 0: nothing at risk; 3: data at risk; 2: bad arguments or no cluster;
1: the job failed; 130: interrupted (Ctrl-C). A run that does not finish keeps nothing (its
tables and report are published together at the end). The logic is spark_bookkeeper.audit.replication
(``bk audit replication`` runs the same).
"""
import sys

from spark_bookkeeper.audit.cli import main

if __name__ == "__main__":
    sys.exit(main("replication"))
