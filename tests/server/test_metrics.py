"""Metrics and stats count the calls and tokens of the model providers (embeddings and the LLM
classifier), per provider and model."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphmem.server import create_app

from graphmem import Settings

from ..support.clock import Clock
from ..support.graphql_clients import STORE, InProcess
from ..support.openai_stub import OpenAIStub


@pytest.mark.integration
def test_metrics_and_stats_count_the_calls_and_tokens_of_the_model_providers(
    data_dir: Path, clock: Clock
) -> None:
    stub = OpenAIStub(dimensions=16)
    with stub:
        settings = Settings(
            data_dir=data_dir,
            embedder="openai",
            embed_base_url=stub.base_url,
            embed_dimensions=16,
            classifier="llm",
            llm_base_url=stub.base_url,
            llm_model="tiny-classifier",
        )
        stub.default_reply = '{"decisions": [{"fact": 0, "action": "ADD"}]}'
        with InProcess(create_app(settings, clock=clock)) as client:
            client.data(STORE, {"t": "Kim likes sailing"})
            client.data(STORE, {"t": "Kim likes sailing boats"})
            metrics = client.request("GET", "/metrics").text
            usage = client.data("{ stats { data } }")["stats"]["data"]["usage"]
    labels = 'kind="llm",model="tiny-classifier",provider="openai"'
    assert f"graphmem_provider_calls_total{{{labels}}} 1.0" in metrics
    chat = next(r for r in stub.requests if r.route == "chat")
    words = sum(len(m["content"].split()) for m in chat.body["messages"])
    assert f'graphmem_provider_tokens_total{{{labels},type="prompt"}} {words}.0' in metrics
    embedding = 'kind="embedding",model="text-embedding-3-small",provider="openai"'
    assert f"graphmem_provider_calls_total{{{embedding}}} 2.0" in metrics
    assert f'graphmem_provider_tokens_total{{{embedding},type="prompt"}} 7.0' in metrics
    assert usage["llm"]["calls"] == 1 and usage["embedding"]["calls"] == 2
