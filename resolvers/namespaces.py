"""The server's registry of open namespaces (``Namespaces``), which the gate admits requests to
and the metrics count."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from graphmem import Memory, Settings
from graphmem.ids import check_namespace
from graphmem.llm import ChatClient
from graphmem.vectors.embedders import Embedder

from .events import Broadcaster

_log = logging.getLogger("graphmem")


def _prepare_vectors(memory: Memory) -> None:
    try:
        memory.prepare_vectors()
    except Exception:  # the first search makes them then, or reports the failure itself
        _log.warning(
            "namespace %r: preparing vector search failed", memory.namespace, exc_info=True
        )


class Namespaces:
    """The namespaces this server has opened, each opened once on first use, sharing one
    embedder and (with the LLM classifier) one chat model; every Memory's changes feed the
    broadcaster."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        clock: Callable[[], float] | None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.llm = ChatClient.from_settings(settings) if settings.classifier == "llm" else None
        self.clock = clock
        self.broadcaster: Broadcaster | None = None
        self._open: dict[str, Memory] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Memory:
        """The open Memory of ``name``, opening it (in this thread) if needed."""
        check_namespace(name)
        with self._lock:
            memory = self._open.get(name)
            if memory is None:
                memory = Memory.open(
                    self.settings.data_dir,
                    namespace=name,
                    embedder=self.embedder,
                    settings=self.settings,
                    clock=self.clock,
                    llm=self.llm,
                )
                if self.broadcaster is not None:
                    self.broadcaster.watch(memory)
                memory.preload_graph()  # in the background: a server's traversals start fast
                threading.Thread(  # and its first search does not wait for the partitions
                    target=_prepare_vectors, args=(memory,), name="graphmem-vectors", daemon=True
                ).start()
                self._open[name] = memory
            return memory

    def if_open(self, name: str) -> Memory | None:
        """The Memory of ``name`` if it is open already (no waiting: the event loop asks)."""
        return self._open.get(name)

    def opened(self) -> dict[str, Memory]:
        with self._lock:
            return dict(self._open)

    def close(self) -> None:
        with self._lock:
            for memory in self._open.values():
                memory.close()
            self._open.clear()
