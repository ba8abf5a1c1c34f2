"""The code blocks that the README marks runnable (a ``<!-- runnable -->`` line before the block) run against a
real cluster and Spark and do what they say: the Spark quick start (write, read, the ledgers table, a stream
copied with Trigger.AvailableNow) and the client example."""
from __future__ import annotations

import os
import re

import pytest

from tests.procs import ROOT

DOCS_URI = "zk://127.0.0.1:2181/ledgers"  # what the examples name; the test's cluster replaces it


def runnable_blocks(path: str) -> list[str]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return re.findall(r"<!-- runnable -->\n```python\n(.*?)\n```", f.read(), re.S)


def _block(containing: str) -> str:
    blocks = [b for b in runnable_blocks("README.md") if containing in b]
    assert len(blocks) == 1, f"the README has no runnable block with {containing!r}"
    return blocks[0]


def test_the_readme_marks_its_spark_and_client_examples_runnable():
    assert len(runnable_blocks("README.md")) == 2


def test_the_readme_client_example_prints_what_it_wrote(shared_cluster, capsys):
    exec(_block("from bookie.client import BookKeeper").replace(DOCS_URI, shared_cluster.metadata_service_uri), {})
    assert capsys.readouterr().out.splitlines() == ["0 b'payload'", "1 b'a'", "2 b'b'", "3 b'c'"]


@pytest.mark.timeout(600)
def test_the_readme_spark_example_writes_reads_and_copies_a_log(spark, shared_cluster, tmp_path):
    import spark_bookkeeper
    spark_bookkeeper.register(spark)
    uri = shared_cluster.metadata_service_uri
    namespace = {"spark": spark}
    exec(_block('format("bookkeeper")').replace(DOCS_URI, uri).replace("/ck/copy", str(tmp_path / "ck")), namespace)
    for query in spark.streams.active:  # the example's AvailableNow copy
        query.awaitTermination()
    df = namespace["df"]
    assert df.count() > 0
    assert sorted(r.payload for r in namespace["events"].collect()) == sorted(r.payload for r in df.collect())
    assert namespace["ledgers"].count() >= 1

    def log(name: str):
        return spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", name).load()
    assert sorted(r.payload for r in log("copy").collect()) == sorted(r.payload for r in df.collect())
