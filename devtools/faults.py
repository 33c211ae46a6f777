"""A TCP proxy on loopback that makes a server look down or slow without touching it.

The outage tests put ``FaultProxy`` between graphmem and the S3-compatible server
(devtools.cluster.ObjectStore) and switch it between four behaviours:

1. ``passing()``: every byte forwarded both ways (the healthy store);
2. ``down()``: connections refused, and those open reset (a stopped server, a closed port);
3. ``slow(seconds)``: each request forwarded ``seconds`` late (an overloaded store);
4. ``black_hole()``: connections accepted, requests read and never answered (a store that
   hangs, a dropped route): what only a client's own timeouts end.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Final

from .cluster import free_port

#: Bytes read at a time from either side.
CHUNK: Final = 65_536
#: Seconds a held request waits between looks at whether the proxy passes again.
HOLD_POLL: Final = 0.05


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to ``target_host:target_port``, passing, refusing, delaying
    or holding the traffic as told. ``endpoint`` is the URL that reaches the target through it."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._delay: float | None = 0.0  # None: held for ever
        self._changed = threading.Condition()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> FaultProxy:
        """Listen (again, on the same port) and pass every byte."""
        return self.passing()

    def passing(self) -> FaultProxy:
        self._set(0.0)
        if self._listener is None:
            listener = socket.create_server(("127.0.0.1", self.port))
            self._listener = listener
            threading.Thread(
                target=self._accept, args=(listener,), name="fault-proxy", daemon=True
            ).start()
        return self

    def slow(self, seconds: float) -> FaultProxy:
        """Forward each request ``seconds`` after it arrives (answers come as late)."""
        self.passing()
        self._set(seconds)
        return self

    def black_hole(self) -> FaultProxy:
        """Accept connections and read requests, answering none until told otherwise."""
        self.passing()
        self._set(None)
        return self

    def down(self) -> FaultProxy:
        """Refuse new connections and reset the open ones."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):  # wakes the accepting thread (close alone does not)
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._reset_open()
        self._set(0.0)
        return self

    def stop(self) -> None:
        """Stop listening and close every connection."""
        self.down()

    def _set(self, delay: float | None) -> None:
        with self._changed:
            self._delay = delay
            self._changed.notify_all()

    def _reset_open(self) -> None:
        with self._lock:
            sockets, self._open = self._open, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                # A zero linger makes close send a reset, as a dead server's host does.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by down()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, request: bool) -> None:
        try:
            while data := source.recv(CHUNK):
                if request:
                    self._hold()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with self._lock:
                    self._open.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()

    def _hold(self) -> None:
        """Wait as the proxy's behaviour says before forwarding a request's bytes."""
        with self._changed:
            while self._delay is None:
                self._changed.wait(HOLD_POLL)
            delay = self._delay
        if delay:
            with self._changed:  # a switch back to passing ends the wait early
                self._changed.wait_for(lambda: self._delay != delay, timeout=delay)
