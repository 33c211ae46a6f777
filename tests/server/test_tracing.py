"""Tracing (the ``otel`` extra): GraphQL operations, MCP tool calls, search legs, write batches,
traversals and model calls make spans, caught here by the OpenTelemetry SDK's in-memory
exporter, each with its parent, namespace and cost; none holds a fact's or a query's text; with
tracing off there are none, and nothing fails. Export by OTLP is checked against a collector
stand-in on a loopback port."""

from __future__ import annotations

import http.server
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from graphmem.server import create_app
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from graphmem import InvalidInput, Memory, Settings, tracing
from graphmem.llm import ChatClient

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.openai_stub import OpenAIStub

#: What is stored and asked: no span may carry any of it.
SECRET = "Priya keeps the spare key under the blue flowerpot"
QUESTION = "where does Priya hide the spare key"
REMEMBER = "mutation Remember($t: String!) { storeFact(input: {text: $t}) { fact { id } } }"
FIND = "query Find($q: String!) { search(query: $q, limit: 5) { fact { id } } }"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every span kept in memory (a provider of the test's own: the global one can
    be set only once a process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    yield exporter
    tracing.disable()
    provider.shutdown()


def test_a_query_and_a_mutation_are_spans_with_their_namespace_cost_and_children(
    service: InProcess, spans: InMemorySpanExporter
) -> None:
    service.data(REMEMBER, {"t": SECRET})
    for _ in range(2):  # the second time from the documents validated before
        assert service.data(FIND, {"q": QUESTION})["search"]
    finished = spans.get_finished_spans()

    mutation = _one(finished, "graphql.mutation Remember")
    assert mutation.attributes is not None
    assert dict(mutation.attributes) == {
        "graphql.operation.type": "mutation",
        "graphql.operation.name": "Remember",
        "graphmem.namespace": "default",
        "graphmem.cost": 1,
    }
    assert mutation.status.status_code is StatusCode.UNSET
    write = _one(finished, "graphmem.write")
    assert mutation in _ancestors(write, finished)
    assert _attribute(write, "graphmem.write.writes") == 1
    assert _attribute(write, "graphmem.namespace") == "default"

    queries = _named(finished, "graphql.query Find")
    assert len(queries) == 2
    for query in queries:
        assert _attribute(query, "graphmem.cost") == 5
        (search,) = _children(query, finished, "graphmem.search")
        assert _attribute(search, "graphmem.search.mode") == "hybrid"
        assert _attribute(search, "graphmem.search.hits") == 1
        legs = {s.name for s in _children(search, finished)}
        assert {"graphmem.search.keyword", "graphmem.search.vector"} <= legs
        assert "graphmem.search.dated" in legs  # time hints are on by default
    _no_text_in(finished)


def test_a_failed_operation_says_its_error_code(
    service: InProcess, spans: InMemorySpanExporter
) -> None:
    _, body = service.post('query Empty { search(query: " ") { fact { id } } }')
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    span = _one(spans.get_finished_spans(), "graphql.query Empty")
    assert span.status.status_code is StatusCode.ERROR
    assert _attribute(span, "graphmem.error_code") == "INVALID_INPUT"
    _, body = service.post('{ search(query: "key", limit: 10000) { fact { id } } }')
    refused = _one(spans.get_finished_spans(), "graphql.query")  # anonymous: no name
    assert _attribute(refused, "graphmem.error_code") == body["errors"][0]["extensions"]["code"]


def test_a_request_carrying_a_traceparent_continues_the_callers_trace(
    service: InProcess, spans: InMemorySpanExporter
) -> None:
    trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    body = {"query": FIND, "variables": {"q": QUESTION}}
    headers = {"traceparent": f"00-{trace_id}-{caller}-01"}
    for _ in range(2):  # the second time from the documents validated before
        assert service.request("POST", "/graphql", json=body, headers=headers).status_code == 200
    queries = _named(spans.get_finished_spans(), "graphql.query Find")
    assert len(queries) == 2
    for query in queries:
        assert f"{query.context.trace_id:032x}" == trace_id
        assert query.parent is not None and f"{query.parent.span_id:016x}" == caller


def test_a_tool_call_is_a_span_with_its_namespace_cost_and_search(
    service: InProcess, spans: InMemorySpanExporter
) -> None:
    service.data(REMEMBER, {"t": SECRET})
    spans.clear()
    arguments = {"query": QUESTION, "limit": 3}
    answer = _tool(service, "memory_recall", arguments)
    assert answer["result"]["structuredContent"]["hits"]
    finished = spans.get_finished_spans()
    call = _one(finished, "mcp.tools/call memory_recall")
    assert _attribute(call, "graphmem.namespace") == "default"
    assert _attribute(call, "graphmem.cost") == 3
    assert _attribute(call, "gen_ai.tool.name") == "memory_recall"
    (search,) = _children(call, finished, "graphmem.search")
    assert _children(search, finished, "graphmem.search.vector")

    _tool(service, "memory_forget", {"id": "0190-none"})
    failed = _one(spans.get_finished_spans(), "mcp.tools/call memory_forget")
    assert failed.status.status_code is StatusCode.ERROR
    assert _attribute(failed, "graphmem.error_code") == "NOT_FOUND"
    _tool(service, QUESTION, {})  # a tool name that is a client's text is not spelled out
    unknown = _one(spans.get_finished_spans(), "mcp.tools/call unknown")
    assert unknown.status.status_code is StatusCode.ERROR
    _no_text_in(spans.get_finished_spans())


def test_a_traversal_and_a_search_with_graph_depth_are_spans_of_the_graph_walk(
    settings: Settings, clock: Clock, spans: InMemorySpanExporter
) -> None:
    with Memory.open(settings=settings, clock=clock) as memory:
        stored = memory.store_many([{"text": SECRET}, {"text": QUESTION}])
        first, second = (r.fact.id for r in stored if r.fact is not None)
        memory.link(first, second, "RELATED_TO")
        spans.clear()
        subgraph = memory.traverse(first, depth=2)
        memory.search(QUESTION, graph_depth=1, time_hints=False)
    finished = spans.get_finished_spans()
    walk = _one(finished, "graphmem.traverse")
    assert walk.attributes is not None
    assert dict(walk.attributes) == {
        "graphmem.namespace": "default",
        "graphmem.traverse.depth": 2,
        "graphmem.traverse.max_nodes": 200,
        "graphmem.traverse.nodes": len(subgraph.nodes),
        "graphmem.traverse.edges": len(subgraph.edges),
        "graphmem.traverse.truncated_by": "",
    }
    search = _one(finished, "graphmem.search")
    legs = {s.name for s in _children(search, finished)}
    assert {"graphmem.search.evidence", "graphmem.search.neighbours"} <= legs
    assert "graphmem.search.dated" not in legs
    _no_text_in(finished)


@pytest.mark.integration
def test_model_calls_are_spans_with_their_model_and_tokens_as_children_of_the_write(
    data_dir: Path, clock: Clock, stub: OpenAIStub, spans: InMemorySpanExporter
) -> None:
    stub.default_reply = '{"decisions": [{"fact": 0, "action": "ADD"}]}'
    settings = Settings(
        data_dir=data_dir,
        embedder="openai",
        embed_base_url=stub.base_url,
        embed_dimensions=16,
        classifier="llm",
        llm_base_url=stub.base_url,
        llm_model="tiny-classifier",
    )
    with InProcess(create_app(settings, clock=clock)) as service:
        service.data(REMEMBER, {"t": SECRET})
        service.data(REMEMBER, {"t": f"{SECRET} now"})  # a similar fact: the classifier asked
        service.data(FIND, {"q": QUESTION})
    finished = spans.get_finished_spans()
    chat = _one(finished, "chat tiny-classifier")
    assert _named(finished, "graphql.mutation Remember")[1] in _ancestors(chat, finished)
    assert _attribute(chat, "gen_ai.operation.name") == "chat"
    assert _attribute(chat, "gen_ai.provider.name") == "openai"
    request = next(r for r in stub.requests if r.route == "chat")
    words = sum(len(m["content"].split()) for m in request.body["messages"])
    assert _attribute(chat, "gen_ai.usage.input_tokens") == words
    embeddings = _named(finished, "embeddings text-embedding-3-small")
    assert all(_attribute(e, "gen_ai.usage.input_tokens") for e in embeddings)
    vector = _one(finished, "graphmem.search.vector")
    assert any(vector in _ancestors(e, finished) for e in embeddings)  # the query's, on a thread
    _no_text_in(finished)


@pytest.mark.integration
def test_a_chat_call_that_fails_is_a_span_with_its_error_code(
    stub: OpenAIStub, spans: InMemorySpanExporter
) -> None:
    chat = ChatClient(base_url=stub.base_url, api_key=None, model="tiny", max_retries=0)
    stub.fail_next(status=500)
    with pytest.raises(Exception, match="failed"):
        chat.complete_json("system", QUESTION)
    (span,) = spans.get_finished_spans()
    assert span.name == "chat tiny" and span.status.status_code is StatusCode.ERROR
    assert _attribute(span, "graphmem.error_code") == "LLM_ERROR"
    assert _attribute(span, "error.type") == "LLMError"


def test_with_tracing_off_nothing_is_recorded_and_everything_works(
    service: InProcess, spans: InMemorySpanExporter
) -> None:
    tracing.disable()
    assert not tracing.enabled()
    service.data(REMEMBER, {"t": SECRET})
    assert service.data(FIND, {"q": QUESTION})["search"]
    assert _tool(service, "memory_recall", {"query": QUESTION})["result"]["structuredContent"]
    assert spans.get_finished_spans() == ()


def test_without_opentelemetry_tracing_cannot_be_turned_on_and_stays_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tracing, "OPENTELEMETRY", False)
    with pytest.raises(InvalidInput, match=r"graphmem\[otel\]"):
        tracing.enable()
    assert not tracing.enabled()
    with tracing.span("graphmem.search") as span:
        span.set_attribute("graphmem.search.hits", 1)


