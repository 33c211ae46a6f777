"""A small OpenAI-compatible server for tests: starlette, served by uvicorn on 127.0.0.1 in a
thread, so both providers (embeddings and chat) are tested over real HTTP.

    stub = OpenAIStub(dimensions=12)
    with stub as base_url:          # "http://127.0.0.1:<port>/v1"
        stub.fail_next(status=500, times=2)
        stub.reply_next('{"decisions": []}')
        ...
        stub.requests               # every request received, in order

``POST /v1/embeddings`` answers a deterministic vector per input text (seeded from the text's
sha256, deliberately not normalised), honours the ``dimensions`` request field, and encodes as
the request's ``encoding_format`` asks: ``"float"`` as JSON lists, ``"base64"`` as base64 of
little-endian float32 (``force_encoding`` answers one way whatever is asked, as some servers
do). The answer's ``data`` items come back in reverse order, each with its ``index``, as the API
allows, so callers must sort by index.

``POST /v1/chat/completions`` answers the scripted replies (``reply_next``: a text, or a function
of the request body giving the text), then ``default_reply``. Both routes report ``usage``:
tokens counted as words.

Scripted faults apply to the next requests of a route (or of any route), in the order they were
scripted: ``fail_next`` (an HTTP error status, with ``retry-after-ms: 10`` so client retries are
quick, or the wait given), ``delay_next`` (answer late, for timeouts), ``wrong_count_next`` (one vector too few),
``wrong_dimensions_next`` (vectors of another size) and ``garbage_next`` (a body that is not
JSON); and hostile answers: ``drip_next`` (the answer after spaces sent one at a time),
``huge_next`` (the answer padded to a size, streamed) and ``deep_next`` (JSON nested deep).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Reply = str | Callable[[dict[str, Any]], str]


def stub_vector(text: str, dimensions: int) -> npt.NDArray[np.float32]:
    """The (unnormalised) vector the stub answers for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector: npt.NDArray[np.float32] = (
        np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32) * 3.0
    )
    return vector


@dataclass(frozen=True)
class StubRequest:
    """One request the stub received, and the HTTP status it answered."""

    path: str
    body: dict[str, Any]
    status: int
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def inputs(self) -> list[str]:
        raw = self.body.get("input", [])
        return [raw] if isinstance(raw, str) else list(raw)

    @property
    def route(self) -> str:
        return "chat" if self.path.endswith("/chat/completions") else "embeddings"


@dataclass(frozen=True)
class _Fault:
    kind: str  # "ok", "status", "delay", "count", "dimensions", "garbage", "drip", "huge", "deep"
    value: float
    route: str | None  # "embeddings", "chat", or None for any
    seconds: float = 0.0  # how long a drip lasts, or the retry-after of a status


