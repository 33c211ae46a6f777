"""How ``/graphql`` answers over HTTP, as the GraphQL-over-HTTP spec says.

1. **Media type** (:func:`negotiate`): ``application/graphql-response+json`` when the
   ``Accept`` header prefers it, else ``application/json`` (also with no ``Accept``, with
   ``*/*``, and with one that names neither: that header is disregarded, as the spec allows).
2. **Status**: with ``application/json``, 200 for every answer to a well-formed request, its
   errors in the body (the spec's legacy rule); with ``application/graphql-response+json``, an
   answer without ``data`` (the request was refused before it ran: a document that does not
   parse or validate, variables that do not fit, a cost over the budget) takes the status of
   its error's code (:func:`status_of`: 400 for most). Either way a request that is not
   well-formed GraphQL over HTTP (no JSON, no query, a mutation over GET, a method other than
   GET or POST) is refused with 4xx, as is one the gate turns away (401, 403, 413, 429, 503).
3. **Refusals** (:func:`refusal`): every one, from the gate, the view or the socket limits, is
   a GraphQL response of one error, ``{"errors": [{"message", "extensions": {"code"}}]}``, never
   plain text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson
from starlette.responses import Response

from graphmem.errors import CODES, Code

GRAPHQL_RESPONSE_JSON: Final = "application/graphql-response+json"
JSON: Final = "application/json"


def negotiate(accept: str | None) -> str:
    """The media type of the answer to a request with this ``Accept`` header (see the module
    docstring): the one of the higher quality; of two accepted as much, the one named outright
    rather than matched by a wildcard, and ``application/graphql-response+json`` when both are
    named (``application/json`` for ``*/*`` and ``application/*``); ``application/json`` when
    the header names neither or is missing."""
    quality, specificity = _quality(accept or "", GRAPHQL_RESPONSE_JSON)
    legacy_quality, legacy_specificity = _quality(accept or "", JSON)
    if quality <= 0 or quality < legacy_quality:
        return JSON
    if quality > legacy_quality or specificity > legacy_specificity:
        return GRAPHQL_RESPONSE_JSON
    return GRAPHQL_RESPONSE_JSON if specificity == legacy_specificity == 2 else JSON


def status_of(code: object) -> int:
    """The HTTP status of an answer without ``data`` whose first error has ``code``, when it
    is sent as ``application/graphql-response+json``: the code's own (``graphmem.errors``), 500
    for an unexpected error, else 400 (the request was refused as it stands)."""
    use = CODES.get(str(code))
    if use is not None and use.http_status is not None:
        return use.http_status
    return 500 if code == Code.INTERNAL_ERROR else 400


def refusal(
    status: int,
    code: str,
    message: str,
    *,
    media_type: str = JSON,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A request refused as a whole: HTTP ``status``, a GraphQL response of one error with
    ``code``, in ``media_type``."""
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return Response(orjson.dumps(body), status, headers, media_type=media_type)


def _quality(accept: str, media: str) -> tuple[float, int]:
    """The quality ``accept`` gives ``media`` and how specifically (2: named, 1: ``type/*``,
    0: ``*/*``), by its most specific range that matches; (0, 0) when none does."""
    kind = media.partition("/")[0]
    found, found_specificity = 0.0, -1
    for item in accept.split(","):
        range_, *parameters = (part.strip() for part in item.split(";"))
        range_ = range_.lower()
        if range_ == media:
            specificity = 2
        elif range_ == f"{kind}/*":
            specificity = 1
        elif range_ == "*/*":
            specificity = 0
        else:
            continue
        if specificity > found_specificity:
            found, found_specificity = _q(parameters), specificity
    return found, max(found_specificity, 0)


def _q(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0
