"""bookie.stats: BookKeeper's metric names, types and text (PrometheusTextFormat), quantiles per rollover
window (DataSketchesOpStatsLogger), thread safety, and a scrape that prometheus_client's parser reads."""
from __future__ import annotations

import logging
import math
import random
import sys
import threading

import pytest
from prometheus_client import CollectorRegistry, Counter as ClientCounter, Gauge as ClientGauge, Info
from prometheus_client.parser import text_string_to_metric_families

from bookie.stats import NULL_STATS_LOGGER
from bookie.stats.data_sketches_op_stats_logger import QUANTILES, DataSketchesOpStatsLogger, bucket_key, bucket_value
from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
from bookie.stats.prometheus_text_format import go_double, java_double, write_metrics_collected_by_prometheus_client


@pytest.fixture
def provider() -> PrometheusMetricsProvider:
    return PrometheusMetricsProvider(registry=CollectorRegistry(auto_describe=False))  # only our metrics


def lines_of(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.split("{")[0].split(" ")[0] in
            (name, f"{name}_count", f"{name}_sum") or line.startswith(f"# TYPE {name} ")]


def quantiles(op: DataSketchesOpStatsLogger, success: bool = True) -> dict[float, float]:
    return dict(zip(QUANTILES, op.get_quantile_values(success)))


def test_names_types_and_the_exact_text_bookkeeper_writes(provider):
    root = provider.get_stats_logger()
    bookie = root.scope("bookie")
    bookie.get_counter("WRITE_BYTES").inc(1234)
    bookie.register_gauge("SERVER_STATUS", lambda: 1)
    sync = bookie.scope("journal").get_op_stats_logger("JOURNAL_SYNC")
    sync.register_successful_event(0.002, count=3)  # 2 ms, three entries acknowledged by one fsync
    sync.register_successful_event(0.0105)
    provider.rotate_latency_collection()
    text = provider.write_all()

    assert lines_of(text, "bookie_WRITE_BYTES") == ["# TYPE bookie_WRITE_BYTES counter", "bookie_WRITE_BYTES 1234"]
    assert "_total" not in text
    assert lines_of(text, "bookie_SERVER_STATUS") == ["# TYPE bookie_SERVER_STATUS gauge", "bookie_SERVER_STATUS 1"]
    p50 = java_double(bucket_value(bucket_key(2.0)))  # within 0.78% of 2 ms
    assert lines_of(text, "bookie_journal_JOURNAL_SYNC") == [
        "# TYPE bookie_journal_JOURNAL_SYNC summary",
        *[f'bookie_journal_JOURNAL_SYNC{{success="false",quantile="{q}"}} NaN'
          for q in ("0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0")],
        'bookie_journal_JOURNAL_SYNC_count{success="false"} 0',
        'bookie_journal_JOURNAL_SYNC_sum{success="false"} 0.0',
        f'bookie_journal_JOURNAL_SYNC{{success="true",quantile="0.5"}} {p50}',
        f'bookie_journal_JOURNAL_SYNC{{success="true",quantile="0.75"}} {p50}',
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.95"} 10.5',
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.99"} 10.5',
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.999"} 10.5',
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.9999"} 10.5',
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="1.0"} 10.5',
        'bookie_journal_JOURNAL_SYNC_count{success="true"} 4',
        'bookie_journal_JOURNAL_SYNC_sum{success="true"} 16.5',
    ]
    assert abs(float(p50) - 2.0) / 2.0 <= 0.008