class OpenAIStub:
    """``/v1/embeddings`` and ``/v1/chat/completions`` on 127.0.0.1, scriptable to fail."""

    def __init__(
        self,
        dimensions: int = 12,
        *,
        honour_dimensions: bool = True,
        force_encoding: str | None = None,
    ) -> None:
        self.dimensions = dimensions
        self.honour_dimensions = honour_dimensions
        self.force_encoding = force_encoding
        self.default_reply: Reply = "{}"
        self.requests: list[StubRequest] = []
        self._replies: deque[Reply] = deque()
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._served: LoopbackServer | None = None

    # ----------------------------------------------------------------------------- scripting

    def fail_next(
        self,
        status: int = 500,
        times: int = 1,
        *,
        after: int = 0,
        route: str | None = None,
        retry_after: float = 0.01,
    ) -> None:
        """Answer ``times`` requests with HTTP ``status`` and an OpenAI error body.

        ``after``: answer that many requests normally first. ``route``: only requests to
        "embeddings" or "chat" (default: any). ``retry_after``: the seconds the answer asks the
        client to wait (as ``retry-after-ms``).
        """
        self._script(_Fault("status", status, route, retry_after), times, after)

    def delay_next(self, seconds: float, times: int = 1, *, route: str | None = None) -> None:
        """Answer ``times`` requests only after ``seconds`` (a client timeout gives up first)."""
        self._script(_Fault("delay", seconds, route), times, 0)

    def garbage_next(self, times: int = 1, *, route: str | None = None) -> None:
        """Answer ``times`` requests with status 200 and a body that is not JSON."""
        self._script(_Fault("garbage", 0, route), times, 0)

    def drip_next(
        self, interval: float, lasting: float, times: int = 1, *, route: str | None = None
    ) -> None:
        """Answer ``times`` requests at once with status 200, then send a space every
        ``interval`` seconds for ``lasting`` seconds, then the answer (valid JSON, if waited
        for): a read never waits long, the whole answer does."""
        self._script(_Fault("drip", interval, route, lasting), times, 0)

    def huge_next(self, size: int, times: int = 1, *, route: str | None = None) -> None:
        """Answer ``times`` requests with the answer padded to ``size`` bytes (an extra
        ``padding`` field), streamed as it is made."""
        self._script(_Fault("huge", size, route), times, 0)

    def deep_next(self, levels: int, times: int = 1, *, route: str | None = None) -> None:
        """Answer ``times`` requests with status 200 and a JSON array nested ``levels`` deep."""
        self._script(_Fault("deep", levels, route), times, 0)

    def wrong_count_next(self, times: int = 1, *, after: int = 0) -> None:
        """Answer ``times`` embedding requests with one vector fewer than texts sent."""
        self._script(_Fault("count", 0, "embeddings"), times, after)

    def wrong_dimensions_next(self, dimensions: int, times: int = 1, *, after: int = 0) -> None:
        """Answer ``times`` embedding requests with vectors of ``dimensions`` values."""
        self._script(_Fault("dimensions", dimensions, "embeddings"), times, after)

    def reply_next(self, reply: Reply, times: int = 1) -> None:
        """The content of the next ``times`` chat answers: a text, or a function of the
        request's body that gives it."""
        with self._lock:
            self._replies.extend(reply for _ in range(times))

    def _script(self, fault: _Fault, times: int, after: int) -> None:
        with self._lock:
            self._faults.extend(_Fault("ok", 0, fault.route) for _ in range(after))
            self._faults.extend(fault for _ in range(times))

    # ----------------------------------------------------------------------------- inspection

    @property
    def answered(self) -> list[StubRequest]:
        """The requests answered with status 200."""
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    @property
    def embedded_texts(self) -> list[str]:
        """Every text embedded successfully, in request order."""
        return [text for r in self.answered if r.route == "embeddings" for text in r.inputs]

    @property
    def chat_requests(self) -> list[StubRequest]:
        """Every chat request received (answered or not), in order."""
        with self._lock:
            return [r for r in self.requests if r.route == "chat"]

    def vector(self, text: str, dimensions: int | None = None) -> npt.NDArray[np.float32]:
        """The unnormalised vector this stub answers for ``text``."""
        return stub_vector(text, dimensions or self.dimensions)

    # ----------------------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        if self._served is None:
            raise RuntimeError("the stub is not running")
        return self._served.url + "/v1"

    def __enter__(self) -> str:
        app = Starlette(
            routes=[
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )
        self._served = LoopbackServer(app, "openai-stub")
        return self.base_url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._served is not None
        self._served.stop()

    # ----------------------------------------------------------------------------- serving

    async def _embeddings(self, request: Request) -> Response:
        body, fault = await self._begin(request, "embeddings")
        if fault is not None and fault.kind in ("status", "garbage"):
            return self._faulted(request, body, fault)
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._error(request, body, 400, "input must be a string or a list of strings")
        dims = self.dimensions
        if self.honour_dimensions and isinstance(body.get("dimensions"), int):
            dims = body["dimensions"]
        if fault is not None and fault.kind == "dimensions":
            dims = int(fault.value)
        if fault is not None and fault.kind == "count":
            texts = texts[:-1]
        encoding = self.force_encoding or body.get("encoding_format") or "float"
        data = []
        for index, text in enumerate(texts):
            vector = stub_vector(text, dims)
            embedding: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                if encoding == "base64"
                else [float(x) for x in vector]
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        data.reverse()  # allowed by the API: clients must order by "index"
        tokens = sum(len(t.split()) for t in texts)
        return self._ok(
            request,
            body,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "stub"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
            fault,
        )

    async def _chat(self, request: Request) -> Response:
        body, fault = await self._begin(request, "chat")
        if fault is not None and fault.kind in ("status", "garbage"):
            return self._faulted(request, body, fault)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error(request, body, 400, "messages must be a non-empty list")
        with self._lock:
            reply = self._replies.popleft() if self._replies else self.default_reply
        content = reply(body) if callable(reply) else reply
        prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
        completion = len(content.split())
        return self._ok(
            request,
            body,
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
            fault,
        )

    async def _begin(self, request: Request, route: str) -> tuple[dict[str, Any], _Fault | None]:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        with self._lock:
            fault = next((f for f in self._faults if f.route in (None, route)), None)
            if fault is not None:
                self._faults.remove(fault)
        if fault is not None and fault.kind == "delay":
            await asyncio.sleep(fault.value)
        return (body if isinstance(body, dict) else {}), fault

    def _faulted(self, request: Request, body: dict[str, Any], fault: _Fault) -> Response:
        if fault.kind == "garbage":
            self._record(request, body, 200)
            return Response("<html>not json</html>", media_type="text/html")
        status = int(fault.value)
        return self._error(request, body, status, f"scripted failure {status}", fault.seconds)

    def _error(
        self,
        request: Request,
        body: dict[str, Any],
        status: int,
        message: str,
        retry_after: float = 0.01,
    ) -> Response:
        self._record(request, body, status)
        kind = "rate_limit_exceeded" if status == 429 else "server_error"
        return JSONResponse(
            {"error": {"message": message, "type": kind, "code": kind}},
            status_code=status,
            headers={"retry-after-ms": f"{retry_after * 1000:g}"},
        )

    def _ok(
        self,
        request: Request,
        body: dict[str, Any],
        payload: dict[str, Any],
        fault: _Fault | None = None,
    ) -> Response:
        self._record(request, body, 200)
        kind = None if fault is None else fault.kind
        if fault is None or kind not in ("drip", "huge", "deep"):
            return JSONResponse(payload)
        if kind == "deep":
            levels = int(fault.value)
            return Response(b"[" * levels + b"]" * levels, media_type="application/json")
        encoded = json.dumps(payload).encode()
        if kind == "huge":
            return StreamingResponse(
                _padded(encoded, int(fault.value)), media_type="application/json"
            )
        return StreamingResponse(
            _dripped(encoded, fault.value, fault.seconds), media_type="application/json"
        )

    def _record(self, request: Request, body: dict[str, Any], status: int) -> None:
        with self._lock:
            self.requests.append(
                StubRequest(
                    request.url.path,
                    body,
                    status,
                    {k.lower(): v for k, v in request.headers.items()},
                )
            )


async def _padded(encoded: bytes, size: int) -> AsyncIterator[bytes]:
    """``encoded`` (a JSON object) with a ``padding`` field that brings it to ``size`` bytes."""
    head = b'{"padding": "'
    tail = b'", ' + encoded[1:]
    yield head
    left = max(size - len(head) - len(tail), 0)
    chunk = b"x" * 65_536
    while left > 0:
        yield chunk[:left]
        left -= len(chunk)
    yield tail


async def _dripped(encoded: bytes, interval: float, lasting: float) -> AsyncIterator[bytes]:
    """Spaces, one every ``interval`` seconds for ``lasting`` seconds, then ``encoded``."""
    deadline = time.monotonic() + lasting
    while time.monotonic() < deadline:
        yield b" "
        await asyncio.sleep(interval)
    yield encoded


class LoopbackServer:
    """A starlette app served by uvicorn in a thread on 127.0.0.1, on a free port, from
    construction until ``stop`` (also bench/peers.py's embeddings endpoint)."""

    def __init__(self, app: Starlette, name: str) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._server = uvicorn.Server(
            uvicorn.Config(app, log_level="error", lifespan="off", timeout_graceful_shutdown=1)
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not start")
            time.sleep(0.01)
        host, port = self._socket.getsockname()[:2]
        #: Where it answers: ``http://127.0.0.1:<port>``.
        self.url = f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
