"""The rerank stage: a reranker reads the question against the best candidates of the fused order
and puts them in a new order.

1. Search hands the best ``rerank_candidates`` of its fused order to the reranker the call (or
   the ``reranker`` setting) names, each as a :class:`Candidate` carrying its text and what
   search already knows of it (each leg's score and rank, the loans, the entity and time
   matches, importance, date).
2. The reranker answers scores for some or all of them (:class:`Reranker`): ``features``
   (:mod:`.features`, a small linear model shipped with graphmem), ``http`` (:mod:`.http`, a
   reranker served in the TEI or Cohere shape) or ``llm`` (:mod:`.llm`, the chat model).
3. The scored candidates go first, best first, the others after them in their fused order, and
   the rest of the fused order after all of them. A reranker that fails (a timeout, an HTTP
   error, an answer it cannot read) leaves the fused order as it was: the failure is counted in
   the reranker's meter (``failed_calls``, see :mod:`graphmem.usage`) and logged once.
"""

from .interface import RERANKERS, Candidate, Reranker, RerankFailed, check_choice
from .stage import Reranking

__all__ = ["RERANKERS", "Candidate", "RerankFailed", "Reranker", "Reranking", "check_choice"]
