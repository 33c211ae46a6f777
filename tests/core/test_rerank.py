"""The rerank stage: each reranker reorders the best of the fused order, chosen by a setting or
per call; the HTTP shapes and the chat model against stubs on 127.0.0.1; any failure keeps the
fused order, counted and logged once."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from graphmem import InvalidInput, Memory, Reranked, Settings
from graphmem.rerank.features import FEATURES, FeatureReranker

from ..support.openai_stub import LoopbackServer, OpenAIStub

TEXTS = [
    "Alice moved to Paris in June",
    "Alice paints birds in the park",
    "Bob drinks green tea every morning",
    "Carol runs a marathon in Berlin",
    "Dana keeps two cats and a dog",
]
QUERY = "Where does Alice live?"


class RerankStub:
    """A reranker server: ``/rerank`` in TEI's shape, ``/v1/rerank`` in Cohere's, scoring the
    texts in the reverse of the order they are sent; scriptable to fail."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.faults: list[str] = []  # "500", "404", "slow", "garbage", "bad-index"

    def __enter__(self) -> str:
        app = Starlette(
            routes=[
                Route("/rerank", self._answer, methods=["POST"]),
                Route("/v1/rerank", self._answer, methods=["POST"]),
            ]
        )
        self._served = LoopbackServer(app, "rerank-stub")
        return self._served.url

    def __exit__(self, *exc: object) -> None:
        self._served.stop()

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((request.url.path, body, dict(request.headers)))
        fault = self.faults.pop(0) if self.faults else None
        if fault == "slow":
            await asyncio.sleep(2)
        if fault in ("500", "404"):
            return JSONResponse({"error": "scripted"}, status_code=int(fault))
        if fault == "garbage":
            return Response("<html>busy</html>", media_type="text/html")
        texts = body["texts"] if request.url.path == "/rerank" else body["documents"]
        n = len(texts)
        scored = [{"index": n if fault == "bad-index" else i, "s": float(i)} for i in range(n)]
        if request.url.path == "/rerank":
            return JSONResponse(
                sorted(({"index": s["index"], "score": s["s"]} for s in scored), key=_best)
            )
        results = [{"index": s["index"], "relevance_score": s["s"]} for s in scored]
        return JSONResponse({"results": sorted(results, key=_best)})


def _best(item: dict[str, Any]) -> float:
    return -float(item.get("score", item.get("relevance_score", 0)))


@pytest.fixture
def stub() -> Iterator[tuple[RerankStub, str]]:
    server = RerankStub()
    with server as url:
        yield server, url


def opened(path: Path, **settings: Any) -> Memory:
    memory = Memory.open(
        path, embedder="hash", settings=Settings(data_dir=path, track_access=False, **settings)
    )
    memory.store_many([{"text": text, "entity": text.split()[0]} for text in TEXTS])
    return memory


def texts(hits: list[Any]) -> list[str]:
    return [hit.fact.text for hit in hits]


@pytest.mark.parametrize(("api", "path"), [("tei", "/rerank"), ("cohere", "/v1/rerank")])
def test_an_http_reranker_in_either_shape_reorders_the_candidates_in_one_request(
    tmp_path: Path, stub: tuple[RerankStub, str], api: str, path: str
) -> None:
    server, url = stub
    with opened(
        tmp_path,
        reranker="http",
        rerank_url=url + path,
        rerank_api=api,
        rerank_model="rerank-small",
        rerank_api_key="sekrit",
    ) as memory:
        fused = texts(memory.search(QUERY, rerank="none"))
        hits = memory.search(QUERY)
        assert texts(hits) == fused[::-1]
        assert len(server.requests) == 1
        sent_path, body, headers = server.requests[0]
        assert sent_path == path
        assert body["query"] == QUERY
        assert (body["texts"] if api == "tei" else body["documents"]) == fused
        if api == "cohere":
            assert body["model"] == "rerank-small" and body["top_n"] == len(fused)
        assert headers["authorization"] == "Bearer sekrit"
        assert hits[0].reranked == Reranked("http", len(fused), float(len(fused) - 1))
        assert hits[-1].to_dict()["reranked"] == {
            "by": "http",
            "fused_rank": 1,
            "score": 0.0,
            "fallback": None,
        }
        [usage] = memory.rerank_usage()
        assert (usage.kind, usage.calls, usage.failed_calls, usage.inputs) == (
            "rerank",
            1,
            0,
            len(fused),
        )


def test_only_the_best_rerank_candidates_are_sent_and_the_rest_follow(
    tmp_path: Path, stub: tuple[RerankStub, str]
) -> None:
    server, url = stub
    with opened(tmp_path, rerank_url=url + "/rerank", rerank_api="tei", rerank_candidates=3) as m:
        fused = texts(m.search(QUERY))
        hits = m.search(QUERY, rerank="http")
        assert len(server.requests[0][1]["texts"]) == 3
        assert texts(hits) == fused[:3][::-1] + fused[3:]
        assert [h.reranked is None for h in hits] == [False] * 3 + [True] * (len(fused) - 3)