def test_prometheus_parses_the_scrape_with_the_process_collectors():
    provider = PrometheusMetricsProvider()  # with the process, platform and GC collectors
    root = provider.get_stats_logger()
    root.scope("bookie").get_counter("WRITE_BYTES").inc(7)
    root.scope("bookie").register_gauge("ledgers_count", lambda: 2.5)
    server = root.scope("bookkeeper_server").scope_label("bookie", 'host "a"\\1')
    server.get_op_stats_logger("ADD_ENTRY_REQUEST").register_successful_event(0.004, count=10)
    server.get_op_stats_logger("ADD_ENTRY_REQUEST").register_failed_event(0.5)
    provider.rotate_latency_collection()
    families = {family.name: family for family in text_string_to_metric_families(provider.write_all())}

    assert families["bookie_WRITE_BYTES"].type == "counter"
    assert [s.value for s in families["bookie_WRITE_BYTES"].samples] == [7]
    assert families["bookie_ledgers_count"].type == "gauge"
    assert families["bookie_ledgers_count"].samples[0].value == 2.5
    summary = families["bookkeeper_server_ADD_ENTRY_REQUEST"]
    assert summary.type == "summary"
    samples = {(s.name, s.labels.get("success"), s.labels.get("quantile")): s for s in summary.samples}
    assert len(samples) == 18
    assert all(s.labels["bookie"] == 'host "a"\\1' for s in summary.samples)  # escaped, read back intact
    assert samples[("bookkeeper_server_ADD_ENTRY_REQUEST_count", "true", None)].value == 10
    assert samples[("bookkeeper_server_ADD_ENTRY_REQUEST_sum", "true", None)].value == pytest.approx(40.0)
    assert samples[("bookkeeper_server_ADD_ENTRY_REQUEST", "true", "1.0")].value == pytest.approx(4.0)
    assert samples[("bookkeeper_server_ADD_ENTRY_REQUEST", "false", "0.5")].value == pytest.approx(500.0)
    assert {"process_cpu_seconds", "python_info", "python_gc_collections"} <= set(families)


def test_client_registry_written_as_write_metrics_collected_by_prometheus_client():
    registry = CollectorRegistry(auto_describe=False)
    ClientGauge("jvm_memory_direct_bytes_max", "-", registry=registry).set(100)
    ClientCounter("requests", "-", ["code", "method"], registry=registry).labels("200", "get").inc(3)
    Info("build", "-", registry=registry).info({"version": "4.17.4"})
    out: list[str] = []
    write_metrics_collected_by_prometheus_client(out, registry)
    text = "".join(out)
    assert "# TYPE jvm_memory_direct_bytes_max gauge\njvm_memory_direct_bytes_max{} 100.0\n" in text
    assert '# TYPE requests counter\nrequests_total{code="200", method="get"} 3.0\n' in text
    assert '# TYPE build_info gauge\nbuild_info{version="4.17.4"} 1.0\n' in text
    list(text_string_to_metric_families(text))  # and Prometheus' parser accepts it


@pytest.mark.parametrize("value, text", [
    (0.0, "0.0"), (1.0, "1.0"), (1265.08, "1265.08"), (0.001, "0.001"), (9999999.0, "9999999.0"),
    (1e7, "1.0E7"), (12345678.9, "1.23456789E7"), (1.5e-4, "1.5E-4"), (-2.5e-9, "-2.5E-9"), (1e300, "1.0E300"),
    (math.nan, "NaN"), (math.inf, "Infinity"),
])
def test_numbers_are_printed_as_java_double_to_string(value, text):
    assert java_double(value) == text
    assert float(text) == value or math.isnan(value)


def test_go_double_names_the_infinities_as_go():
    assert (go_double(math.inf), go_double(-math.inf), go_double(3.0)) == ("+Inf", "-Inf", "3.0")


def test_quantiles_are_within_one_percent_and_the_maximum_is_exact(provider):
    op = provider.get_stats_logger("test").get_op_stats_logger("op")
    values = [i / 10 for i in range(1, 100_001)]  # 0.1 ms .. 10 s
    random.Random(7).shuffle(values)
    for value in values:
        op.register_successful_event(value / 1000.0)
    provider.rotate_latency_collection()
    ordered = sorted(values)
    for quantile, estimate in quantiles(op).items():
        exact = ordered[max(1, math.ceil(quantile * len(ordered))) - 1]
        assert abs(estimate - exact) <= 0.01 * exact, (quantile, estimate, exact)
    assert quantiles(op)[1.0] == 10_000.0
    assert op.get_count(True) == len(values)
    assert op.get_sum(True) == pytest.approx(sum(values))
    # O(1) recording: a window holds buckets (64 per power of two), not the 100,000 samples
    assert len(op._success._replacement) == 0 and len(op._success._current) == 0
    for value in values:
        op.register_successful_value(value)
    assert len(op._success._current) <= 64 * 18


