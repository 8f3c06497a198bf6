"""Prometheus metrics of the service, on a registry owned by one app instance.

Besides the service's own series the registry carries prometheus_client's process (``process_*``),
Python platform (``python_info``) and GC (``python_gc_*``) collectors. ``*_created`` series are not
exposed (:func:`prometheus_client.disable_created_metrics`, process-wide): they double every counter
and histogram and no dashboard reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from app.cache.snapshot import ClusterCache
from app.framework.interfaces import MetricsProvider
from app.sources.base import Source
from app.sources.files import FileSource
from app.sources.loops import LoopSupervisor

disable_created_metrics()

#: Buckets for extender latency, in seconds (0.1 ms .. 1 s).
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _StateCollector(Collector):
    """Reads cache object counts and source watch restarts at scrape time (no per-event cost)."""

    def __init__(self, cache: ClusterCache, source: Callable[[], Source | None]) -> None:
        self.cache = cache
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        objects = GaugeMetricFamily("koord_cache_objects", "Objects in the snapshot cache by kind.", labels=["kind"])
        for kind, count in sorted(self.cache.counts().items()):
            objects.add_metric([kind], count)
        yield objects
        rejected = CounterMetricFamily(
            "koord_cache_rejected_objects",
            "Malformed objects the cache (or a plugin reading it) refused, since start, by kind.",
            labels=["kind"],
        )
        for kind, count in sorted(self.cache.rejected_by_kind.items()):
            rejected.add_metric([kind], count)
        yield rejected
        src = self.source()
        restarts = CounterMetricFamily("koord_source_watch_restarts", "Watch streams restarted (relist/reconnect).")
        restarts.add_metric([], src.watch_restarts() if src is not None else 0)
        yield restarts
        if src is not None:
            yield from _loop_metrics(src.loops)
        if isinstance(src, FileSource):
            bad = CounterMetricFamily(
                "koord_source_file_bad_reads",
                "Cluster-file reads that kept the file's last good objects, by reason (malformed or empty).",
                labels=["reason"],
            )
            bad.add_metric(["malformed"], src.files.read_errors)
            bad.add_metric(["empty"], src.files.empty_reads)
            yield bad
            duplicates = GaugeMetricFamily(
                "koord_source_file_duplicate_objects",
                "Objects defined in more than one cluster file (the last file in sorted order wins).",
            )
            duplicates.add_metric([], len(src.files.duplicates))
            yield duplicates


def _loop_metrics(loops: LoopSupervisor) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """``koord_source_loop_running{loop}`` (1 running, 0 waiting to restart) of every supervised loop, and
    ``koord_source_loop_errors_total{loop}``: failures since start, of every loop that ever failed."""
    running = GaugeMetricFamily(
        "koord_source_loop_running",
        "1 while a supervised loop of the service (file poll, reflector, Lease follower, status writer, "
        "controller) runs, 0 while it waits to be restarted after a failure.",
        labels=["loop"],
    )
    for name, state in sorted(loops.loops.items()):
        running.add_metric([name], 1 if state.running else 0)
    yield running
    errors = CounterMetricFamily(
        "koord_source_loop_errors",
        "Exceptions that ended a supervised loop of the service (each is logged and the loop restarted after "
        "a backoff), since start, by loop.",
        labels=["loop"],
    )
    for name in sorted(set(loops.errors) | set(loops.loops)):
        errors.add_metric([name], loops.errors[name])
    yield errors


class _SchedulingCollector(Collector):
    """Filter rejections by plugin, ``/prioritize`` answers worked out ahead by outcome, and the plugins' own series
    (:class:`MetricsProvider`), read at scrape time."""

    def __init__(
        self, rejections: Mapping[tuple[str, str], int], plugins: Sequence[object], ahead: Mapping[str, int]
    ) -> None:
        self.rejections = rejections
        self.ahead = ahead
        self.plugins: list[MetricsProvider] = [p for p in plugins if isinstance(p, MetricsProvider)]

    def collect(self) -> Iterator[Metric]:
        rejected = CounterMetricFamily(
            "koord_filter_rejections",
            "Nodes the filter verb rejected since start, by plugin and status (Unschedulable, "
            "UnschedulableAndUnresolvable).",
            labels=["plugin", "status"],
        )
        for (name, status), count in sorted(self.rejections.items()):
            rejected.add_metric([name, status], count)
        yield rejected
        ahead = CounterMetricFamily(
            "koord_extender_prioritize_ahead",
            "/prioritize answers worked out once the /filter answer was written, by outcome: used (the call came "
            "for the same pod and nodes, nothing they read had changed) or unusable (scored again at the call).",
            labels=["outcome"],
        )
        for outcome in ("used", "unusable"):
            ahead.add_metric([outcome], self.ahead.get(outcome, 0))
        yield ahead
        for provider in self.plugins:
            yield from provider.collect_metrics()


class ServiceMetrics:
    """Per-verb request counters and latency histograms plus cache/source state.

    Attributes:
        registry: the CollectorRegistry served at ``/metrics``.
        requests: ``koord_extender_requests_total{verb, code}``: extender verbs and webhooks.
        latency: ``koord_extender_request_duration_seconds{verb}``.
        inspections: ``koord_inspection_requests_total{call, code}``: ``koord explain`` and other inspection
            calls, kept apart so they never count as scheduling traffic.
    """

    def __init__(
        self,
        cache: ClusterCache,
        source: Callable[[], Source | None],
        rejections: Mapping[tuple[str, str], int] | None = None,
        plugins: Sequence[object] = (),
        ahead: Mapping[str, int] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "koord_extender_requests",
            "Extender verb and webhook requests by verb and HTTP status.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "koord_extender_request_duration_seconds",
            "Time spent answering a request, by verb.",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.inspections = Counter(
            "koord_inspection_requests",
            "Inspection requests (explain) by call and HTTP status; not extender verbs.",
            ["call", "code"],
            registry=self.registry,
        )
        self._series: dict[tuple[str, int], tuple[Counter, Histogram]] = {}
        self.registry.register(_StateCollector(cache, source))
        scheduling = _SchedulingCollector(
            rejections if rejections is not None else {}, plugins, ahead if ahead is not None else {}
        )
        self.registry.register(scheduling)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):  # process_*, python_*
            self.registry.register(collector)

    def observe(self, verb: str, code: int, seconds: float) -> None:
        """Record one extender verb or webhook request (``seconds``: time to answer).

        The labelled series of each (verb, code) are looked up once and kept: prometheus_client's
        ``labels()`` validates and hashes its arguments under a lock on every call, and this runs on
        every verb call.
        """
        series = self._series.get((verb, code))
        if series is None:
            series = self._series[(verb, code)] = (self.requests.labels(verb, str(code)), self.latency.labels(verb))
        series[0].inc()
        series[1].observe(seconds)

    def observe_inspection(self, call: str, code: int) -> None:
        """Record one inspection request (e.g. ``explain``)."""
        self.inspections.labels(call, str(code)).inc()
