"""``Client``: ``Memory``'s verbs over a graphmem service, through its GraphQL API.

    client = Client("http://memory.internal:8420", api_key="gm_…", namespace="alice")
    [result] = client.store_many([{"text": "Ana moved to Lisbon in 2019", "entity": "ana"}])
    hits = client.search("where does Ana live", as_of="2020")

1. The same names, arguments and return types as ``Memory`` (``Fact``, ``StoreResult``,
   ``SearchHit``, ``Link``): code written against one runs against the other. The URL, API key
   and namespace come from the arguments, else ``GRAPHMEM_URL`` (default
   ``http://127.0.0.1:8420``), ``GRAPHMEM_API_KEY`` and ``GRAPHMEM_NAMESPACE`` (default: the
   key's first namespace).
2. The same exceptions: an error the service answers (a GraphQL error's or a payload's
   ``code``) is raised as the class ``Memory`` raises for it (``InvalidInput``, ``NotFound``,
   ``Conflict``, ``Forbidden``…); the codes only a service answers (``RATE_LIMITED``,
   ``TOO_COSTLY``…) as ``ServiceError`` with that ``code``, a key it does not admit as
   ``Unauthenticated`` (a ``ServiceError`` and a ``Forbidden``). A service that cannot be
   reached raises ``ServiceError`` with code ``UNAVAILABLE``.
3. Retries: a 429 (rate limit) or 503 answer, or a refused connection, is retried up to
   ``retries`` times, waiting the answer's ``Retry-After`` or a backoff doubling from
   ``BACKOFF_S``; a write is retried only when the service certainly did not run it (429, 503,
   a connection refused before it was sent).
4. Bounds: a call, its retries and their waits included, takes at most ``timeout`` seconds in
   all, however slowly the service answers (then ``UNAVAILABLE``); an answer is read up to
   ``max_answer_bytes`` (``DEFAULT_MAX_ANSWER_BYTES``, then ``TOO_COSTLY``); one that is not a
   GraphQL answer of the shape asked for, or nests deeper than ``MAX_ANSWER_NESTING``, is a
   ``ServiceError`` with code ``INTERNAL_ERROR`` (graphmem.bounded_http).
"""

from .aio import AsyncClient
from .sync import Client
from .wire import ServiceError, Unauthenticated

__all__ = ["AsyncClient", "Client", "ServiceError", "Unauthenticated"]