def test_values_are_recorded_as_given_and_negative_and_zero_values_order_correctly(provider):
    op = provider.get_stats_logger().get_op_stats_logger("sizes")
    for value in (-8.0, 0, 0, 0, 4096, 4096, 4096, 4096, 4096, 65536):
        op.register_successful_value(value)
    provider.rotate_latency_collection()
    result = quantiles(op)
    assert result[0.5] == pytest.approx(4096, rel=0.008) and result[1.0] == 65536
    assert op.get_sum(True) == 4096 * 5 + 65536 - 8


def test_bucket_keys_order_as_values_and_a_bucket_middle_is_within_0_78_percent():
    rng = random.Random(3)
    values = [0.0, 5e-324, -5e-324, 1e300, -1e300] + [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 12)
                                                       for _ in range(20_000)]
    ordered = sorted(values)
    keys = [bucket_key(v) for v in ordered]
    assert keys == sorted(keys)
    for value in values:
        assert abs(bucket_value(bucket_key(value)) - value) <= abs(value) * 0.5 / 64


def test_rollover_swaps_windows_and_count_and_sum_stay_cumulative(provider):
    op = provider.get_stats_logger("test").get_op_stats_logger("op")
    op.register_successful_event(0.100)
    assert all(math.isnan(v) for v in op.get_quantile_values(True))  # no window closed yet: NaN, as BookKeeper
    provider.rotate_latency_collection()
    assert quantiles(op)[1.0] == 100.0

    op.register_successful_event(0.005, count=4)
    assert quantiles(op)[1.0] == 100.0  # the open window is not written until it closes
    provider.rotate_latency_collection()
    assert quantiles(op)[1.0] == 5.0 and quantiles(op)[0.5] == 5.0  # the first window is gone
    assert op.get_count(True) == 5 and op.get_sum(True) == pytest.approx(120.0)

    provider.rotate_latency_collection()  # an empty window: NaN again, the count stays
    assert all(math.isnan(v) for v in op.get_quantile_values(True))
    assert op.get_count(True) == 5
    op.register_failed_event(0.25)
    provider.rotate_latency_collection()  # both windows were swapped back and forth and still work
    assert quantiles(op, success=False)[1.0] == 250.0 and all(math.isnan(v) for v in op.get_quantile_values(True))


def test_count_greater_than_one_records_that_many_events(provider):
    op = provider.get_stats_logger().get_op_stats_logger("batch")
    op.register_successful_event(0.004, count=10)
    op.register_successful_event(0.100, count=0)  # nothing
    provider.rotate_latency_collection()
    assert op.get_count(True) == 10 and op.get_sum(True) == pytest.approx(40.0)
    assert set(op.get_quantile_values(True)) == {4.0}


def test_concurrent_recording_from_several_threads_loses_nothing(provider):
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch every few bytecodes: an unlocked += would lose increments
    try:
        _record_concurrently(provider)
    finally:
        sys.setswitchinterval(interval)


