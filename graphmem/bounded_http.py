"""HTTP requests to servers graphmem does not control — a chat or embedding endpoint, the service
a ``Client`` talks to — bounded in time, size and nesting.

httpx's timeouts bound each network operation, not a request: a server that sends one byte a
second never trips them, and an answer is read whole however large. Inside
``bounds(seconds=…, max_bytes=…)``, an httpx client whose transport is ``BoundedTransport``:

1. gives every network operation (connecting, TLS, each write and read) only the time left
   before the deadline, so the whole call, its retries included, is over by then: past it httpx
   raises its ``TimeoutException``;
2. reads at most ``max_bytes`` of an answer, counted decoded (gzip is inflated here, a piece at a
   time; another encoding is refused): one byte more raises ``AnswerTooLarge``;
3. and ``parse_json`` reads the answer, refusing JSON nested deeper than ``MAX_ANSWER_NESTING``
   (``BadAnswer``) rather than leave a RecursionError to whoever walks it.

The callers turn these into their own typed errors (``LLMError``, ``EmbedderError``,
``ServiceError``).
"""

from __future__ import annotations

import threading
import time
import urllib.request
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

import httpcore
import httpx
import orjson

from .limits import MAX_ANSWER_NESTING

#: Bytes inflated from a compressed answer at a time (httpx inflates a whole chunk at once: 64
#: KiB of gzip can be 64 MB).
INFLATE_STEP: Final = 65_536


class BadAnswer(ValueError):
    """An answer graphmem does not read: not JSON, nested too deep, or in an encoding it does
    not decode. Its message completes "the answer is …"."""


class AnswerTooLarge(BadAnswer):
    """An answer longer than the ``max_bytes`` of the bounds it was read in."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the requests of one call may spend: until ``deadline`` (``time.monotonic()``), and
    ``max_bytes`` of each answer."""

    deadline: float
    max_bytes: int

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.deadline - time.monotonic()


_BOUNDS: ContextVar[Bounds | None] = ContextVar("graphmem_http_bounds", default=None)


@contextmanager
def bounds(*, seconds: float, max_bytes: int) -> Iterator[Bounds]:
    """Bound the requests a ``BoundedTransport`` makes in this block: all of them over within
    ``seconds`` (or by the deadline of the bounds around, if sooner), each answer at most
    ``max_bytes``."""
    deadline = time.monotonic() + seconds
    outer = _BOUNDS.get()
    if outer is not None:
        deadline = min(deadline, outer.deadline)
    limit = Bounds(deadline, max_bytes)
    token = _BOUNDS.set(limit)
    try:
        yield limit
    finally:
        _BOUNDS.reset(token)


def parse_json(raw: bytes | str) -> Any:
    """``raw`` parsed as JSON; BadAnswer if it is not JSON or nests deeper than
    ``MAX_ANSWER_NESTING`` levels."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit"):  # orjson's own bound, above ours
            raise BadAnswer(f"nested deeper than {MAX_ANSWER_NESTING} levels") from None
        raise BadAnswer(f"not valid JSON ({exc})") from None
    # JSON opening fewer brackets than the bound cannot nest deeper: most answers skip the walk.
    opened = (
        raw.count(b"[") + raw.count(b"{")
        if isinstance(raw, bytes)
        else raw.count("[") + raw.count("{")
    )
    if opened > MAX_ANSWER_NESTING and _nests_deeper(value, MAX_ANSWER_NESTING):
        raise BadAnswer(f"nested deeper than {MAX_ANSWER_NESTING} levels")
    return value


class BoundedTransport(httpx.BaseTransport):
    """An httpx transport that keeps its requests to the ``bounds`` they are made in (see the
    module), over ``inner`` or, by default, connections of its own that honour the deadline
    (through the proxy the environment names, as httpx would). Outside any bounds it is the
    transport below it."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self._inner = inner
        self._by_proxy: dict[str | None, httpx.BaseTransport] = {}
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inner = self._inner or self._transport(_environment_proxy(request.url))
        limit = _BOUNDS.get()
        if limit is None:
            return inner.handle_request(request)
        left = limit.left()
        if left <= 0:
            raise httpx.ConnectTimeout("the deadline passed before the request", request=request)
        asked = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            phase: left if asked.get(phase) is None else min(asked[phase], left)
            for phase in ("connect", "read", "write", "pool")
        }
        request.headers["accept-encoding"] = "gzip"  # the one encoding inflated here
        response = inner.handle_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip"):
            response.close()
            raise BadAnswer(f"in {encoding!r} encoding, which graphmem does not read")
        headers = response.headers.raw
        if encoding != "identity":  # what is read on is the inflated answer
            headers = [
                h for h in headers if h[0].lower() not in (b"content-encoding", b"content-length")
            ]
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=_BoundedBody(response.stream, limit, inflate=encoding != "identity"),
            extensions=response.extensions,
        )

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
        with self._lock:
            for transport in self._by_proxy.values():
                transport.close()

    def _transport(self, proxy: str | None) -> httpx.BaseTransport:
        with self._lock:
            transport = self._by_proxy.get(proxy)
            if transport is None:
                transport = self._by_proxy[proxy] = _DeadlineTransport(proxy)
            return transport


class _BoundedBody(httpx.SyncByteStream):
    """An answer's body, inflated if it is compressed, refused past the bounds' ``max_bytes``
    and when the deadline passes between two pieces."""

    def __init__(self, raw: httpx.SyncByteStream, limit: Bounds, *, inflate: bool) -> None:
        self._raw = raw
        self._limit = limit
        self._inflate = inflate

    def __iter__(self) -> Iterator[bytes]:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if self._inflate else None
        size = 0
        for chunk in self._raw:
            for piece in (chunk,) if inflater is None else _inflated(inflater, chunk):
                size += len(piece)
                if size > self._limit.max_bytes:
                    raise AnswerTooLarge(f"larger than {self._limit.max_bytes:,} bytes")
                yield piece
            if self._limit.left() <= 0:
                raise httpx.ReadTimeout("the deadline passed while the answer was read")

    def close(self) -> None:
        self._raw.close()


def _inflated(inflater: Any, data: bytes) -> Iterable[bytes]:
    """The gzip ``data`` inflated, INFLATE_STEP bytes at most at a time."""
    try:
        while True:
            piece = inflater.decompress(data, INFLATE_STEP)
            if piece:
                yield piece
            data = inflater.unconsumed_tail
            if not data and len(piece) < INFLATE_STEP:
                return
    except zlib.error as exc:
        raise BadAnswer(f"damaged gzip ({exc})") from None


def _nests_deeper(value: Any, levels: int) -> bool:
    """Whether parsed JSON ``value`` nests deeper than ``levels`` (``[]`` is one level), walked
    a level at a time rather than recursively."""
    level = [value]
    for _ in range(levels):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) for item in level)


def _environment_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, unless ``NO_PROXY`` spares its host), as httpx would use it."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport, over connections that give each operation only the time left
    before the deadline of the bounds around it."""

    def __init__(self, proxy: str | None) -> None:
        super().__init__(proxy=proxy)
        # httpx takes no network backend, so the one its pool was built with is wrapped.
        pool = self._pool
        pool._network_backend = _DeadlineBackend(pool._network_backend)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _time_left(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, _time_left(timeout, httpcore.ConnectTimeout), socket_options
        )
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _time_left(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def _time_left(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to the time left before the deadline; ``expired`` once it has passed."""
    limit = _BOUNDS.get()
    if limit is None:
        return timeout
    left = limit.left()
    if left <= 0:
        raise expired("the deadline passed")
    return left if timeout is None else min(timeout, left)
