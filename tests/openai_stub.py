"""A small OpenAI-compatible embeddings server for tests (standard library only).

    stub = EmbeddingsStub(dimensions=12)
    with stub as base_url:          # "http://127.0.0.1:<port>/v1"
        stub.fail_next(status=500, times=2)
        ...
        stub.requests               # every request received, in order

``POST /v1/embeddings`` answers a deterministic vector per input text (seeded from the text's
sha256, deliberately not normalised), honours the ``dimensions`` request field, and encodes as
the request's ``encoding_format`` asks: ``"float"`` as JSON lists, ``"base64"`` (the openai
client's default) as base64 of little-endian float32. The answer's ``data`` items come back in
reverse order, each with its ``index``, as the API allows, so callers must sort by index.

Scripted faults apply to the next requests, in the order they were scripted:
``fail_next`` (an HTTP error status, with ``retry-after-ms: 10`` so client retries are quick),
``wrong_count_next`` (one vector too few) and ``wrong_dimensions_next`` (vectors of another size).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt


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


@dataclass(frozen=True)
class _Fault:
    kind: str  # "ok", "status", "count" or "dimensions"
    value: int


class EmbeddingsStub:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1, scriptable to fail."""

    def __init__(self, dimensions: int = 12, *, honour_dimensions: bool = True) -> None:
        self.dimensions = dimensions
        self.honour_dimensions = honour_dimensions
        self.requests: list[StubRequest] = []
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------- scripting

    def fail_next(self, status: int = 500, times: int = 1, *, after: int = 0) -> None:
        """Answer ``times`` requests with HTTP ``status`` and an OpenAI error body.

        ``after``: answer that many requests normally first (all faults queue in order).
        """
        self._script(_Fault("status", status), times, after)

    def wrong_count_next(self, times: int = 1, *, after: int = 0) -> None:
        """Answer ``times`` requests with one vector fewer than texts sent."""
        self._script(_Fault("count", 0), times, after)

    def wrong_dimensions_next(self, dimensions: int, times: int = 1, *, after: int = 0) -> None:
        """Answer ``times`` requests with vectors of ``dimensions`` values."""
        self._script(_Fault("dimensions", dimensions), times, after)

    def _script(self, fault: _Fault, times: int, after: int) -> None:
        with self._lock:
            self._faults.extend(_Fault("ok", 0) for _ in range(after))
            self._faults.extend(fault for _ in range(times))

    # ----------------------------------------------------------------------------- inspection

    @property
    def answered(self) -> list[StubRequest]:
        """The requests answered with embeddings (status 200)."""
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    @property
    def embedded_texts(self) -> list[str]:
        """Every text embedded successfully, in request order."""
        return [text for r in self.answered for text in r.inputs]

    def vector(self, text: str, dimensions: int | None = None) -> npt.NDArray[np.float32]:
        """The unnormalised vector this stub answers for ``text``."""
        return stub_vector(text, dimensions or self.dimensions)

    # ----------------------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stub is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> str:
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-stub",
            daemon=True,
        )
        self._thread.start()
        return self.base_url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        # Keep-alive connections would park their handler threads; end them.
        with self._lock:
            open_connections = list(self._connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join(timeout=5)

    # ----------------------------------------------------------------------------- serving

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind == "status":
            kind = "rate_limit_exceeded" if fault.value == 429 else "server_error"
            return fault.value, {
                "error": {"message": f"scripted failure {fault.value}", "type": kind, "code": kind}
            }
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, {
                "error": {"message": "input must be a string or a list of strings",
                          "type": "invalid_request_error", "code": None}
            }  # fmt: skip
        dims = self.dimensions
        if self.honour_dimensions and isinstance(body.get("dimensions"), int):
            dims = body["dimensions"]
        if fault is not None and fault.kind == "dimensions":
            dims = fault.value
        if fault is not None and fault.kind == "count":
            texts = texts[:-1]
        encoding = body.get("encoding_format") or "float"
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
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", "stub"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


class _Handler(BaseHTTPRequestHandler):
    owner: EmbeddingsStub
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.owner._lock:
            self.owner._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        path = self.path.split("?", 1)[0]
        if path.rstrip("/") == "/v1/embeddings" and isinstance(body, dict):
            status, payload = self.owner._answer(body)
        else:
            status, payload = 404, {
                "error": {"message": f"no route {path}", "type": "invalid_request_error",
                          "code": None}
            }  # fmt: skip
            body = body if isinstance(body, dict) else {}
        with self.owner._lock:
            self.owner.requests.append(
                StubRequest(path, body, status, {k.lower(): v for k, v in self.headers.items()})
            )
        out = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if status != 200:
            self.send_header("retry-after-ms", "10")
        self.end_headers()
        self.wfile.write(out)
