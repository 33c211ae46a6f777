"""graphmem against what a user would pick instead, in one run, on the same data and vectors.

The peers live in their own virtualenv, ``.venv-peers`` (bench/peers-requirements.txt, made by
``make bench-peers``), so they never become graphmem dependencies; bench/peers_worker.py runs
them there, one process per system and task. graphmem runs in a child process of its own
virtualenv. The systems:

- graphmem: ``Memory`` with default settings (automatic links and near-duplicate checks on),
  ``store_many`` per batch then ``optimize``; ``search(q, limit=10)`` (hybrid: FTS5 bm25 and
  LanceDB vectors fused, access tracking on, as for any user); ``traverse(s, depth=2)``.
- mem0 OSS with ``infer=False``: its default vector store (Qdrant in local mode, on disk), its
  OpenAI embedder pointed at a local ``/v1/embeddings`` endpoint serving the same MiniLM vectors
  (see bench/peers_worker.py); its LLM is never called (counted, and checked to be 0).
- LanceDB's own hybrid search: FTS index + exact vector scan, fused by its default RRF reranker.
- SQLite FTS5 bm25 alone: porter tokenizer, the query's non-stopword words quoted and OR-ed
  (graphmem.ranking.fts_terms; the LoCoMo reference in ../shared/bench-data/README.md).
- networkx BFS in memory, for traversal only.

Vectors: every text (facts, turns, queries, questions) is embedded once by graphmem's local
embedder (all-MiniLM-L6-v2 int8, ONNX) and kept in bench/out/peers-cache; every system gets
its vectors from that cache, facts and queries alike: graphmem through
``CachingEmbedder.remember`` (a dict lookup behind its embedder interface), mem0 through the
endpoint (an HTTP request per text, answered from the cache: mem0 embeds through HTTP, so
that request is part of its cost), LanceDB given the vectors. So ingest facts/s and search
latency measure the stores, not the model (MiniLM costs ~4 ms a text on 2 cores, for every
system alike).

Data: bench/synthetic.py's facts (those of bench/speed.py) at each size, and its questions
(bench/speed.py's: ``synthetic.queries``, 10 untimed then ``--queries`` timed); LoCoMo per the
recipe (one store per conversation, turns "{speaker}: {text}", query = question, gold = the
evidence turns; bench/locomo.py's parsing and metric), recall_frac@10 overall; the graph of
bench/graph.py (random links of four types, ``--data DIR`` shared with it), traverse at depth 2
BOTH directions from the same random starts as networkx BFS to depth 2 on the same links.

    python -m bench.peers [--sizes 10000 100000] [--queries 200] [--samples N]
                          [--skip mem0|lancedb|fts5|networkx|speed|locomo|graph ...]
                          [--graph-facts 100000] [--graph-links 500000] [--starts 300]
                          [--data DIR] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from graphmem import Memory, Settings
from graphmem.graph import DEFAULT_MAX_NODES, DEFAULT_TYPES
from graphmem.limits import MAX_NODES
from graphmem.models import Vectors
from graphmem.ranking import fts_terms
from graphmem.vectors.embedders import Embedder
from tests.support.openai_stub import LoopbackServer

from . import locomo, synthetic
from .common import (
    OUT_DIR,
    ROOT,
    CachingEmbedder,
    dataset,
    latency,
    machine,
    make_embedder,
    markdown_table,
    ndcg,
    percentile,
    recall_all,
    recall_frac,
    write_json,
)
from .graph import NAMESPACE as GRAPH_NAMESPACE
from .graph import _build as build_graph

SYSTEMS: Final = ("graphmem", "mem0", "lancedb", "fts5", "networkx")
PEERS: Final = ("mem0", "lancedb", "fts5")
PARTS: Final = ("speed", "locomo", "graph")
LABELS: Final = {
    "graphmem": "graphmem (hybrid)",
    "mem0": "mem0 OSS, infer=False (Qdrant local)",
    "lancedb": "LanceDB hybrid (FTS + vector, RRF)",
    "fts5": "SQLite FTS5 bm25 alone",
    "networkx": "networkx BFS (node ids)",
    "networkx+edges": "networkx BFS + links among them",
}
#: graphmem's other traversals in the table, beside its default (in-memory copy, max_nodes 200).
GRAPHMEM_WALKS: Final = {
    "traverse_uncapped": "graphmem traverse, max_nodes 10,000 (whole ball)",
    "traverse_sql": "graphmem traverse, walks in SQL (graph_in_memory = false)",
}
BATCH: Final = 1_000
WARMUP: Final = 10
PEERS_PYTHON: Final = ROOT / ".venv-peers" / "bin" / "python"
WORKER: Final = ROOT / "bench" / "peers_worker.py"
CACHE_DIR: Final = OUT_DIR / "peers-cache"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.child:
        job = json.loads(Path(args.child).read_text(encoding="utf-8"))
        result = CHILD_TASKS[job["task"]](job)
        Path(job["out"]).write_text(json.dumps(result), encoding="utf-8")
        return 0
    peers = [s for s in PEERS if s not in args.skip]
    if (peers or {"networkx", "graph"}.isdisjoint(args.skip)) and not args.peers_python.exists():
        print(f"{args.peers_python} is missing: `make bench-peers` creates .venv-peers")
        return 1
    began = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "peers",
        "config": {
            "sizes": args.sizes,
            "queries": args.queries,
            "warmup": WARMUP,
            "batch": BATCH,
            "locomo_samples": args.samples or "all",
            "graph_facts": args.graph_facts,
            "graph_links": args.graph_links,
            "starts": args.starts,
            "skipped": args.skip,
        },
    }
    cache = VectorCache(make_embedder("local"))
    endpoint = CacheEndpoint(cache)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp, endpoint as url:
        run = Runner(Path(tmp), args, url)
        if peers or {"networkx", "graph"}.isdisjoint(args.skip):
            report["peer_versions"] = run.peer({"system": "peers", "task": "versions"})
        if "speed" not in args.skip:
            report["speed"] = {
                str(size): speed(run, cache, size, args.queries, peers) for size in args.sizes
            }
        if "locomo" not in args.skip:
            report["locomo"] = locomo_recall(run, cache, args.samples, peers)
        if "graph" not in args.skip:
            report["graph"] = traversal(run, args)
        report["endpoint"] = endpoint.stats()
    report["vector_cache"] = {
        "model": cache.model,
        "file": str(cache.vectors_file.relative_to(ROOT)),
        "embedded_this_run": cache.embedded,
        "embed_seconds_this_run": cache.embed_seconds,
    }
    report["seconds"] = time.perf_counter() - began
    report["ratios"] = ratios(report)
    report["notes"] = NOTES
    report["machine"] = machine()
    llm = report["endpoint"]["chat_requests"]
    print(summary_markdown(report))
    print(f"mem0's LLM was asked {llm} times (infer=False: it must be 0)")
    write_json(args.out or OUT_DIR / ("peers-quick.json" if args.quick else "peers.json"), report)
    return 1 if llm else 0


NOTES: Final = [
    "Every text's vector (facts, turns, queries, questions) was computed once by graphmem's "
    "local embedder (all-MiniLM-L6-v2 int8 ONNX) and every system got its vectors from that "
    "cache: ingest facts/s and search latency measure the stores, not the model.",
    "Query vectors come from the same cache for all systems: graphmem through its embedder "
    "interface (a dict lookup), mem0 through one HTTP request per query to the local "
    "OpenAI-compatible endpoint (how mem0 embeds), LanceDB given the vector.",
    "ingest facts/s counts the writes plus the step each system needs before search "
    "(graphmem optimize, LanceDB create_fts_index); writes alone are in write_facts_per_s.",
    "graphmem stores bench/synthetic.py's fact dicts (text, entity, key, value, dates) as "
    "bench/speed.py does, with default settings (automatic links, near-duplicate checks); the "
    "peers store the text (what their search reads).",
    "mem0 as `pip install mem0ai` installs it searches by vectors alone: its BM25 leg needs "
    "fastembed (mem0ai[extras]), whose Qdrant/bm25 model is downloaded at run time, and its "
    "lemmatising and entity boosts need spaCy with en_core_web_sm (mem0ai[nlp], also "
    "downloaded at run time); neither is installed here (model downloads are unreachable), "
    "and mem0 says so in its log; setup in the JSON: bm25_encoder_available false.",
    "LanceDB's hybrid search fetches 10 candidates per leg (the query limit) and fuses them "
    "by RRF; its vector leg is an exact scan (no ANN index built).",
    "FTS5 query: graphmem.ranking.fts_terms (stopwords dropped, words quoted) OR-ed.",
    "Traversal: graphmem traverse(depth=2, BOTH, default types) walks its in-memory copy of "
    "the graph (graph_in_memory, the default), timed once the copy has loaded (load time "
    "reported), as bench/graph.py does; it stops at max_nodes=200 (its default) and returns "
    "the facts and the links among them. The max_nodes=10,000 run reaches the whole depth-2 "
    "ball and is compared node for node with networkx's; the SQL run is graph_in_memory = "
    "false. networkx gets an undirected nx.Graph of the same links, already in memory (its "
    "build time reported apart), and returns node ids (BFS) or also the links among them.",
    "LoCoMo: duplicate turns stand for all their ids (as bench/locomo.py's merged facts do); "
    "graphmem runs with access tracking off so that question order cannot change rankings.",
]


# --------------------------------------------------------------------------------- vectors


class VectorCache:
    """Text → MiniLM vector, kept in bench/out/peers-cache (texts.json beside vectors.npy) and
    grown as new texts come; computed by graphmem's local embedder, in chunks."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model = embedder.model
        self.texts_file = CACHE_DIR / f"{embedder.model}-texts.json"
        self.vectors_file = CACHE_DIR / f"{embedder.model}-vectors.npy"
        self._texts: list[str] = []
        self._vectors: Vectors = np.empty((0, embedder.dimensions), dtype=np.float32)
        if self.texts_file.exists() and self.vectors_file.exists():
            self._texts = json.loads(self.texts_file.read_text(encoding="utf-8"))
            self._vectors = np.load(self.vectors_file)
        self._row = {t: i for i, t in enumerate(self._texts)}
        self.embed_seconds = 0.0
        self.embedded = 0

    @property
    def dimensions(self) -> int:
        return self.embedder.dimensions

    def ensure(self, texts: Sequence[str]) -> None:
        """Embed (and keep) the texts not cached yet."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._row]
        if not todo:
            return
        print(f"embedding {len(todo):,} new texts with {self.model} ...", flush=True)
        began = time.perf_counter()
        chunks = []
        for start in range(0, len(todo), 1_000):
            chunks.append(self.embedder.embed(todo[start : start + 1_000]))
            if (start // 1_000) % 10 == 9:
                print(f"  {start + 1_000:,} of {len(todo):,}", flush=True)
        self.embed_seconds += time.perf_counter() - began
        self.embedded += len(todo)
        self._vectors = np.concatenate([self._vectors, *chunks])
        for text in todo:
            self._row[text] = len(self._texts)
            self._texts.append(text)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        np.save(self.vectors_file, self._vectors)
        self.texts_file.write_text(json.dumps(self._texts), encoding="utf-8")

    def alias(self, texts: Sequence[str]) -> None:
        """The forms in which a system may send a text get the text's vector: stripped (mem0
        trims queries), and with newlines made spaces (mem0's OpenAI embedder does that)."""
        for text in texts:
            for form in _forms(text):
                self._row.setdefault(form, self._row[text])

    def get(self, text: str) -> Vectors | None:
        row = self._row.get(text)
        return None if row is None else self._vectors[row]

    def matrix(self, texts: Sequence[str]) -> Vectors:
        return self._vectors[[self._row[t] for t in texts]]

    def save(self, path: Path, texts: Sequence[str]) -> Path:
        """The vectors of ``texts``, in order, as an .npy file."""
        np.save(path, self.matrix(texts))
        return path


def _forms(text: str) -> set[str]:
    """Other forms of ``text`` that systems embed: stripped (graphmem's fact model strips
    whitespace, mem0 trims queries), newlines made spaces (mem0's OpenAI embedder)."""
    flat = text.replace("\n", " ")
    return {text.strip(), flat, flat.strip()} - {text}


class CacheEndpoint:
    """An OpenAI-compatible ``/v1/embeddings`` on 127.0.0.1 answering the cached MiniLM vectors
    (uvicorn in a thread, as tests/support/openai_stub.py); a text not in the cache is embedded by
    the model and counted. ``/v1/chat/completions`` answers 503 and counts: mem0 with infer=False
    must never ask."""

    def __init__(self, cache: VectorCache) -> None:
        self.cache = cache
        self.requests = 0
        self.texts = 0
        self.missed: list[str] = []
        self.seconds = 0.0
        self.chat_requests = 0
        self._served: LoopbackServer | None = None

    def __enter__(self) -> str:
        app = Starlette(
            routes=[
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )
        self._served = LoopbackServer(app, "peers-embeddings")
        return self._served.url + "/v1"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._served is not None
        self._served.stop()

    async def _embeddings(self, request: Request) -> Response:
        began = time.perf_counter()
        body = await request.json()
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else list(raw)
        self.requests += 1
        self.texts += len(texts)
        data = []
        for index, text in enumerate(texts):
            vector = self.cache.get(text)
            if vector is None:
                self.missed.append(text)
                vector = self.cache.embedder.embed([text])[0]
            data.append({"object": "embedding", "index": index, "embedding": vector.tolist()})
        response = JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", self.cache.model),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )
        self.seconds += time.perf_counter() - began
        return response

    def stats(self) -> dict[str, Any]:
        return {
            "embedding_requests": self.requests,
            "texts": self.texts,
            "texts_not_in_cache": self.missed,
            "chat_requests": self.chat_requests,
            # Inside the handler (reading the body, the look-up, the JSON answer), not HTTP.
            "handler_ms_per_request": 1000 * self.seconds / max(self.requests, 1),
        }

    async def _chat(self, request: Request) -> Response:
        self.chat_requests += 1
        return JSONResponse(
            {"error": {"message": "no LLM in this benchmark", "type": "server_error"}},
            status_code=503,
        )


# --------------------------------------------------------------------------------- children


class Runner:
    """Runs one system on one task in a child process: graphmem in this virtualenv
    (``python -m bench.peers --child``), the peers in .venv-peers (bench/peers_worker.py)."""

    def __init__(self, tmp: Path, args: argparse.Namespace, url: str) -> None:
        self.tmp = tmp
        self.args = args
        self.url = url
        self._count = 0

    def folder(self, name: str) -> Path:
        self._count += 1
        path = self.tmp / f"{self._count:02d}-{name}"
        path.mkdir(parents=True)
        return path

    def graphmem(self, job: dict[str, Any]) -> dict[str, Any]:
        return self._run([sys.executable, "-m", "bench.peers", "--child"], job)

    def peer(self, job: dict[str, Any]) -> dict[str, Any]:
        job = {"embed_url": self.url, **job}
        # -P: bench/ is not put first on sys.path (its http.py would hide the standard one).
        return self._run([str(self.args.peers_python), "-P", str(WORKER)], job)

    def _run(self, command: list[str], job: dict[str, Any]) -> dict[str, Any]:
        work = self.folder(f"{job['system']}-{job['task']}")
        job = {"dir": str(work / "store"), "out": str(work / "result.json"), **job}
        (work / "store").mkdir()
        path = work / "job.json"
        path.write_text(json.dumps(job), encoding="utf-8")
        env = {
            **os.environ,
            "MEM0_TELEMETRY": "False",  # mem0 would report usage over the network
            "MEM0_DIR": str(work / "mem0-home"),
            "LANCEDB_LOG": "error",  # not a deprecation warning per hybrid query
        }
        began = time.perf_counter()
        subprocess.run([*command, str(path)], check=True, cwd=ROOT, env=env)
        result: dict[str, Any] = json.loads(Path(job["out"]).read_text(encoding="utf-8"))
        result["process_seconds"] = time.perf_counter() - began
        return result


# --------------------------------------------------------------------------------- speed


def speed(
    run: Runner, cache: VectorCache, size: int, n_queries: int, peers: Sequence[str]
) -> dict[str, Any]:
    """Ingest and search latency of every system on ``size`` synthetic facts."""
    pairs = synthetic.pairs(size)
    texts = [f["text"] for f in synthetic.facts(pairs)]
    queries = synthetic.queries(pairs, n_queries + WARMUP)
    cache.ensure([*texts, *queries])
    cache.alias([*texts, *queries])
    folder = run.folder(f"data-{size}")
    common = {
        "task": "speed",
        "size": size,
        "texts": str(folder / "texts.json"),
        "vectors": str(cache.save(folder / "vectors.npy", texts)),
        "queries": queries,
        "query_vectors": str(cache.save(folder / "query_vectors.npy", queries)),
        "fts_queries": [" OR ".join(fts_terms(q)) for q in queries],
        "warmup": WARMUP,
        "dimensions": cache.dimensions,
    }
    (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    out: dict[str, Any] = {}
    for system in ("graphmem", *peers):
        print(f"{size:,} facts: {system} ...", flush=True)
        job = {**common, "system": system}
        out[system] = run.graphmem(job) if system == "graphmem" else run.peer(job)
        r = out[system]
        print(
            f"  ingest {r['ingest']['facts_per_s']:,.0f} facts/s, search p50 "
            f"{r['search']['p50_ms']:.1f} ms, p95 {r['search']['p95_ms']:.1f} ms",
            flush=True,
        )
    return out


def child_speed(job: dict[str, Any]) -> dict[str, Any]:
    """graphmem's side of ``speed``: store_many per batch, optimize, then search."""
    texts: list[str] = json.loads(Path(job["texts"]).read_text(encoding="utf-8"))
    facts = list(synthetic.facts(synthetic.pairs(job["size"])))
    if [f["text"] for f in facts] != texts:
        raise RuntimeError("the synthetic facts differ from the texts the peers were given")
    queries: list[str] = job["queries"]
    embedder = _cached_embedder(
        [texts, queries], [np.load(job["vectors"]), np.load(job["query_vectors"])]
    )
    settings = Settings()
    memory = Memory.open(job["dir"], namespace="peers", embedder=embedder, settings=settings)
    try:
        actions: dict[str, int] = defaultdict(int)
        began = time.perf_counter()
        for start in range(0, len(facts), BATCH):
            for r in memory.store_many(facts[start : start + BATCH]):
                actions[r.action] += 1
        write = time.perf_counter() - began
        began = time.perf_counter()
        memory.optimize()
        index = time.perf_counter() - began
        out: dict[str, Any] = {
            "ingest": {
                "facts": len(facts),
                "write_seconds": write,
                "index_seconds": index,
                "facts_per_s": len(facts) / (write + index),
                "write_facts_per_s": len(facts) / write,
                "actions": dict(actions),
            },
            "search": _latency(lambda q: memory.search(q, limit=10), queries),
        }
        memory.settings = settings.model_copy(update={"track_access": False})
        out["search_untracked"] = _latency(lambda q: memory.search(q, limit=10), queries)
        out["search_fts_only"] = _latency(lambda q: memory.search(q, mode="fts"), queries)
        out["search_vector_only"] = _latency(lambda q: memory.search(q, mode="vector"), queries)
        out["live_embedded"] = _live(embedder, [*texts, *queries])
        return out
    finally:
        memory.close()


def _cached_embedder(texts: Sequence[Sequence[str]], vectors: Sequence[Vectors]) -> CachingEmbedder:
    embedder = CachingEmbedder(make_embedder("local"))
    for t, v in zip(texts, vectors, strict=True):
        embedder.remember(t, v)
        # graphmem strips a fact's whitespace before embedding it: that form, the same vector.
        changed = [i for i, text in enumerate(t) if text.strip() != text]
        embedder.remember([t[i].strip() for i in changed], v[changed])
    return embedder


def _live(embedder: CachingEmbedder, texts: Sequence[str]) -> list[str]:
    """The texts graphmem embedded that were not given from the cache (embedded by the model,
    the same one): ideally none."""
    given = set(texts) | {t.strip() for t in texts}
    return sorted(set(embedder._memo) - given)


def _latency(call: Callable[[Any], Any], inputs: Sequence[Any]) -> dict[str, float]:
    """p50/p95/mean in ms after WARMUP untimed calls."""
    return latency(call, inputs, WARMUP)


# --------------------------------------------------------------------------------- locomo


def locomo_recall(
    run: Runner, cache: VectorCache, samples: int, peers: Sequence[str]
) -> dict[str, Any]:
    """recall_frac@10 (and the other bench/locomo.py metrics) per system, overall and per
    category, on the same conversations, questions and gold turns."""
    folder_data = dataset("locomo")
    if folder_data is None:
        return {"skipped": "no LoCoMo data"}
    data = json.loads((folder_data / "locomo10.json").read_text(encoding="utf-8"))
    data = data[:samples] if samples else data
    conversations = [_conversation(sample) for sample in data]
    texts = [t for c in conversations for t in c["texts"]]
    questions = [q["text"] for c in conversations for q in c["questions"]]
    cache.ensure([*texts, *questions])
    cache.alias([*texts, *questions])
    folder = run.folder("data-locomo")
    common = {
        "task": "locomo",
        "samples": samples,
        "texts": str(folder / "texts.json"),
        "vectors": str(cache.save(folder / "vectors.npy", texts)),
        "question_texts": str(folder / "questions.json"),
        "question_vectors": str(cache.save(folder / "question_vectors.npy", questions)),
        "warmup": WARMUP,
        "dimensions": cache.dimensions,
    }
    (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    (folder / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    out: dict[str, Any] = {
        "conversations": len(conversations),
        "turns": len(texts),
        "questions": len(questions),
    }
    print(f"LoCoMo ({len(conversations)} conversations, {len(questions)} questions): graphmem ...")
    out["graphmem"] = run.graphmem({**common, "system": "graphmem"})
    if out["graphmem"]["queries"] != len(questions):
        raise RuntimeError("graphmem evaluated another number of questions than the peers")
    peer_job = {
        **common,
        "conversations": [
            {
                "texts": c["texts"],
                "questions": [q["text"] for q in c["questions"]],
                "fts_questions": [" OR ".join(fts_terms(q["text"])) for q in c["questions"]],
            }
            for c in conversations
        ],
    }
    for system in peers:
        print(f"LoCoMo: {system} ...", flush=True)
        result = run.peer({**peer_job, "system": system})
        rankings = result.pop("rankings")
        out[system] = {**result, "metrics": _metrics(conversations, rankings)}
    for system in ("graphmem", *peers):
        overall = out[system]["metrics"]["overall"]["recall_frac@10"]
        print(f"  {system}: recall_frac@10 {overall:.3f}", flush=True)
    return out


def _conversation(sample: dict[str, Any]) -> dict[str, Any]:
    """The turns and questions of one LoCoMo sample, parsed as bench/locomo.py parses them."""
    conv = sample["conversation"]
    texts: list[str] = []
    dia_ids: list[str] = []
    for session in locomo._sessions(conv):
        for turn in conv[f"session_{session}"]:
            texts.append(f"{turn['speaker']}: {turn['text']}")
            dia_ids.append(turn["dia_id"])
    ids_of_text: dict[str, set[str]] = defaultdict(set)
    for text, dia_id in zip(texts, dia_ids, strict=True):
        ids_of_text[text].add(dia_id)
    questions = []
    for qa in sample["qa"]:
        gold, _, _ = locomo.evidence_ids(qa.get("evidence") or [], set(dia_ids))
        if gold:
            questions.append(
                {"text": qa["question"], "category": int(qa["category"]), "gold": gold}
            )
    return {
        "texts": texts,
        "turns_of": [frozenset(ids_of_text[t]) for t in texts],
        "questions": questions,
    }


def _metrics(
    conversations: Sequence[dict[str, Any]], rankings: Sequence[Sequence[Sequence[int]]]
) -> dict[str, dict[str, float]]:
    """bench/locomo.py's metrics of a peer's rankings (text indices), per category and overall."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for conv, ranked_lists in zip(conversations, rankings, strict=True):
        for q, ranked_idx in zip(conv["questions"], ranked_lists, strict=True):
            ranked = [conv["turns_of"][i] for i in ranked_idx]
            scores = {
                "recall_frac@5": recall_frac(ranked, q["gold"], 5),
                "recall_frac@10": recall_frac(ranked, q["gold"], 10),
                "recall_all@10": recall_all(ranked, q["gold"], 10),
                "ndcg@10": ndcg(ranked, q["gold"], 10),
            }
            for name, value in scores.items():
                values[locomo.CATEGORIES[q["category"]]][name].append(value)
                values["overall"][name].append(value)
    order = [*locomo.CATEGORIES.values(), "overall"]
    return {
        cat: {name: sum(v) / len(v) for name, v in metrics.items()}
        for cat, metrics in sorted(values.items(), key=lambda item: order.index(item[0]))
    }


def child_locomo(job: dict[str, Any]) -> dict[str, Any]:
    """graphmem's side of ``locomo``: bench/locomo.py's build_conversation and evaluate, with
    default settings (access tracking off) and default search (hybrid)."""
    texts: list[str] = json.loads(Path(job["texts"]).read_text(encoding="utf-8"))
    questions: list[str] = json.loads(Path(job["question_texts"]).read_text(encoding="utf-8"))
    embedder = _cached_embedder(
        [texts, questions], [np.load(job["vectors"]), np.load(job["question_vectors"])]
    )
    folder = dataset("locomo")
    assert folder is not None
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    samples = samples[: job["samples"]] if job["samples"] else samples
    settings = Settings(track_access=False)
    began = time.perf_counter()
    conversations = [
        locomo.build_conversation(Path(job["dir"]), s, embedder, settings, context=False)
        for s in samples
    ]
    store_seconds = time.perf_counter() - began
    try:
        result = locomo.evaluate(conversations, "hybrid")
    finally:
        for c in conversations:
            c.memory.close()
    return {
        **result,
        "store_seconds": store_seconds,
        "live_embedded": _live(embedder, [*texts, *questions]),
    }


# --------------------------------------------------------------------------------- graph


def traversal(run: Runner, args: argparse.Namespace) -> dict[str, Any]:
    """graphmem traverse(depth=2) and networkx BFS to depth 2, same links, same starts."""
    print(f"graph ({args.graph_facts:,} facts, {args.graph_links:,} links): graphmem ...")
    job = {
        "system": "graphmem",
        "task": "graph",
        "data": str(args.data) if args.data else None,
        "facts": args.graph_facts,
        "links": args.graph_links,
        "starts": args.starts,
        "warmup": WARMUP,
    }
    ours = run.graphmem(job)
    out: dict[str, Any] = {"graphmem": {k: v for k, v in ours.items() if k != "reached"}}
    if "networkx" in args.skip:
        return out
    print("graph: networkx ...", flush=True)
    theirs = run.peer(
        {
            "system": "networkx",
            "task": "graph",
            "graph": ours["graph_file"],
            "starts": ours["start_indices"],
            "warmup": WARMUP,
        }
    )
    reached = theirs.pop("reached")
    same_uncapped = [
        set(a) == set(b) for a, b in zip(ours["reached"]["uncapped"], reached, strict=True)
    ]
    subset_capped = [
        set(a) <= set(b) for a, b in zip(ours["reached"]["capped"], reached, strict=True)
    ]
    out["networkx"] = theirs
    out["agreement"] = {
        "uncapped_equal_share": sum(same_uncapped) / len(same_uncapped),
        "capped_within_share": sum(subset_capped) / len(subset_capped),
    }
    print(
        f"  graphmem p50 {out['graphmem']['traverse']['p50_ms']:.2f} ms, networkx BFS p50 "
        f"{theirs['bfs']['p50_ms']:.3f} ms; same nodes (uncapped) "
        f"{out['agreement']['uncapped_equal_share']:.0%}",
        flush=True,
    )
    return out


def child_graph(job: dict[str, Any]) -> dict[str, Any]:
    """graphmem's side of ``traversal``: bench/graph.py's store (kept in ``data`` if given),
    its links exported for networkx, then traverse at depth 2 from random starts: on the
    in-memory copy of the graph once it has loaded (the default, timed as bench/graph.py
    does), with max_nodes raised so that the whole depth-2 ball comes back, and in SQL."""
    root = Path(job["data"]) if job["data"] else Path(job["dir"])
    settings = Settings(embedder="hash", autolink=False, track_access=False)
    memory = Memory.open(root, namespace=GRAPH_NAMESPACE, settings=settings)
    try:
        sizes = argparse.Namespace(facts=job["facts"], links=job["links"])
        out: dict[str, Any] = build_graph(memory, sizes, random.Random(11))
        ids = memory.fact_ids()
        index = {fact_id: i for i, fact_id in enumerate(ids)}
        graph_file = Path(job["dir"]) / "graph.json"
        edges = _export_links(memory, index, Path(job["dir"]) / "export.jsonl")
        graph_file.write_text(json.dumps({"nodes": len(ids), "edges": edges}), encoding="utf-8")
        rng = random.Random(12)  # bench/graph.py's starts (ids[0] is its hub)
        starts = [ids[rng.randrange(1, len(ids))] for _ in range(job["starts"])]
        began = time.perf_counter()
        loaded = memory.preload_graph(wait=3600)  # False when graph_in_memory is off
        out["walks"] = "in-memory copy" if loaded else "sql"
        out["copy_load_seconds"] = time.perf_counter() - began if loaded else None
        out["traverse"], capped, truncated = _walks(memory, starts, index, None, job["warmup"])
        out["traverse_uncapped"], uncapped, _ = _walks(
            memory, starts, index, MAX_NODES, job["warmup"]
        )
    finally:
        memory.close()
    if loaded:  # the same walks in SQL, as with graph_in_memory = false
        settings = settings.model_copy(update={"graph_in_memory": False})
        memory = Memory.open(root, namespace=GRAPH_NAMESPACE, settings=settings)
        try:
            out["traverse_sql"], _, _ = _walks(memory, starts, index, None, job["warmup"])
        finally:
            memory.close()
    return {
        **out,
        "facts": len(ids),
        "links": len(edges),
        "mean_nodes": sum(map(len, capped)) / len(capped),
        "mean_nodes_uncapped": sum(map(len, uncapped)) / len(uncapped),
        "max_nodes_share": sum(truncated) / len(truncated),
        "graph_file": str(graph_file),
        "start_indices": [index[s] for s in starts],
        "reached": {"capped": capped, "uncapped": uncapped},
    }


def _export_links(memory: Memory, index: dict[str, int], export: Path) -> list[list[int]]:
    """Every live link a default traversal follows, as (source, target) fact indices, read
    from the namespace's export (Memory.export_jsonl)."""
    with export.open("w", encoding="utf-8") as handle:
        memory.export_jsonl(handle)
    edges = []
    with export.open(encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            if (
                item["kind"] == "link"
                and item["type"] in DEFAULT_TYPES
                and item["retracted_at"] is None
                and item["valid_until"] is None
            ):
                edges.append([index[item["source_id"]], index[item["target_id"]]])
    export.unlink()
    return edges


def _walks(
    memory: Memory, starts: Sequence[str], index: dict[str, int], max_nodes: int | None, warmup: int
) -> tuple[dict[str, float], list[list[int]], list[bool]]:
    """traverse(depth=2) from each start, as bench/graph.py times it (the first ``warmup``
    starts untimed, then every start timed): latency, the facts reached and whether max_nodes
    stopped the walk, per timed start."""
    reached: list[list[int]] = []
    truncated: list[bool] = []
    limit = DEFAULT_MAX_NODES if max_nodes is None else max_nodes

    def walk(start: str) -> None:
        sub = memory.traverse(start, depth=2, max_nodes=limit)
        reached.append([index[n.fact.id] for n in sub.nodes])
        truncated.append("max_nodes" in sub.truncated_by)

    for start in starts[:warmup]:
        walk(start)
    del reached[:], truncated[:]
    times = []
    for start in starts:
        began = time.perf_counter()
        walk(start)
        times.append(1000 * (time.perf_counter() - began))
    latency = {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95), "n": len(times)}
    return latency, reached, truncated


CHILD_TASKS: Final = {"speed": child_speed, "locomo": child_locomo, "graph": child_graph}


# --------------------------------------------------------------------------------- report


def ratios(report: dict[str, Any]) -> dict[str, Any]:
    """graphmem's figure divided by each peer's: ingest (> 1: graphmem faster), search p50
    (< 1: graphmem faster), recall (> 1: graphmem finds more), traverse p50 (< 1: faster)."""
    out: dict[str, Any] = {}
    for size, systems in report.get("speed", {}).items():
        ours = systems["graphmem"]
        for peer, r in systems.items():
            if peer == "graphmem":
                continue
            out.setdefault(peer, {})[f"ingest_{size}"] = (
                ours["ingest"]["facts_per_s"] / r["ingest"]["facts_per_s"]
            )
            out[peer][f"search_p50_{size}"] = ours["search"]["p50_ms"] / r["search"]["p50_ms"]
            out[peer][f"search_p95_{size}"] = ours["search"]["p95_ms"] / r["search"]["p95_ms"]
    lc = report.get("locomo", {})
    if "graphmem" in lc:
        ours_recall = lc["graphmem"]["metrics"]["overall"]["recall_frac@10"]
        for peer in PEERS:
            if peer in lc:
                theirs = lc[peer]["metrics"]["overall"]["recall_frac@10"]
                out.setdefault(peer, {})["locomo_recall_frac@10"] = ours_recall / theirs
    g = report.get("graph", {})
    if "networkx" in g:
        for key, leg in (("networkx", "bfs"), ("networkx+edges", "bfs_and_edges")):
            for walk in ("traverse", *GRAPHMEM_WALKS):
                if walk not in g["graphmem"]:
                    continue
                for q in ("p50", "p95"):
                    out.setdefault(key, {})[f"{walk}_{q}"] = (
                        g["graphmem"][walk][f"{q}_ms"] / g["networkx"][leg][f"{q}_ms"]
                    )
    return out


def targets(report: dict[str, Any]) -> list[str]:
    """The issue's targets, met or missed, from this run's figures."""
    lines = []
    speed_at = report.get("speed", {})
    largest = max(speed_at, key=int, default=None)
    r = report["ratios"]
    for peer in ("mem0", "lancedb"):
        if largest is not None and f"search_p50_{largest}" in r.get(peer, {}):
            x = r[peer][f"search_p50_{largest}"]
            lines.append(
                f"search p50 at {int(largest):,} facts ≤ half of {peer}'s: "
                f"{'met' if x <= 0.5 else 'MISSED'} (graphmem/{peer} = {x:.3g})"
            )
        if "locomo_recall_frac@10" in r.get(peer, {}):
            x = r[peer]["locomo_recall_frac@10"]
            lines.append(
                f"LoCoMo recall_frac@10 above {peer}'s: "
                f"{'met' if x > 1 else 'MISSED'} (graphmem/{peer} = {x:.3g})"
            )
    if "traverse_p50" in r.get("networkx", {}):
        x = r["networkx"]["traverse_p50"]
        lines.append(
            f"depth-2 traverse p50 within 5x of networkx BFS: "
            f"{'met' if x <= 5 else 'MISSED'} (graphmem/networkx = {x:.3g})"
        )
    return lines


def summary_markdown(report: dict[str, Any]) -> str:
    sizes = list(report.get("speed", {}))
    lc = report.get("locomo", {})
    g = report.get("graph", {})
    rows = []
    for system in (*SYSTEMS[:4], "networkx", "networkx+edges"):
        row: list[str] = [LABELS[system]]
        for size in sizes:
            r = report["speed"][size].get(system)
            row.append(f"{r['ingest']['facts_per_s']:,.0f}" if r else "—")
        for size in sizes:
            r = report["speed"][size].get(system)
            row.append(f"{r['search']['p50_ms']:.1f} / {r['search']['p95_ms']:.1f}" if r else "—")
        r = lc.get(system)
        row.append(f"{r['metrics']['overall']['recall_frac@10']:.3f}" if r else "—")
        if system == "graphmem" and "graphmem" in g:
            t = g["graphmem"]["traverse"]
            row.append(f"{t['p50_ms']:.2f} / {t['p95_ms']:.2f}")
            rows.append(row)
            for key, label in GRAPHMEM_WALKS.items():
                if key in g["graphmem"]:
                    t = g["graphmem"][key]
                    cells = ["—"] * (len(row) - 2)
                    rows.append([label, *cells, f"{t['p50_ms']:.2f} / {t['p95_ms']:.2f}"])
            continue
        elif system.startswith("networkx") and "networkx" in g:
            t = g["networkx"]["bfs" if system == "networkx" else "bfs_and_edges"]
            row.append(f"{t['p50_ms']:.3f} / {t['p95_ms']:.3f}")
        else:
            row.append("—")
        if any(cell != "—" for cell in row[1:]):
            rows.append(row)
    headers = [
        "system",
        *(f"ingest facts/s, {int(s):,}" for s in sizes),
        *(f"search p50 / p95 ms, {int(s):,}" for s in sizes),
        "LoCoMo recall_frac@10",
        "traverse depth 2 p50 / p95 ms",
    ]
    table = markdown_table(headers, rows)
    ratio_rows = []
    for peer, values in report["ratios"].items():
        row = [LABELS[peer]]
        row += [_ratio(values.get(f"ingest_{s}")) for s in sizes]
        row += [_ratio(values.get(f"search_p50_{s}")) for s in sizes]
        row += [_ratio(values.get("locomo_recall_frac@10"))]
        row += [_ratio(values.get("traverse_p50"))]
        ratio_rows.append(row)
    ratio_table = markdown_table(
        [
            "graphmem ÷ peer",
            *(f"ingest facts/s, {int(s):,}" for s in sizes),
            *(f"search p50, {int(s):,}" for s in sizes),
            "LoCoMo recall_frac@10",
            "traverse p50",
        ],
        ratio_rows,
    )
    when = report["machine"]["date"]
    head = (
        f"Peers, {when}, {report['seconds'] / 60:.0f} min; vectors: MiniLM (graphmem's local "
        "embedder), computed once and served from a cache to every system, facts and queries "
        "alike (ingest and search measure the stores, not the model)."
    )
    lines = [head, "", table, "", ratio_table, ""]
    lines += [f"- {t}" for t in targets(report)]
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    return f"{value:.3g}"


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200, help="timed searches per system")
    parser.add_argument("--samples", type=int, default=0, help="LoCoMo conversations (0: all)")
    parser.add_argument("--graph-facts", type=int, default=100_000)
    parser.add_argument("--graph-links", type=int, default=500_000)
    parser.add_argument("--starts", type=int, default=300, help="traversal start facts")
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=(*SYSTEMS[1:], *PARTS),
        help="systems or parts to leave out",
    )
    parser.add_argument("--data", type=Path, default=None, help="keep the graph store here")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 2,000 facts, 50 queries, 2 conversations, a 2,000-fact graph",
    )
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.samples = [2_000], 50, args.samples or 2
        args.graph_facts, args.graph_links, args.starts = 2_000, 10_000, 50
    return args


if __name__ == "__main__":
    raise SystemExit(main())
