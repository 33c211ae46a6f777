"""The peers' side of bench/peers.py: runs one system on one task in the peers virtualenv.

    .venv-peers/bin/python -P bench/peers_worker.py JOB.json

(``-P``: bench/ is not put first on sys.path, where bench/http.py would hide the standard
library's http.)

The job (written by bench/peers.py) names the system (``mem0``, ``lancedb``, ``fts5`` or
``networkx``), the task (``speed``, ``locomo`` or ``graph``), where the data and the precomputed
vectors are, and where to write the result (JSON). This module imports neither graphmem nor the
bench package: the peers virtualenv holds only the peers (bench/peers-requirements.txt). Their
imports stay inside the functions, so graphmem's own virtualenv can lint and type-check it.

What each system does, as its users would run it:

- mem0: ``Memory.from_config`` with its default vector store (Qdrant, local mode on disk), its
  OpenAI embedder pointed at the harness's local ``/v1/embeddings`` endpoint (the same MiniLM
  vectors, served from a cache), its LLM pointed at the same endpoint, which answers chat with
  an error and counts the requests (there must be none); ``add(messages, infer=False)`` with a
  batch of messages per call; ``search(query, top_k=10, filters={"user_id": ...})``.
- lancedb: a table of (idx, text, vector), ``add`` per batch, then ``create_index("text",
  config=FTS())`` (native FTS, its defaults), ``search(query_type="hybrid").vector(v).text(q)``
  with its default reranker (RRF), no vector index (exact scan); each leg alone is timed too.
- fts5: a plain sqlite3 FTS5 table (porter tokenizer), ``WHERE t MATCH ? ORDER BY bm25(t)
  LIMIT 10`` with the query's non-stopword words quoted and OR-ed, no vectors.
- networkx: an undirected ``nx.Graph`` of the links, ``single_source_shortest_path_length(G,
  s, cutoff=2)`` from each start; also that plus the links among the reached nodes.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

BATCH: Final = 1_000
LIMIT: Final = 10
MEM0_USER: Final = "bench"

Job = dict[str, Any]
Result = dict[str, Any]


def main(argv: Sequence[str]) -> int:
    job: Job = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    run = TASKS[(job["system"], job["task"])]
    result = run(job)
    Path(job["out"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


# --------------------------------------------------------------------------------- timing


class Timer:
    """Seconds spent inside wrapped callables, by name (where a system spends its time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def per_call_ms(self, n: int) -> dict[str, float]:
        """Milliseconds per operation (``n`` operations) spent in each wrapped callable."""
        return {name: 1000 * s / n for name, s in self.seconds.items()}


def latency(call: Callable[[int], Any], count: int, warmup: int) -> Result:
    """``call(i)`` for i < warmup untimed, then timed for the rest: p50/p95/mean in ms."""
    for i in range(warmup):
        call(i)
    times = []
    for i in range(warmup, count):
        began = time.perf_counter()
        call(i)
        times.append(1000 * (time.perf_counter() - began))
    return summary(times)


def summary(times: list[float]) -> Result:
    if not times:
        return {"p50_ms": math.nan, "p95_ms": math.nan, "mean_ms": math.nan, "n": 0}
    return {
        "p50_ms": float(np.percentile(times, 50)),
        "p95_ms": float(np.percentile(times, 95)),
        "mean_ms": statistics.fmean(times),
        "n": len(times),
    }


def _texts(path: str) -> list[str]:
    texts: list[str] = json.loads(Path(path).read_text(encoding="utf-8"))
    return texts


def _ingest_result(n: int, write_seconds: float, index_seconds: float) -> Result:
    return {
        "facts": n,
        "write_seconds": write_seconds,
        "index_seconds": index_seconds,
        "facts_per_s": n / (write_seconds + index_seconds),
        "write_facts_per_s": n / write_seconds,
    }


# --------------------------------------------------------------------------------- mem0


class Mem0Store:
    """One mem0 Memory in ``folder`` (its Qdrant collection, history database and user id)."""

    def __init__(self, job: Job, folder: Path, timer: Timer) -> None:
        from mem0 import Memory

        folder.mkdir(parents=True, exist_ok=True)
        url = job["embed_url"]
        config = {
            # Its default vector store, Qdrant in local mode, on disk in this folder.
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "bench",
                    "embedding_model_dims": job["dimensions"],
                    "path": str(folder / "qdrant"),
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": "all-MiniLM-L6-v2",
                    "api_key": "local",
                    "openai_base_url": url,
                    "embedding_dims": job["dimensions"],
                },
            },
            # Never called with infer=False; the endpoint refuses chat and counts the requests.
            "llm": {
                "provider": "openai",
                "config": {"model": "none", "api_key": "local", "openai_base_url": url},
            },
            "history_db_path": str(folder / "history.db"),
        }
        self.memory = Memory.from_config(config)
        self.llm_calls = 0
        generate = self.memory.llm.generate_response

        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.llm_calls += 1
            return generate(*args, **kwargs)

        self.memory.llm.generate_response = refuse
        embedder = self.memory.embedding_model
        embedder.embed = timer.wrap("embed (HTTP to the local endpoint)", embedder.embed)
        embedder.embed_batch = timer.wrap(
            "embed (HTTP to the local endpoint)", embedder.embed_batch
        )
        store = self.memory.vector_store
        store.search = timer.wrap("qdrant search", store.search)
        store.insert = timer.wrap("qdrant insert", store.insert)
        store.keyword_search = timer.wrap("keyword search", store.keyword_search)
        self.memory.db.add_history = timer.wrap("history db", self.memory.db.add_history)
        self.ids: dict[str, int] = {}

    def add(self, texts: Sequence[str], first: int) -> None:
        messages = [{"role": "user", "content": t} for t in texts]
        added = self.memory.add(messages, user_id=MEM0_USER, infer=False)["results"]
        if len(added) != len(texts):
            raise RuntimeError(f"mem0 added {len(added)} of {len(texts)} messages")
        for offset, item in enumerate(added):
            self.ids[item["id"]] = first + offset

    def search(self, query: str) -> list[int]:
        found = self.memory.search(query, top_k=LIMIT, filters={"user_id": MEM0_USER})
        return [self.ids[hit["id"]] for hit in found["results"]]

    def facts(self) -> dict[str, Any]:
        """What mem0 says about its own set-up: the store's class, whether its keyword leg ran."""
        store = self.memory.vector_store
        return {
            "vector_store": f"{type(store).__module__}.{type(store).__name__}",
            "qdrant_local_mode": bool(getattr(store, "is_local", False)),
            "bm25_slot": bool(getattr(store, "_has_bm25_slot", False)),
            "bm25_encoder_available": store._get_bm25_encoder() is not None,
        }

    def close(self) -> None:
        self.memory.close()