def _record_concurrently(provider) -> None:
    threads, per_thread = 8, 50_000
    start = threading.Barrier(threads + 1)
    rotations_done = threading.Event()

    def record() -> None:
        logger = provider.get_stats_logger("bookie")  # each thread asks by name: they share the metrics
        counter, op = logger.get_counter("WRITE_BYTES"), logger.get_op_stats_logger("ADD_ENTRY")
        start.wait()
        for _ in range(per_thread):  # tight loops: the most chances for threads to interleave
            counter.inc()
        for i in range(per_thread):
            op.register_successful_event(0.001 * (i % 50 + 1), count=2)

    workers = [threading.Thread(target=record) for _ in range(threads)]
    for worker in workers:
        worker.start()

    def rotate() -> None:  # windows swapped while threads record
        start.wait()
        while any(worker.is_alive() for worker in workers):
            provider.rotate_latency_collection()
        rotations_done.set()

    rotator = threading.Thread(target=rotate)
    rotator.start()
    for worker in workers + [rotator]:
        worker.join(timeout=120)
    assert rotations_done.is_set()
    bookie = provider.get_stats_logger("bookie")
    assert bookie.get_counter("WRITE_BYTES").get() == threads * per_thread
    op = bookie.get_op_stats_logger("ADD_ENTRY")
    assert op.get_count(True) == threads * per_thread * 2
    assert op.get_sum(True) == pytest.approx(threads * 2 * sum(i % 50 + 1 for i in range(per_thread)))


def test_scopes_and_labels_compose_and_sort_as_bookkeeper(provider):
    root = provider.get_stats_logger()
    server = root.scope("bookkeeper_server")
    labelled = server.scope_label("z", "2").scope_label("a", "1")
    labelled.get_counter("READ_ENTRY").inc(3)
    labelled.scope_label("a", "9").get_counter("READ_ENTRY").inc()  # a label set again replaces it
    server.get_counter("READ_ENTRY").inc(5)  # the unlabelled parent is untouched by its child's labels
    labelled.get_op_stats_logger("ADD_ENTRY").register_successful_value(1)
    root.scope("auditor.check").get_counter("9lives").inc()  # sanitized as Collector.sanitizeMetricName
    provider.get_stats_logger("0x").get_counter("n").inc()
    text = provider.write_all()
    assert lines_of(text, "bookkeeper_server_READ_ENTRY") == [
        "# TYPE bookkeeper_server_READ_ENTRY counter", "bookkeeper_server_READ_ENTRY 5",
        'bookkeeper_server_READ_ENTRY{a="1",z="2"} 3', 'bookkeeper_server_READ_ENTRY{a="9",z="2"} 1']
    assert 'bookkeeper_server_ADD_ENTRY{success="true",quantile="0.5", a="1",z="2"} NaN' in text
    assert 'bookkeeper_server_ADD_ENTRY_count{success="true", a="1",z="2"} 1' in text
    assert "\nauditor_check_9lives 1\n" in text and "\n_x_n 1\n" in text


def test_the_same_name_in_the_same_scope_and_labels_is_the_same_object(provider):
    one, two = provider.get_stats_logger("bookie"), provider.get_stats_logger().scope("bookie")
    assert one.get_counter("c") is two.get_counter("c")
    assert one.get_op_stats_logger("o") is two.get_op_stats_logger("o")
    assert one.scope_label("k", "v").get_counter("c") is two.scope_label("k", "v").get_counter("c")
    assert one.scope_label("k", "v").get_counter("c") is not one.get_counter("c")
    assert one.scope("x").get_counter("c") is not one.get_counter("c")


def test_a_gauge_is_sampled_at_each_scrape_and_the_first_registration_wins(provider, caplog):
    depth = [3]
    logger = provider.get_stats_logger("bookie_journal")
    logger.register_gauge("JOURNAL_QUEUE_SIZE", lambda: depth[0])
    logger.register_gauge("JOURNAL_QUEUE_SIZE", lambda: -1)  # ignored, as registerGauge's computeIfAbsent
    assert "bookie_journal_JOURNAL_QUEUE_SIZE 3\n" in provider.write_all()
    depth[0] = 8
    assert "bookie_journal_JOURNAL_QUEUE_SIZE 8\n" in provider.write_all()

    def broken() -> float:
        raise OSError("disk gone")

    logger.register_gauge("broken", broken)
    logger.register_gauge("not_a_number", lambda: None)
    with caplog.at_level(logging.WARNING):
        text = provider.write_all()
    assert "bookie_journal_broken NaN\n" in text and "bookie_journal_JOURNAL_QUEUE_SIZE 8\n" in text
    assert "bookie_journal_not_a_number NaN\n" in text
    assert any("bookie_journal_broken" in r.getMessage() and "disk gone" in r.getMessage() for r in caplog.records)


