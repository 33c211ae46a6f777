"""The ``http`` reranker: any reranker served over HTTP, in one of the two common shapes.

- ``cohere`` (Cohere, Jina, vLLM, Infinity, llama.cpp): ``POST {model, query, documents,
  top_n}`` → ``{"results": [{"index", "relevance_score"}]}``;
- ``tei`` (Hugging Face Text Embeddings Inference): ``POST {query, texts, truncate}`` →
  ``[{"index", "score"}]``.

The candidates are sent once, in one request, to ``rerank_url``; the request and its retries
(429, 5xx, timeouts, lost connections, with a doubling backoff) are over within
``rerank_timeout`` whatever pace the server answers at, and an answer is read up to
MAX_RERANK_ANSWER_BYTES (:mod:`graphmem.bounded_http`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any, Final

import httpx

from ..bounded_http import BadAnswer, BoundedTransport, bounds, parse_json
from ..errors import InvalidInput, shown_url
from ..settings import Settings
from ..usage import Meter
from ..vectors.embedders import FIRST_RETRY_WAIT_S, LONGEST_RETRY_WAIT_S, RETRIED_STATUSES
from .interface import Candidate, RerankFailed, checked

#: The largest answer read: scores of a few hundred candidates take a few kilobytes.
MAX_RERANK_ANSWER_BYTES: Final = 1_048_576


class HttpReranker:
    """A reranker at ``url`` speaking ``api`` (``cohere`` or ``tei``)."""

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        api: str = "cohere",
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 5.0,
        max_retries: int = 1,
    ) -> None:
        self.url, self.api, self.model = url, api, model
        self._timeout = timeout
        self._max_retries = max_retries
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(transport=BoundedTransport(), headers=headers)
        self.meter = Meter("rerank", f"http-{api}", model or shown_url(url))

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpReranker:
        """The reranker of the ``rerank_*`` settings; InvalidInput without ``rerank_url``."""
        if not settings.rerank_url:
            raise InvalidInput("reranker http needs rerank_url", field="rerank_url")
        if not settings.rerank_url.startswith(("http://", "https://")):
            raise InvalidInput("rerank_url must be an http:// or https:// URL", field="rerank_url")
        return cls(
            settings.rerank_url,
            api=settings.rerank_api,
            model=settings.rerank_model,
            api_key=settings.rerank_api_key,
            timeout=settings.rerank_timeout,
            max_retries=settings.rerank_max_retries,
        )

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> list[tuple[int, float]]:
        texts = [c.text for c in candidates]
        body: dict[str, Any]
        if self.api == "tei":
            body = {"query": query, "texts": texts, "truncate": True}
        else:
            body = {"query": query, "documents": texts, "top_n": len(texts)}
            if self.model is not None:
                body["model"] = self.model
        answer, retries = self._post(body)
        scores = checked(_scores(answer, self.api), len(texts))
        self.meter.record(inputs=len(texts), retries=retries)
        return scores

    def close(self) -> None:
        self._client.close()

    def _post(self, body: dict[str, Any]) -> tuple[Any, int]:
        """The JSON answer to ``body`` and the retries it took; RerankFailed when there is none
        within the timeout and retries."""
        with bounds(seconds=self._timeout, max_bytes=MAX_RERANK_ANSWER_BYTES) as limit:
            for retries in range(self._max_retries + 1):
                try:
                    response = self._client.post(self.url, json=body)
                    if response.status_code == 200:
                        return parse_json(response.content), retries
                    failure = f"HTTP {response.status_code} from {shown_url(self.url)}"
                    if response.status_code not in RETRIED_STATUSES and response.status_code < 500:
                        raise RerankFailed(failure)
                except httpx.TimeoutException:
                    failure = f"no answer from {shown_url(self.url)} in {self._timeout:g} s"
                except httpx.HTTPError as exc:
                    failure = f"request to {shown_url(self.url)} failed: {exc}"
                except BadAnswer as exc:
                    raise RerankFailed(f"the answer is {exc}") from None
                wait = min(FIRST_RETRY_WAIT_S * 2**retries, LONGEST_RETRY_WAIT_S)
                wait *= 1 - 0.25 * random.random()
                if retries == self._max_retries or wait >= limit.left():
                    raise RerankFailed(failure)
                time.sleep(wait)
        raise AssertionError("unreachable")


def _scores(answer: Any, api: str) -> list[tuple[Any, Any]]:
    """(index, score) pairs of an answer in the ``api`` shape; RerankFailed if it is not one."""
    if api == "tei":
        items, score = answer, "score"
    else:
        items = answer.get("results") if isinstance(answer, dict) else None
        score = "relevance_score"
    if not isinstance(items, list):
        raise RerankFailed(f"the answer is not a {api} rerank answer")
    pairs = []
    for item in items:
        if not isinstance(item, dict) or "index" not in item or score not in item:
            raise RerankFailed(f'an item of the answer has no "index" and "{score}"')
        pairs.append((item["index"], item[score]))
    return pairs