def mem0_speed(job: Job) -> Result:
    timer = Timer()
    texts = _texts(job["texts"])
    queries: list[str] = job["queries"]
    store = Mem0Store(job, Path(job["dir"]), timer)
    try:
        began = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            store.add(texts[start : start + BATCH], start)
        write = time.perf_counter() - began
        ingest = _ingest_result(len(texts), write, 0.0)
        ingest["ms_per_fact"] = timer.per_call_ms(len(texts))
        timer.reset()
        search = latency(lambda i: store.search(queries[i]), len(queries), job["warmup"])
        search["ms_per_query"] = timer.per_call_ms(len(queries))
        calls = dict(timer.calls)
        return {
            "ingest": ingest,
            "search": search,
            "calls_during_search": calls,
            "llm_calls": store.llm_calls,
            "setup": store.facts(),
        }
    finally:
        store.close()


def mem0_locomo(job: Job) -> Result:
    timer = Timer()
    rankings: list[list[list[int]]] = []
    llm_calls = 0
    setup: dict[str, Any] = {}
    seconds = 0.0
    questions = 0
    for n, conv in enumerate(job["conversations"]):
        store = Mem0Store(job, Path(job["dir"]) / f"conversation-{n}", timer)
        try:
            texts: list[str] = conv["texts"]
            for start in range(0, len(texts), BATCH):
                store.add(texts[start : start + BATCH], start)
            began = time.perf_counter()
            rankings.append([store.search(q) for q in conv["questions"]])
            seconds += time.perf_counter() - began
            questions += len(conv["questions"])
            llm_calls += store.llm_calls
            setup = store.facts()
        finally:
            store.close()
    return {
        "rankings": rankings,
        "ms_per_query": 1000 * seconds / max(questions, 1),
        "llm_calls": llm_calls,
        "setup": setup,
    }