def test_an_endpoint_without_the_otel_extra_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    settings = Settings(otel_endpoint="http://127.0.0.1:4318")
    with pytest.raises(InvalidInput, match=r"graphmem\[otel\]") as refused:
        tracing.configure(settings, {})
    assert refused.value.field == "otel_endpoint"
    assert not tracing.enabled()


def test_the_endpoint_comes_from_the_setting_then_the_standard_variables() -> None:
    assert tracing.traces_endpoint(None, {}) is None
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert tracing.traces_endpoint(None, base) == "http://collector:4318/v1/traces"
    traces = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://other:4318/spans"}
    assert tracing.traces_endpoint(None, traces) == "http://other:4318/spans"
    assert tracing.traces_endpoint("http://mine:4318", traces) == "http://mine:4318/v1/traces"
    off = {**base, "OTEL_SDK_DISABLED": "true"}
    assert not tracing.configure(Settings(), off)
    assert not tracing.configure(Settings(), {})
    assert not tracing.enabled()


@pytest.mark.integration
def test_configured_spans_are_exported_by_otlp_over_http_with_the_service_name() -> None:
    received: list[tuple[str, bytes]] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = Settings(
        otel_endpoint=f"http://127.0.0.1:{server.server_port}", otel_service_name="memory-a"
    )
    try:
        provider = tracing.exporting(settings, {})
        assert provider is not None
        tracing.enable(provider)
        with tracing.span("graphmem.search", {"graphmem.namespace": "default"}):
            pass
        assert provider.force_flush()
        provider.shutdown()
    finally:
        tracing.disable()
        server.shutdown()
        server.server_close()
    ((path, body),) = received
    assert path == "/v1/traces"
    assert b"graphmem.search" in body and b"memory-a" in body


