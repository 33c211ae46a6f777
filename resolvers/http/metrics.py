"""What ``/metrics`` reports (Prometheus): requests by route and status and their latency,
facts, links, pending vector writes, subscribers and the newest maintenance run of each job per
open namespace, and the calls and tokens of the model providers."""

from __future__ import annotations

import time
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphmem import GraphmemError

from ..namespaces import Namespaces
from .auth import GRAPHQL_PATH, MCP_PATH
from .explorer import EXPLORE_PATH

#: The routes counted under their own name; the explorer's pages count as EXPLORE_PATH, any
#: other path as "other".
_ROUTES: Final = (GRAPHQL_PATH, MCP_PATH, "/healthz", "/metrics")


class Metrics:
    """Prometheus metrics of one app: requests by route and status, their latency, facts, links
    and subscribers per open namespace, and the calls and tokens of the model providers."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "graphmem_http_requests",
            "HTTP requests served.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "graphmem_http_request_seconds",
            "Time to answer an HTTP request.",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.registry.register(_MemoryCollector(namespaces))
        self.registry.register(_UsageCollector(namespaces))


class Timing:
    """ASGI middleware counting and timing every HTTP request into ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        # The labelled series, by their labels: finding one through ``labels()`` costs more
        # than the rest of the timing.
        self._latency: dict[str, Any] = {}
        self._requests: dict[tuple[str, str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = (
            path if path in _ROUTES else EXPLORE_PATH if path.startswith(EXPLORE_PATH) else "other"
        )
        status = 500
        start = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - start
            latency = self._latency.get(route)
            if latency is None:
                latency = self._latency[route] = self.metrics.latency.labels(route)
            latency.observe(elapsed)
            labels = (route, scope["method"], str(status))
            requests = self._requests.get(labels)
            if requests is None:
                requests = self._requests[labels] = self.metrics.requests.labels(*labels)
            requests.inc()


class _MemoryCollector(Collector):
    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Any:
        facts = GaugeMetricFamily(
            "graphmem_facts", "Facts by state.", labels=["namespace", "state"]
        )
        links = GaugeMetricFamily("graphmem_links", "Live links.", labels=["namespace"])
        pending = GaugeMetricFamily(
            "graphmem_outbox_pending", "Vector writes not yet applied.", labels=["namespace"]
        )
        subscribers = GaugeMetricFamily(
            "graphmem_subscribers", "Open memoryChanged subscriptions.", labels=["namespace"]
        )
        last_run = GaugeMetricFamily(
            "graphmem_maintenance_last_run_timestamp_seconds",
            "When the newest recorded run of each maintenance job started, by how it ended.",
            labels=["namespace", "job", "status"],
        )
        last_changed = GaugeMetricFamily(
            "graphmem_maintenance_last_run_changed",
            "What the newest recorded run of each maintenance job changed, by kind.",
            labels=["namespace", "job", "kind"],
        )
        last_requests = GaugeMetricFamily(
            "graphmem_maintenance_last_run_requests",
            "Chat model requests the newest recorded run of each maintenance job made.",
            labels=["namespace", "job"],
        )
        broadcaster = self.namespaces.broadcaster
        for name, memory in self.namespaces.opened().items():
            try:
                stats = memory.stats()
                runs = memory.last_runs()
            except GraphmemError:
                continue  # closing
            for job, run in sorted(runs.items()):
                last_run.add_metric([name, job, run.status], run.started_at.timestamp())
                last_requests.add_metric([name, job], run.requests)
                for kind, count in sorted(run.changed.items()):
                    last_changed.add_metric([name, job, kind], count)
            for state in ("current", "superseded", "retracted"):
                facts.add_metric([name, state], getattr(stats, state))
            links.add_metric([name], stats.links)
            pending.add_metric([name], stats.outbox_pending)
            subscribers.add_metric([name], broadcaster.subscribers(name) if broadcaster else 0)
        yield from (facts, links, pending, subscribers, last_run, last_changed, last_requests)


class _UsageCollector(Collector):
    """The meters of the shared embedder and chat model (graphmem.usage), as counters."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Any:
        labels = ["kind", "provider", "model"]
        counters = {
            name: CounterMetricFamily(f"graphmem_provider_{name}", text, labels=labels)
            for name, text in (
                ("calls", "Calls answered by a model provider (embedder or chat model)."),
                ("failed_calls", "Calls to a model provider that failed after their retries."),
                ("retries", "Retries of calls to a model provider (429, 5xx, timeouts)."),
                ("inputs", "Texts sent to a model provider (chat: one per request)."),
            )
        }
        tokens = CounterMetricFamily(
            "graphmem_provider_tokens",
            "Tokens a model provider reported using.",
            labels=[*labels, "type"],
        )
        meters = [self.namespaces.embedder.meter]
        if self.namespaces.llm is not None:
            meters.append(self.namespaces.llm.meter)
        for meter in meters:
            usage = meter.snapshot()
            key = [usage.kind, usage.provider, usage.model]
            for name, family in counters.items():
                family.add_metric(key, getattr(usage, name))
            tokens.add_metric([*key, "prompt"], usage.prompt_tokens)
            tokens.add_metric([*key, "completion"], usage.completion_tokens)
        yield from (*counters.values(), tokens, *self.reranks())

    def reranks(self) -> tuple[CounterMetricFamily, CounterMetricFamily]:
        """Searches reranked, and those left in the fused order because the reranker failed
        (``Memory.rerank_usage``), by reranker over the open namespaces."""
        labels = ["reranker", "model"]
        requests = CounterMetricFamily(
            "graphmem_rerank_requests", "Searches the rerank stage ran on.", labels=labels
        )
        fallbacks = CounterMetricFamily(
            "graphmem_rerank_fallbacks",
            "Searches left in the fused order because their reranker failed.",
            labels=labels,
        )
        totals: dict[tuple[str, str], list[int]] = {}
        for memory in self.namespaces.opened().values():
            for usage in memory.rerank_usage():
                counts = totals.setdefault((usage.provider, usage.model), [0, 0])
                counts[0] += usage.calls
                counts[1] += usage.failed_calls
        for key, (calls, failed) in sorted(totals.items()):
            requests.add_metric(list(key), calls)
            fallbacks.add_metric(list(key), failed)
        return requests, fallbacks
