"""Fixtures of the interop tests: a cluster of BookKeeper's own (Java) bookies next to the session's ZooKeeper."""
from __future__ import annotations

import pytest

from bookie.testing.realbk import RealBookKeeper


@pytest.fixture(scope="module")
def java_cluster(zookeeper, tmp_path_factory):
    """Three Java bookies (../shared/realbk) on their own root, shared by a module's tests; stopped by PID.
    A module that needs another number of bookies defines its own ``java_cluster``."""
    with RealBookKeeper(zookeeper.connect_string, str(tmp_path_factory.mktemp("realbk")), num_bookies=3) as cluster:
        yield cluster