def _tool(service: InProcess, name: str, arguments: dict[str, Any]) -> Any:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = service.request("POST", "/mcp", json=message, headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    return response.json()


def _named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = _named(spans, name)
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def _attribute(span: ReadableSpan, name: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(name)


def _children(
    parent: ReadableSpan, spans: Sequence[ReadableSpan], name: str | None = None
) -> list[ReadableSpan]:
    return [
        s
        for s in spans
        if s.parent is not None
        and s.parent.span_id == parent.context.span_id
        and (name is None or s.name == name)
    ]


def _ancestors(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    by_id = {s.context.span_id: s for s in spans}
    found = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        found.append(span)
    return found


def _no_text_in(spans: Sequence[ReadableSpan]) -> None:
    """No span's name, attribute, event or link holds a word of what was stored or asked
    (the words of more than three letters: "the" may well be in a name)."""
    words = {w.lower() for w in f"{SECRET} {QUESTION}".split() if len(w) > 3}
    for span in spans:
        values = [span.name, *(str(v) for v in (span.attributes or {}).values())]
        for event in span.events:
            values += [event.name, *(str(v) for v in (event.attributes or {}).values())]
        for link in span.links:
            values += [str(v) for v in (link.attributes or {}).values()]
        for value in values:
            assert not words & set(value.lower().replace(".", " ").split()), (span.name, value)