def test_bad_input_is_refused_with_what_is_allowed(provider):
    logger = provider.get_stats_logger("bookie")
    logger.get_counter("X")
    with pytest.raises(ValueError, match="already a counter.*cannot also be a summary"):
        logger.get_op_stats_logger("X")
    with pytest.raises(ValueError, match="label name '1a' is not valid"):
        logger.scope_label("1a", "v")
    with pytest.raises(ValueError, match="reserved"):
        logger.scope_label("quantile", "v")
    with pytest.raises(ValueError, match="must be a string"):
        logger.scope_label("k", 3)
    with pytest.raises(ValueError, match="non-empty string"):
        logger.get_counter("")
    with pytest.raises(TypeError, match="sample must be a function"):
        logger.register_gauge("g", 5)
    op = logger.get_op_stats_logger("op")
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite number"):
            op.register_successful_event(bad)
    with pytest.raises(TypeError, match="must be a number, got str"):
        op.register_successful_value("12")
    with pytest.raises(ValueError, match="count must be at least 0"):
        op.register_failed_value(1.0, count=-1)
    assert op.get_count(True) == op.get_count(False) == 0  # nothing half-recorded
    with pytest.raises(ValueError, match="above 0"):
        PrometheusMetricsProvider(0)


def test_the_null_logger_records_nothing():
    sampled = []
    logger = NULL_STATS_LOGGER.scope("bookie").scope_label("k", "v")
    assert logger is NULL_STATS_LOGGER
    counter = logger.get_counter("c")
    counter.inc(5)
    counter.dec()
    assert counter.get() == 0
    op = logger.get_op_stats_logger("o")
    op.register_successful_event(0.1, count=3)
    op.register_failed_value(2.0)
    logger.register_gauge("g", lambda: sampled.append(1) or 1.0)
    assert sampled == []


def test_from_conf_reads_the_server_configuration():
    from bookie.server.conf import ServerConfiguration  # here: bookie.stats itself never imports the server

    assert PrometheusMetricsProvider.from_conf(ServerConfiguration({"enableStatistics": "false"})) is None
    provider = PrometheusMetricsProvider.from_conf(
        ServerConfiguration({"prometheusStatsLatencyRolloverSeconds": "5"}))
    assert provider is not None and provider.latency_rollover_seconds == 5.0
    assert PrometheusMetricsProvider.from_conf(ServerConfiguration()).latency_rollover_seconds == 60.0
    with pytest.raises(ValueError, match="enableStatistics must be true or false"):
        PrometheusMetricsProvider.from_conf({"enableStatistics": "no", "prometheusStatsLatencyRolloverSeconds": 1})


def test_start_runs_the_rollover_thread_and_stop_joins_it():
    provider = PrometheusMetricsProvider(0.01, registry=CollectorRegistry(auto_describe=False))
    op = provider.get_stats_logger().get_op_stats_logger("op")
    op.register_successful_event(0.003)
    rotated, seen = threading.Event(), []
    rotate = provider.rotate_latency_collection

    def observed_rotate() -> None:  # the thread's task, observed
        rotate()
        seen.append(quantiles(op)[1.0])
        rotated.set()

    provider.rotate_latency_collection = observed_rotate
    assert provider.start() is provider
    try:
        thread = next(t for t in threading.enumerate() if t.name == "metrics-rollover")
        assert thread.daemon
        with pytest.raises(RuntimeError, match="already started"):
            provider.start()
        assert rotated.wait(60)
        assert seen[0] == 3.0  # the thread closed the window holding the 3 ms event
    finally:
        provider.stop()
    assert not thread.is_alive()
    provider.stop()  # twice is harmless