# --------------------------------------------------------------------------------- lancedb


class LanceTable:
    """A LanceDB table of (idx, text, vector), with LanceDB's own FTS index for hybrid search."""

    def __init__(self, folder: Path, dimensions: int) -> None:
        import lancedb
        import pyarrow as pa

        self.pa = pa
        self.db = lancedb.connect(str(folder))
        self.schema = pa.schema(
            [
                pa.field("idx", pa.int64()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), dimensions)),
            ]
        )
        self.table = self.db.create_table("facts", schema=self.schema)

    def add(self, texts: Sequence[str], vectors: np.ndarray, first: int) -> None:
        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        batch = pa.table(
            {
                "idx": pa.array(range(first, first + len(texts)), pa.int64()),
                "text": pa.array(list(texts), pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
            },
            schema=self.schema,
        )
        self.table.add(batch)

    def index(self) -> None:
        from lancedb.index import FTS

        # Native FTS with its defaults (create_fts_index("text") is deprecated since 0.25 and
        # builds this same config).
        self.table.create_index("text", config=FTS())

    def search(self, query: str, vector: np.ndarray) -> list[int]:
        hits = (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(query)
            .select(["idx", "text"])
            .limit(LIMIT)
            .to_list()
        )
        return [int(h["idx"]) for h in hits]

    def search_vector(self, vector: np.ndarray) -> list[int]:
        hits = self.table.search(vector).select(["idx", "text"]).limit(LIMIT).to_list()
        return [int(h["idx"]) for h in hits]

    def search_fts(self, query: str) -> list[int]:
        hits = (
            self.table.search(query, query_type="fts").select(["idx", "text"]).limit(LIMIT)
        ).to_list()
        return [int(h["idx"]) for h in hits]


def lancedb_speed(job: Job) -> Result:
    texts = _texts(job["texts"])
    vectors = np.load(job["vectors"])
    queries: list[str] = job["queries"]
    query_vectors = np.load(job["query_vectors"])
    table = LanceTable(Path(job["dir"]), vectors.shape[1])
    began = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        table.add(texts[start : start + BATCH], vectors[start : start + BATCH], start)
    write = time.perf_counter() - began
    began = time.perf_counter()
    table.index()
    index = time.perf_counter() - began
    warmup = job["warmup"]
    search = latency(lambda i: table.search(queries[i], query_vectors[i]), len(queries), warmup)
    # Each leg alone, as the hybrid query runs it (where its time goes).
    vector_only = latency(lambda i: table.search_vector(query_vectors[i]), len(queries), warmup)
    fts_only = latency(lambda i: table.search_fts(queries[i]), len(queries), warmup)
    return {
        "ingest": _ingest_result(len(texts), write, index),
        "search": search,
        "search_vector_only": vector_only,
        "search_fts_only": fts_only,
    }


def lancedb_locomo(job: Job) -> Result:
    vectors = np.load(job["vectors"])
    question_vectors = np.load(job["question_vectors"])
    rankings: list[list[list[int]]] = []
    seconds = 0.0
    questions = 0
    at = q_at = 0
    for n, conv in enumerate(job["conversations"]):
        texts: list[str] = conv["texts"]
        table = LanceTable(Path(job["dir"]) / f"conversation-{n}", vectors.shape[1])
        table.add(texts, vectors[at : at + len(texts)], 0)
        table.index()
        at += len(texts)
        asked: list[str] = conv["questions"]
        began = time.perf_counter()
        rankings.append([table.search(q, question_vectors[q_at + i]) for i, q in enumerate(asked)])
        seconds += time.perf_counter() - began
        q_at += len(asked)
        questions += len(asked)
    return {"rankings": rankings, "ms_per_query": 1000 * seconds / max(questions, 1)}


# --------------------------------------------------------------------------------- fts5


class Fts5Table:
    """A plain SQLite FTS5 table (porter tokenizer) ranked by bm25 alone."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)
        self.conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")

    def add(self, texts: Sequence[str], first: int) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT INTO t(rowid, text) VALUES (?, ?)",
                ((first + i + 1, text) for i, text in enumerate(texts)),
            )

    def search(self, match: str) -> list[int]:
        if not match:
            return []
        rows = self.conn.execute(
            "SELECT rowid, text FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (match, LIMIT)
        ).fetchall()
        return [int(rowid) - 1 for rowid, _ in rows]

    def close(self) -> None:
        self.conn.close()


def fts5_speed(job: Job) -> Result:
    texts = _texts(job["texts"])
    matches: list[str] = job["fts_queries"]
    table = Fts5Table(Path(job["dir"]) / "fts5.db")
    try:
        began = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            table.add(texts[start : start + BATCH], start)
        write = time.perf_counter() - began
        search = latency(lambda i: table.search(matches[i]), len(matches), job["warmup"])
        return {"ingest": _ingest_result(len(texts), write, 0.0), "search": search}
    finally:
        table.close()


def fts5_locomo(job: Job) -> Result:
    rankings: list[list[list[int]]] = []
    seconds = 0.0
    questions = 0
    for n, conv in enumerate(job["conversations"]):
        table = Fts5Table(Path(job["dir"]) / f"conversation-{n}.db")
        try:
            table.add(conv["texts"], 0)
            began = time.perf_counter()
            rankings.append([table.search(m) for m in conv["fts_questions"]])
            seconds += time.perf_counter() - began
            questions += len(conv["fts_questions"])
        finally:
            table.close()
    return {"rankings": rankings, "ms_per_query": 1000 * seconds / max(questions, 1)}


# --------------------------------------------------------------------------------- networkx


def networkx_graph(job: Job) -> Result:
    import networkx as nx

    data = json.loads(Path(job["graph"]).read_text(encoding="utf-8"))
    edges: list[list[int]] = data["edges"]
    starts: list[int] = job["starts"]
    began = time.perf_counter()
    graph = nx.Graph()
    graph.add_nodes_from(range(data["nodes"]))
    graph.add_edges_from(edges)
    build = time.perf_counter() - began
    reached: list[list[int]] = []

    def bfs(i: int) -> dict[int, int]:
        ball: dict[int, int] = nx.single_source_shortest_path_length(graph, starts[i], cutoff=2)
        return ball

    def bfs_and_edges(i: int) -> int:
        ball = bfs(i)
        return len(list(graph.subgraph(ball).edges))

    warmup = min(job["warmup"], len(starts))
    for i in range(warmup):
        bfs(i)
    times = []
    for i in range(len(starts)):
        t0 = time.perf_counter()
        ball = bfs(i)
        times.append(1000 * (time.perf_counter() - t0))
        reached.append(sorted(ball))
    with_edges = []
    for i in range(len(starts)):
        t0 = time.perf_counter()
        bfs_and_edges(i)
        with_edges.append(1000 * (time.perf_counter() - t0))
    return {
        "build_seconds": build,
        "graph_nodes": graph.number_of_nodes(),
        "graph_edges": graph.number_of_edges(),
        "bfs": summary(times),
        "bfs_and_edges": summary(with_edges),
        "mean_nodes": statistics.fmean(len(r) for r in reached) if reached else math.nan,
        "reached": reached,
    }


def versions(job: Job) -> Result:
    """The versions of the peers and of what they run on, in this virtualenv."""
    from importlib import metadata

    names = ("mem0ai", "qdrant-client", "lancedb", "pyarrow", "networkx", "numpy", "openai")
    return {
        **{name: metadata.version(name) for name in names},
        "sqlite": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
    }


TASKS: Final[dict[tuple[str, str], Callable[[Job], Result]]] = {
    ("peers", "versions"): versions,
    ("mem0", "speed"): mem0_speed,
    ("mem0", "locomo"): mem0_locomo,
    ("lancedb", "speed"): lancedb_speed,
    ("lancedb", "locomo"): lancedb_locomo,
    ("fts5", "speed"): fts5_speed,
    ("fts5", "locomo"): fts5_locomo,
    ("networkx", "graph"): networkx_graph,
}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
