"""The fixtures every kind of test shares, and the markers that name the kinds.

A test's kind is its directory: ``tests/unit/`` starts no process and opens no connection,
``tests/integration/`` starts a real ZooKeeper, bookie processes or engine child processes, and
``tests/spark/`` a real SparkSession (local[2]), ``tests/interop/`` real Apache BookKeeper (Java) bookies and tools,
``tests/multihost/`` hosts as network namespaces (root only; skipped elsewhere, with the reason).
``pytest -m unit`` runs the unit tests alone, in seconds.
"""
from __future__ import annotations

import pathlib

import pytest

from bookie.server import Bookie, ServerConfiguration
from tests.helpers.engine_ops import engine_settings
from tests.helpers.native_bookie import served_natively

KINDS = ("unit", "integration", "spark", "interop", "multihost")
TESTS = pathlib.Path(__file__).parent
SPARK_FIXTURES = {"spark", "spark_connect"}  # fixtures that start a SparkSession


def pytest_configure(config) -> None:
    # The other kinds are registered in pytest.ini (--strict-markers).
    config.addinivalue_line("markers", "multihost: hosts as network namespaces on a bridge, with faults "
                                       "(bookie.testing.netns; root only) (tests/multihost/)")


def pytest_collection_modifyitems(items) -> None:
    """Mark each test with its kind, from the directory it is in; a test elsewhere (tests/interop/) that
    takes a SparkSession is a Spark test too (``make test`` runs ``-m spark`` on the oldest PySpark)."""
    for item in items:
        kind = item.path.relative_to(TESTS).parts[0]
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
        if kind != "spark" and SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


@pytest.fixture
def make_bookie(tmp_path):
    """Start bookies on tmp_path; each is shut down at the end of the test if still running."""
    started: list[Bookie] = []

    def make(**overrides) -> Bookie:
        bookie = Bookie(ServerConfiguration(engine_settings(tmp_path, **overrides))).start()
        started.append(bookie)
        return bookie

    yield make
    for bookie in started:
        bookie.shutdown()


@pytest.fixture
def native_bookie(make_bookie):
    """(engine, server): an engine served by the native server on a free port, stopped at the end."""
    bookie = make_bookie()
    with served_natively(bookie) as server:
        yield bookie, server


# -- real ZooKeeper and bookie processes ------------------------------------------------------------
@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper server (from pyspark's jars) for the whole session; stopped by PID."""
    from bookie.testing.zookeeper_server import ZooKeeperServer
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), tick_time=500).start()
    yield server
    server.stop()


def _local_clusters(zookeeper, new_dir, default_bookies: int):
    """A factory of local clusters (bookie processes) on the session's ZooKeeper, each under its own root and in
    ``new_dir(i)``, yielded to a fixture; every cluster it made is stopped when the fixture ends."""
    import uuid

    from bookie.testing.local_bookkeeper import LocalBookKeeper
    clusters = []

    def make(num_bookies: int = default_bookies, **settings) -> LocalBookKeeper:
        c = LocalBookKeeper(num_bookies, base_dir=new_dir(len(clusters)), zookeeper=zookeeper,
                            root=f"/ledgers-{uuid.uuid4().hex[:8]}", bookie_settings={"zkTimeout": 2000, **settings})
        clusters.append(c)
        return c.start()

    yield make
    for c in clusters:
        c.stop()


@pytest.fixture
def cluster(zookeeper, tmp_path):
    """Start local clusters (``cluster(3, **settings)``) for one test."""
    yield from _local_clusters(zookeeper, lambda i: str(tmp_path / f"cluster{i}"), 3)


@pytest.fixture
def metadata_store(zookeeper):
    """A ZKMetadataStore on a fresh, initialised root."""
    import uuid

    from bookie.meta.zk_metadata_store import ZKMetadataStore
    store = ZKMetadataStore(f"zk://{zookeeper.connect_string}/ledgers-{uuid.uuid4().hex[:8]}")
    store.init_new_cluster()
    yield store
    store.close()


logging_module = __import__("logging")
logging_module.getLogger("kazoo.client").setLevel(logging_module.ERROR)  # reconnect chatter of tests that stop servers


@pytest.fixture
def bk_cluster(cluster):
    """A cluster of bookie processes and a BookKeeper client on it: ``make(n, **bookie_settings)``."""
    from bookie.client import BookKeeper
    clients = []

    def make(num_bookies: int = 3, client_conf: dict | None = None, **settings):
        c = cluster(num_bookies, **settings)
        bk = BookKeeper(c.metadata_service_uri, {"addEntryTimeout": 5.0, "readTimeout": 5.0, **(client_conf or {})})
        clients.append(bk)
        return c, bk

    yield make
    for bk in clients:
        bk.close()


# -- Spark ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2]) for the whole run: its start-up costs ~15-20 s."""
    from spark_bookkeeper.local_session import local_spark_session
    session = local_spark_session("spark-bookkeeper-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory):
    """One Spark Connect server (local[2], the settings of ``spark``) for the whole run: a second JVM of ~1 GiB,
    started in ~20 s; stopped by PID at the end. Tests take a session on it through ``spark_connect``."""
    from bookie.testing.spark_connect import SparkConnectServer
    server = SparkConnectServer(str(tmp_path_factory.mktemp("spark-connect"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_connect_session(spark_connect_server):
    """One remote SparkSession (sc://) on the run's server, shared as ``spark`` is."""
    session = spark_connect_server.session()
    yield session
    session.stop()


@pytest.fixture
def spark_connect(spark_connect_session):
    """The run's Spark Connect session, pyspark.sql's functions Connect's for the test (they are picked by an
    environment variable, process-wide: classic tests before and after keep classic's)."""
    from bookie.testing.spark_connect import connect_mode
    with connect_mode(True):
        yield spark_connect_session


@pytest.fixture(scope="module")
def module_cluster(zookeeper, tmp_path_factory):
    """Start local clusters (``module_cluster(4, **settings)``) shared by a module's tests."""
    yield from _local_clusters(zookeeper, lambda i: str(tmp_path_factory.mktemp("module-cluster")), 4)


@pytest.fixture(scope="module")
def shared_cluster(module_cluster):
    """Four bookies shared by a module's tests (for tests that do not kill bookies)."""
    return module_cluster(4)
