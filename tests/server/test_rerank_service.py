"""The rerank stage over the service: GraphQL's ``search(rerank:)`` and each hit's ``reranked``,
the MCP search tool's ``rerank``, the client's, counted in /metrics and charged as a request
that calls out, whether the call names the reranker or the server's setting chose it (against
the reranker stub of tests/core/test_rerank.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphmem.server import create_app
from graphmem.server.cost import HEAVY_COST
from graphmem.server.mcp.server import tool_cost
from graphmem.server.mcp.tools import TOOLS

from graphmem import InvalidInput, Settings
from graphmem.client.wire import rerank_name
from graphmem.rerank.features import FeatureReranker
from graphmem.storage import open_keys

from ..core.test_rerank import TEXTS, RerankStub, opened
from ..support.clock import Clock
from ..support.graphql_clients import InProcess

SEARCH = """query($q: String!, $r: Rerank) {
  search(query: $q, limit: 5, rerank: $r) { fact { text } reranked { by fusedRank score fallback } }
}"""


def test_a_graphql_search_names_its_reranker_and_each_hit_says_how_it_was_placed(
    tmp_path: Path,
) -> None:
    with RerankStub() as url:
        settings = Settings(
            data_dir=tmp_path, embedder="hash", rerank_url=f"{url}/rerank", rerank_api="tei"
        )
        with InProcess(create_app(settings)) as client:
            for text in TEXTS:
                client.data(
                    "mutation($t: String!) { storeFact(input: {text: $t}) { action } }", {"t": text}
                )
            plain = client.data(SEARCH, {"q": "Alice", "r": None})["search"]
            reranked = client.data(SEARCH, {"q": "Alice", "r": "HTTP"})["search"]
            metrics = client.request("GET", "/metrics").text
    assert all(hit["reranked"] is None for hit in plain)
    assert {(hit["reranked"]["by"], hit["reranked"]["fallback"]) for hit in reranked} == {
        ("http", None)
    }
    # the stub scores texts in the reverse of the order they are sent: the fused order reversed
    assert [hit["reranked"]["fusedRank"] for hit in reranked] == list(range(len(reranked), 0, -1))
    assert "graphmem_rerank_requests_total{model=" in metrics
    [requests] = [m for m in metrics.splitlines() if m.startswith("graphmem_rerank_requests_total")]
    assert requests.endswith(" 1.0")


def test_a_failing_reranker_keeps_the_fused_order_and_counts_a_fallback_in_metrics(
    tmp_path: Path,
) -> None:
    server = RerankStub()
    with server as url:
        server.faults = ["500"] * 10
        settings = Settings(
            data_dir=tmp_path,
            embedder="hash",
            rerank_url=f"{url}/rerank",
            rerank_api="tei",
            rerank_max_retries=0,
        )
        with InProcess(create_app(settings)) as client:
            client.data('mutation { storeFact(input: {text: "Alice moved to Paris"}) { action } }')
            [hit] = client.data(SEARCH, {"q": "Alice", "r": "HTTP"})["search"]
            metrics = client.request("GET", "/metrics").text
    assert hit["reranked"]["fallback"] and hit["reranked"]["score"] is None
    [fallbacks] = [
        m for m in metrics.splitlines() if m.startswith("graphmem_rerank_fallbacks_total")
    ]
    assert fallbacks.endswith(" 1.0")


def test_the_mcp_search_tool_reranks_as_told_and_a_calling_out_reranker_costs_more(
    tmp_path: Path,
) -> None:
    [search] = [t for t in TOOLS if t.name == "memory_recall"]
    with opened(tmp_path) as memory:
        _, data = search.run(
            memory, search.args.model_validate({"query": "Alice", "rerank": "features"})
        )
    assert {hit["reranked"]["by"] for hit in data["hits"]} == {"features"}
    cheap = tool_cost(search.args.model_validate({"query": "Alice", "rerank": "features"}))
    dear = tool_cost(search.args.model_validate({"query": "Alice", "rerank": "llm"}))
    assert cheap < HEAVY_COST <= dear  # so it runs on the lane, a few at a time


def test_a_graphql_search_that_names_a_calling_out_reranker_is_charged_as_heavy(
    tmp_path: Path,
) -> None:
    with InProcess(create_app(Settings(data_dir=tmp_path, embedder="hash"))) as client:
        costs = {
            rerank: client.request(
                "POST", "/graphql", json={"query": SEARCH, "variables": {"q": "x", "r": rerank}}
            ).json()["extensions"]["cost"]["requested"]
            for rerank in (None, "FEATURES", "LLM")
        }
    assert costs[None] == costs["FEATURES"] and costs["LLM"] >= costs[None] + HEAVY_COST


RECALL = 'query { recall(prompt: "x") { context } }'


def test_searches_and_recalls_the_servers_reranker_reranks_are_charged_as_heavy(
    tmp_path: Path,
) -> None:
    """A search that names no reranker, and every recall, run the server's ``reranker``
    setting: one that sends a request is charged for it, as when the call names it."""
    costs = {}
    for reranker in ("none", "llm"):
        settings = Settings(data_dir=tmp_path / reranker, embedder="hash", reranker=reranker)
        with InProcess(create_app(settings)) as client:
            for rerank in (None, "NONE"):
                costs[reranker, rerank] = client.request(
                    "POST", "/graphql", json={"query": SEARCH, "variables": {"q": "x", "r": rerank}}
                ).json()["extensions"]["cost"]["requested"]
            costs[reranker, "recall"] = client.request(
                "POST", "/graphql", json={"query": RECALL}
            ).json()["extensions"]["cost"]["requested"]
    assert costs["llm", None] >= costs["none", None] + HEAVY_COST
    assert (
        costs["llm", "NONE"] == costs["none", None]
    )  # named off: no request, whatever the setting
    assert costs["none", "recall"] < HEAVY_COST <= costs["llm", "recall"]
    [search] = [t for t in TOOLS if t.name == "memory_recall"]
    [context] = [t for t in TOOLS if t.name == "memory_context"]
    plain = search.args.model_validate({"query": "Alice"})
    named_off = search.args.model_validate({"query": "Alice", "rerank": "none"})
    assert tool_cost(plain) < HEAVY_COST <= tool_cost(plain, "http")  # on the lane
    assert tool_cost(named_off, "http") == tool_cost(plain)
    prompt = context.args.model_validate({"prompt": "Alice"})
    assert tool_cost(prompt) < HEAVY_COST <= tool_cost(prompt, "http")


def test_a_mem0_search_the_servers_reranker_reranks_spends_the_request(
    tmp_path: Path, clock: Clock
) -> None:
    """With points for light searches only, a mem0 search is answered while the server does
    not rerank and refused RATE_LIMITED once its reranker sends a request per search."""
    statuses = {}
    for reranker in ("none", "llm"):
        settings = Settings(
            data_dir=tmp_path / reranker,
            embedder="hash",
            mem0_api=True,
            reranker=reranker,
            graphql_max_cost=HEAVY_COST // 2,
            rate_limit_per_minute=HEAVY_COST // 2,
        )
        keys = open_keys(settings)
        token, _ = keys.create(["default"])
        keys.close()
        with InProcess(create_app(settings, clock=clock)) as service:
            statuses[reranker] = service.request(
                "POST",
                "/mem0/v3/memories/search/",
                json={"query": "sailing", "filters": {"user_id": "a"}},
                headers={"Authorization": f"Token {token}"},
            ).status_code
    assert statuses == {"none": 200, "llm": 429}


def test_the_client_sends_a_rerankers_name_and_refuses_a_python_reranker() -> None:
    assert rerank_name("features") == "FEATURES" and rerank_name(None) is None
    with pytest.raises(InvalidInput, match="Python only"):
        rerank_name(FeatureReranker.shipped())
    with pytest.raises(InvalidInput, match="unknown reranker"):
        rerank_name("cohere")