@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        (["500", "500"], "HTTP 500"),
        (["404"], "HTTP 404"),
        (["slow"], "no answer"),
        (["garbage"], "not valid JSON"),
        (["bad-index"], "names candidate"),
    ],
)
def test_a_failing_http_reranker_leaves_the_fused_order_counted_and_logged_once(
    tmp_path: Path,
    stub: tuple[RerankStub, str],
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    reason: str,
) -> None:
    server, url = stub
    with opened(
        tmp_path,
        reranker="http",
        rerank_url=url + "/rerank",
        rerank_api="tei",
        # Short only where the stub is slow on purpose: on a busy machine 0.5 s can run out
        # during the retry of a 500, which then fails as unanswered instead.
        rerank_timeout=0.5 if faults == ["slow"] else 5.0,
        rerank_max_retries=1,
    ) as memory:
        fused = texts(memory.search(QUERY, rerank="none"))
        with caplog.at_level(logging.WARNING, logger="graphmem"):
            for _ in range(2):
                server.faults = list(faults)
                hits = memory.search(QUERY)
                assert texts(hits) == fused
                placed = [h.reranked for h in hits]
                assert all(p is not None and p.score is None for p in placed)
                assert placed[0] is not None and reason in (placed[0].fallback or "")
        [usage] = memory.rerank_usage()
        assert (usage.calls, usage.failed_calls) == (0, 2)
        warnings = [r for r in caplog.records if "reranker failed" in r.getMessage()]
        assert len(warnings) == 1 and reason in warnings[0].getMessage()


def test_a_retried_http_error_that_then_answers_reranks(
    tmp_path: Path, stub: tuple[RerankStub, str]
) -> None:
    server, url = stub
    with opened(tmp_path, rerank_url=url + "/rerank", rerank_api="tei") as memory:
        fused = texts(memory.search(QUERY))
        server.faults = ["500"]
        assert texts(memory.search(QUERY, rerank="http")) == fused[::-1]
        [usage] = memory.rerank_usage()
        assert (usage.calls, usage.retries) == (1, 1)


def test_the_llm_reranker_asks_the_chat_model_once_and_follows_its_ranking(
    tmp_path: Path,
) -> None:
    stub = OpenAIStub()
    with (
        stub as base_url,
        opened(
            tmp_path,
            reranker="llm",
            llm_base_url=base_url,
            llm_api_key="test",
            rerank_max_retries=0,
        ) as memory,
    ):
        fused = texts(memory.search(QUERY, rerank="none"))
        painter = fused.index("Alice paints birds in the park")
        stub.reply_next(json.dumps({"ranking": [painter, 99]}))
        hits = memory.search(QUERY)
        assert texts(hits)[0] == "Alice paints birds in the park"
        assert texts(hits)[1:] == [t for t in fused if t != "Alice paints birds in the park"]
        assert hits[0].reranked == Reranked("llm", painter + 1, 1.0)
        assert hits[1].reranked is not None and hits[1].reranked.score is None
        [request] = stub.chat_requests
        prompt = request.body["messages"][1]["content"]
        assert QUERY in prompt and f"[{painter}] Alice paints birds" in prompt
        stub.reply_next("the passages are all lovely")
        assert texts(memory.search(QUERY)) == fused
        [usage] = memory.rerank_usage()
        assert (usage.calls, usage.failed_calls) == (1, 1)


def test_the_call_chooses_over_the_setting(tmp_path: Path) -> None:
    with opened(tmp_path, reranker="features") as memory:
        assert all(h.reranked and h.reranked.by == "features" for h in memory.search(QUERY))
        assert all(h.reranked is None for h in memory.search(QUERY, rerank="none"))
    with opened(tmp_path / "other") as memory:
        assert all(h.reranked is None for h in memory.search(QUERY))
        assert all(h.reranked is not None for h in memory.search(QUERY, rerank="features"))


def test_a_reranker_that_is_unknown_or_unreachable_is_refused(tmp_path: Path) -> None:
    with opened(tmp_path) as memory:
        with pytest.raises(InvalidInput, match="unknown reranker") as refused:
            memory.search(QUERY, rerank="cross-encoder")
        assert refused.value.field == "rerank"
        with pytest.raises(InvalidInput, match="rerank_url"):
            memory.search(QUERY, rerank="http")
        with pytest.raises(InvalidInput, match="llm_base_url"):
            memory.search(QUERY, rerank="llm")


def test_the_shipped_features_model_describes_the_features_search_computes() -> None:
    reranker = FeatureReranker.shipped()
    assert len(reranker.model.weights) == len(FEATURES)
    assert "bench.rerank" in reranker.model.made_by


def test_a_reranker_counts_on_across_settings_that_do_not_say_how_to_reach_it(
    tmp_path: Path, stub: tuple[RerankStub, str]
) -> None:
    _, url = stub
    with opened(tmp_path, reranker="http", rerank_url=url + "/rerank", rerank_api="tei") as m:
        m.search(QUERY)
        m.settings = m.settings.model_copy(update={"fts_weight": 0.5})
        m.search(QUERY)
        assert [u.calls for u in m.rerank_usage()] == [2]
        m.settings = m.settings.model_copy(update={"rerank_timeout": 2.0})
        m.search(QUERY)
        assert [u.calls for u in m.rerank_usage()] == [2, 1]


def test_a_client_refuses_a_python_reranker_rather_than_dropping_it() -> None:
    from graphmem import Client

    with pytest.raises(InvalidInput, match="Python only") as refused:
        Client("http://127.0.0.1:9").search(QUERY, rerank=FeatureReranker.shipped())
    assert refused.value.field == "rerank"
