"""The ``llm`` reranker: the configured chat model (``llm_*`` settings) ranks the candidates in
one request, answering ``{"ranking": [numbers of the passages, best first]}``.

Each passage is sent cut to PASSAGE_CHARACTERS; the request is bounded by ``rerank_timeout`` and
``rerank_max_retries`` (not the classifier's ``llm_timeout``: a search waits for it) and counted
in the chat client's meter like every LLM request. The passages it does not list follow the
ones it does, in their fused order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..errors import LLMError
from ..llm import ChatClient, answer_list
from ..settings import Settings
from ..usage import Meter
from .interface import Candidate, RerankFailed

#: Characters of a candidate's text the model reads.
PASSAGE_CHARACTERS: Final = 600

SYSTEM: Final = (
    "You rank passages from a memory by how well they answer a question. Read the question and "
    "the numbered passages, then answer a JSON object "
    '{"ranking": [the numbers of the passages that help answer it, most helpful first]}. '
    "Leave out passages that do not help."
)


class LLMReranker:
    """Ranks candidates with one request to ``chat``."""

    name = "llm"

    def __init__(self, chat: ChatClient) -> None:
        self.chat = chat
        self.meter = Meter("rerank", "llm", chat.model)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMReranker:
        """The reranker of the ``llm_*`` settings, bounded by the ``rerank_*`` ones;
        InvalidInput if they name no endpoint."""
        bounded = settings.model_copy(
            update={
                "llm_timeout": settings.rerank_timeout,
                "llm_max_retries": settings.rerank_max_retries,
            }
        )
        return cls(ChatClient.from_settings(bounded, user="reranker llm"))

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> list[tuple[int, float]]:
        passages = "\n".join(
            f"[{i}] {' '.join(c.text[:PASSAGE_CHARACTERS].split())}"
            for i, c in enumerate(candidates)
        )
        try:
            ranking = answer_list(
                self.chat.complete_json(SYSTEM, f"Question: {query}\n\nPassages:\n{passages}"),
                "ranking",
            )
        except LLMError as exc:
            raise RerankFailed(str(exc)) from None
        self.meter.record(inputs=len(candidates))
        seen: dict[int, None] = {}
        for number in ranking:
            if isinstance(number, bool) or not isinstance(number, int):
                raise RerankFailed(f"the ranking holds {number!r}, not a passage's number")
            if 0 <= number < len(candidates):
                seen.setdefault(number)
        if ranking and not seen:
            raise RerankFailed("the ranking names no passage that was sent")
        return [(i, float(len(seen) - place)) for place, i in enumerate(seen)]
