"""One namespace growing: the write rate per segment of ``store_many`` as the namespace grows,
then search, lookup, open and check at the final size.

``facts(n)`` yields any number of distinct facts of about 12 words (a person, an action, an
object, a project and a date: 17.5 billion combinations, visited in a scattered order), each
with its person as entity. The run stores them with ``store_many`` in batches of 1,000 with
default settings (automatic links and near-duplicate checks on), as a user would, and reports
the rate over each segment (default 100,000 facts), the process's peak RSS and the data's size
on disk; then, in a fresh process, reopens the namespace (timed), times the first search (it
prepares the in-memory inverted lists), hybrid search (query embedding included) and lookup,
measures the process's PSS, compares the vector leg's top 10 with an exact scan, and runs
``check`` (timed). With ``--embedder local`` the facts' vectors are computed once and kept in
bench/out (``scale-local-N.npy``); the queries are embedded by the model.

``--phases B --data DIR --facts N`` times where the time of B more batches goes (embedding,
the write-time checks and their inverted-list probes, the SQL writes, the durable commit, the
vector index write), written onto a store of N facts made by an earlier run (on a copy: it
grows).

    python -m bench.scale [--facts 300000] [--segment 100000] [--embedder hash|local]
                          [--data DIR] [--out FILE]
    python -m bench.scale --phases 40 --data COPY --facts N [--embedder hash|local]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphmem import Memory, Settings
from graphmem import writer as writer_engine
from graphmem.autolink import THRESHOLDS
from graphmem.models import Vectors
from graphmem.storage.sql import store as sql_store
from graphmem.storage.sqlite import database as storage
from graphmem.timewords import MONTHS
from graphmem.vectors import cache as cache_engine
from graphmem.vectors import inverted as inverted_engine
from graphmem.vectors import mirror as mirror_engine
from graphmem.vectors import outbox as sync_engine
from graphmem.vectors.mirror import Mirror

from .common import (
    OUT_DIR,
    CachingEmbedder,
    machine,
    make_embedder,
    markdown_table,
    patched,
    peak_rss_mb,
    percentile,
    process_memory_mb,
    write_json,
)

BATCH: Final = 1_000
QUERIES: Final = 200
#: Facts the measuring process writes once it has searched.
WRITTEN: Final = 10

_FIRST: Final = [
    "Ada",
    "Bruno",
    "Chen",
    "Dana",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivan",
    "Julia",
    "Kenji",
    "Lena",
    "Marco",
    "Nadia",
    "Omar",
    "Petra",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Ugo",
    "Vera",
    "Wen",
    "Xenia",
    "Yusuf",
    "Zoe",
]
_LAST: Final = [
    "Novak",
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Moreau",
    "Silva",
    "Romano",
    "Becker",
    "Haddad",
    "Kowalski",
    "Jensen",
    "Duarte",
    "Ivanova",
    "Mensah",
    "Park",
]
_VERBS: Final = [
    "reviewed",
    "approved",
    "rewrote",
    "scheduled",
    "cancelled",
    "shipped",
    "tested",
    "documented",
    "estimated",
    "migrated",
    "archived",
    "presented",
    "questioned",
    "split",
    "merged",
    "reopened",
    "deployed",
    "benchmarked",
    "drafted",
    "signed off",
    "paused",
    "resumed",
    "audited",
    "priced",
    "ordered",
    "returned",
    "booked",
    "summarised",
    "translated",
    "profiled",
]
_OBJECTS: Final = [
    "the onboarding checklist",
    "the billing export",
    "the search index",
    "the travel budget",
    "the release notes",
    "the vendor contract",
    "the load test",
    "the design review",
    "the data model",
    "the quarterly plan",
    "the incident report",
    "the hiring rubric",
    "the API schema",
    "the backup job",
    "the pricing page",
    "the mobile build",
    "the access policy",
    "the demo script",
    "the support macro",
    "the cost forecast",
    "the team offsite",
    "the style guide",
    "the error budget",
    "the test matrix",
    "the feature flag",
    "the audit log",
    "the cache layer",
    "the retry policy",
    "the sales deck",
    "the partner survey",
    "the roadmap slide",
    "the migration plan",
    "the dashboard",
    "the alert rules",
    "the payroll run",
    "the office move",
    "the laptop order",
    "the customer call",
    "the training plan",
    "the security review",
    "the invoice batch",
    "the webhook spec",
    "the release train",
    "the beta invite",
    "the legal memo",
    "the sprint goal",
    "the shipping label",
    "the warehouse count",
    "the grant report",
    "the press kit",
]
_PROJECTS: Final = [
    "Atlas",
    "Borealis",
    "Cobalt",
    "Delta",
    "Ember",
    "Falcon",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Onyx",
    "Pioneer",
    "Quartz",
    "Raven",
    "Sierra",
    "Tundra",
    "Umbra",
    "Vertex",
    "Willow",
    "Xylo",
    "Yonder",
    "Zenith",
    "Aurora",
    "Beacon",
    "Cascade",
    "Drift",
    "Echo",
    "Fjord",
    "Glacier",
    "Horizon",
    "Indigo",
    "Jade",
    "Keystone",
    "Lattice",
    "Mosaic",
    "Nova",
]
_MONTHS: Final = [m[:3] for m in MONTHS]
_DAYS: Final = 730  # two years of dates
#: A prime larger than any count asked for and coprime with the number of combinations: index i
#: maps to combination (i * _STRIDE) mod total, a bijection, so the first n facts are distinct.
_STRIDE: Final = 1_000_000_007


def combinations() -> int:
    people = len(_FIRST) * len(_LAST)
    return people * len(_VERBS) * len(_OBJECTS) * len(_PROJECTS) * _DAYS


def facts(n: int, start: int = 0) -> Iterator[dict[str, Any]]:
    """Facts ``start`` to ``start + n`` of the sequence: distinct, about 12 words each."""
    total = combinations()
    if start + n > total:
        raise ValueError(f"at most {total} distinct facts")
    for i in range(start, start + n):
        c = (i * _STRIDE) % total
        c, day = divmod(c, _DAYS)
        c, project = divmod(c, len(_PROJECTS))
        c, obj = divmod(c, len(_OBJECTS))
        c, verb = divmod(c, len(_VERBS))
        last, first = divmod(c, len(_FIRST))
        person = f"{_FIRST[first]} {_LAST[last]}"
        date = f"{day % 28 + 1} {_MONTHS[day // 28 % 12]} {2023 + day // 365}"
        yield {
            "text": f"{person} {_VERBS[verb]} {_OBJECTS[obj]} for project "
            f"{_PROJECTS[project]} on {date}.",
            "entity": person,
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--facts", type=int, default=300_000)
    parser.add_argument("--segment", type=int, default=100_000)
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash")
    parser.add_argument("--data", type=Path, default=None, help="keep the store here")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--phases",
        type=int,
        metavar="BATCHES",
        help="only time where each of BATCHES more batches of 1,000 goes, written onto the store"
        " in --data that holds --facts facts (it grows by as many: use a copy)",
    )
    parser.add_argument(
        "--probe-recall",
        action="store_true",
        help="only measure the approximate search's recall@10 against exact search on the"
        " local embedder's vectors of --facts facts (no store)",
    )
    args = parser.parse_args(argv)
    if args.probe_recall:
        print(json.dumps(probe_recall(args.facts)))
        return 0
    if args.phases:
        print(json.dumps(phases(args.data, args.facts, args.phases, args.embedder)))
        return 0
    if args.measure:  # the child of ``run``: open the store in a fresh process and measure it
        print(json.dumps(measure(args.data, args)))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        root = args.data or Path(tmp)
        out = run(root, args)
    out["machine"] = machine()
    print(summary_markdown(out))
    write_json(args.out or OUT_DIR / "scale.json", out)
    return 0


def run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(embedder=args.embedder, data_dir=root)
    out: dict[str, Any] = {"benchmark": "scale", "facts": args.facts, "embedder": args.embedder}
    segments: list[dict[str, Any]] = []
    embedder = precomputed(args.facts) if args.embedder == "local" else None
    with Memory.open(root, settings=settings, embedder=embedder) as mem:
        began = time.perf_counter()
        segment_began, done = began, 0
        rows = facts(args.facts)
        while done < args.facts:
            batch = [next(rows) for _ in range(min(BATCH, args.facts - done))]
            mem.store_many(batch)
            done += len(batch)
            if done % args.segment == 0 or done == args.facts:
                now = time.perf_counter()
                size = done - sum(s["facts"] for s in segments)
                segments.append(
                    {
                        "up_to": done,
                        "facts": size,
                        "seconds": now - segment_began,
                        "facts_per_s": size / (now - segment_began),
                        "peak_rss_mb": peak_rss_mb(),
                    }
                )
                print(f"  {done:>9,} facts: {segments[-1]['facts_per_s']:,.0f} facts/s", flush=True)
                segment_began = now
        out["ingest_seconds"] = time.perf_counter() - began
    out["segments"] = segments
    out["disk_mb"] = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
    child = [sys.executable, "-m", "bench.scale", "--measure", "--data", str(root)]
    child += ["--facts", str(args.facts), "--embedder", args.embedder]
    done_child = subprocess.run(child, capture_output=True, text=True, check=True)
    out.update(json.loads(done_child.stdout.strip().splitlines()[-1]))
    return out


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """In a process of its own (so that its memory is the store's alone): reopen the namespace,
    time searches and lookups, compare the vector leg with exact search, run ``check``."""
    settings = Settings(embedder=args.embedder, data_dir=root)
    out: dict[str, Any] = {}
    began = time.perf_counter()  # once per process, whatever the size: not part of the open
    importlib.import_module("lancedb")
    out["import_lancedb_seconds"] = time.perf_counter() - began
    began = time.perf_counter()
    with Memory.open(root, settings=settings) as mem:
        out["open_seconds"] = time.perf_counter() - began
        rng = random.Random(5)
        sample = list(facts(QUERIES, start=rng.randrange(args.facts - QUERIES)))
        queries = [q["text"][:60] for q in sample]
        began = time.perf_counter()  # the first search after opening prepares the inverted lists
        mem.search(queries[0], limit=10)
        out["first_search_seconds"] = time.perf_counter() - began
        searches = [_timed(lambda q=q: mem.search(q, limit=10)) for q in queries]
        lookups = [_timed(lambda q=q: mem.lookup(q["entity"], limit=10)) for q in sample]
        out["search_ms"] = {"p50": percentile(searches, 50), "p95": percentile(searches, 95)}
        out["lookup_ms"] = {"p50": percentile(lookups, 50), "p95": percentile(lookups, 95)}
        out["pss_mb"] = process_memory_mb(os.getpid())["Pss"]
        out["vector_recall_at_10"] = vector_recall(mem, queries)
        # A process that also writes holds more: the write-time checks' projection (the store
        # grows by these few facts, past --facts at a random place, so a re-run adds others).
        began = time.perf_counter()
        mem.store_many(list(facts(WRITTEN, start=args.facts + rng.randrange(10**6))))
        out["first_write_seconds"] = time.perf_counter() - began
        written = process_memory_mb(os.getpid())
        out["pss_after_write_mb"] = written["Pss"]  # counts the database file's mapped pages
        out["anonymous_after_write_mb"] = written["Anonymous"]  # the process's own memory
        began = time.perf_counter()
        out["check_ok"] = mem.check().ok
        out["check_seconds"] = time.perf_counter() - began
    out["peak_rss_mb"] = peak_rss_mb()
    return out


#: What ``phases`` times: (label, owner of the function, its name). Nested labels (indented)
#: are parts of the one above.
PHASES: Final = (
    ("embed (with the embedding cache's reads)", writer_engine.Writer, "_embed"),
    ("near-duplicate and link checks", writer_engine.Writer, "_similar"),
    ("  stored facts' inverted lists probed", mirror_engine.Mirror, "_probed"),
    ("  training the inverted lists again", inverted_engine.Inverted, "__init__"),
    ("SQL writes of the batch", writer_engine.Writer, "_store_batch"),
    ("  facts, keyword index, supersessions", sql_store.SQLTransaction, "apply"),
    ("  embedding cache", cache_engine.EmbeddingCache, "keep"),
    ("durable commit", storage.Database, "write"),
    ("vector index write", sync_engine.VectorSync, "sync"),
)


def phases(root: Path, start: int, batches: int, embedder_name: str) -> dict[str, Any]:
    """Milliseconds per batch of 1,000 in each part of ``store_many`` (PHASES), over
    ``batches`` batches written onto the store in ``root`` (``start`` facts already in it),
    after one batch that opens and prepares what the first write needs."""
    spent: dict[str, float] = {label: 0.0 for label, _, _ in PHASES}
    settings = Settings(embedder=embedder_name, data_dir=root)
    embedder = precomputed(start + (batches + 1) * BATCH) if embedder_name == "local" else None
    rows = list(facts((batches + 1) * BATCH, start))
    with contextlib.ExitStack() as stack:
        for label, owner, name in PHASES:
            stack.enter_context(patched(owner, name, _timing(owner, name, label, spent)))
        with Memory.open(root, settings=settings, embedder=embedder) as mem:
            mem.store_many(rows[:BATCH])
            for label in spent:
                spent[label] = 0.0
            began = time.perf_counter()
            for b in range(1, batches + 1):
                mem.store_many(rows[b * BATCH : (b + 1) * BATCH])
            total = time.perf_counter() - began
    out: dict[str, Any] = {"facts": start, "batches": batches, "batch_ms": 1000 * total / batches}
    out["phases_ms"] = {label: 1000 * t / batches for label, t in spent.items()}
    return out


def _timing(owner: Any, name: str, label: str, spent: dict[str, float]) -> Any:
    """``owner.name``, adding its wall time to ``spent[label]``; for ``Database.write``, the
    time from the end of the transaction's block to the end of its commit."""
    call = getattr(owner, name)
    if owner is storage.Database and name == "write":

        @contextlib.contextmanager
        def write(self: Any, *, durable: bool = True) -> Iterator[Any]:
            with contextlib.ExitStack() as stack:
                yield stack.enter_context(call(self, durable=durable))
                began = time.perf_counter()
                stack.close()
                spent[label] += time.perf_counter() - began

        return write

    @functools.wraps(call)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - began

    return timed


def vector_recall(mem: Memory, queries: Sequence[str], k: int = 10) -> float:
    """The vector leg's recall@k against an exact scan of every live vector in memory: the share
    of its hits that score at least the exact k-th best (ties count; the hash embedder's
    vectors have many)."""
    index = mem._vectors
    mirror = index._mirror
    if mirror is None:
        return float("nan")
    n = len(mirror)
    found = 0
    for vector in mem.embedder.embed(list(queries)):
        scores = np.where(mirror._live[:n], mirror._matrix[:n] @ vector, -np.inf)
        kth = -np.partition(-scores, k - 1)[k - 1]
        hits = index.nearest(vector, k, live_only=True)
        found += sum(score >= kth - 1e-6 for _, score in hits)
    return found / (k * len(queries))


def probe_recall(n: int, k: int = 10) -> dict[str, Any]:
    """The approximate search (``Mirror.probe``, library defaults) against an exact scan, on
    the local embedder's vectors of the first ``n`` facts; queries are QUERIES other facts'
    texts cut to 60 characters, as in ``measure``. With lists of a fixed size, the probes read
    the same neighbourhood of a query whatever the table's size, so the recall measured at
    100k carries to a million (which this machine cannot embed in a bench run)."""
    embedder = precomputed(n)
    texts = [f["text"] for f in facts(n)]
    vectors = embedder.embed(texts)
    mirror = Mirror(embedder.dimensions)
    mirror.upsert([str(i) for i in range(n)], vectors, [True] * n)
    queries = [q["text"][:60] for q in facts(QUERIES, start=n)]
    found = 0
    took = []
    for query in embedder.inner.embed(queries):
        began = time.perf_counter()
        approximate = {i for i, _ in mirror.probe(query, k, live_only=True)}
        took.append(1000 * (time.perf_counter() - began))
        exact = {str(r) for r in np.argpartition(-(vectors @ query), k - 1)[:k]}
        found += len(approximate & exact)  # (MiniLM's vectors of distinct texts do not tie)
    lists = mirror._lists
    return {
        "facts": n,
        "lists": 0 if lists is None else lists.lists,
        "recall_at_10": found / (k * len(queries)),
        "probe_ms": {"p50": percentile(took[1:], 50), "p95": percentile(took[1:], 95)},
        "link_candidates_found": {
            probes: link_recall(vectors, probes) for probes in (2, 3, mirror_engine.CHECK_PROBES)
        },
    }


def link_recall(vectors: Vectors, probes: int, new: int = 3_000) -> float:
    """The write-time check with ``probes`` inverted lists per new fact: the last ``new`` vectors
    written as a batch onto the others; the share of each one's link candidates (cosine ≥ the
    local embedder's link threshold, the best autolink_max + 2, as an exact scan finds them)
    that the check finds."""
    table, batch = vectors[:-new], vectors[-new:]
    k = Settings().autolink_max + 2
    floor = THRESHOLDS["local"]
    mirror = Mirror(vectors.shape[1])
    mirror.upsert([str(i) for i in range(len(table))], table, [True] * len(table))
    with patched(mirror_engine, "CHECK_PROBES", probes):
        hits = mirror.neighbours_many(batch, k, live_only=True, floor=floor)
    wanted = found = 0
    for scores, found_here in zip(batch @ table.T, hits, strict=True):
        best = [r for r in np.argsort(-scores)[:k] if scores[r] >= floor]
        wanted += len(best)
        found += len({str(r) for r in best} & {i for i, _ in found_here})
    return found / max(wanted, 1)


PRECOMPUTED_CHUNK: Final = 100_000


def precomputed(n: int) -> CachingEmbedder:
    """The local embedder with the vectors of the first ``n`` facts computed once and kept in
    bench/out (MiniLM on two cores would take most of the run): a write of a known fact costs
    a lookup; any other text (the queries) is embedded by the model. The vectors are kept in
    files of PRECOMPUTED_CHUNK facts, so a larger run reuses a smaller one's and an interrupted
    computation resumes (a million facts take about an hour)."""
    embedder = CachingEmbedder(make_embedder("local"))
    texts = [f["text"] for f in facts(n)]
    for start in range(0, n, PRECOMPUTED_CHUNK):
        end = min(start + PRECOMPUTED_CHUNK, n)
        path = OUT_DIR / f"scale-local-{start}-{start + PRECOMPUTED_CHUNK}.npy"
        if not path.exists() and end < start + PRECOMPUTED_CHUNK:  # a smaller last file
            path = OUT_DIR / f"scale-local-{start}-{end}.npy"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            chunk = texts[start:end]
            vectors = np.empty((len(chunk), embedder.dimensions), dtype=np.float32)
            for at in range(0, len(chunk), 10_000):
                vectors[at : at + 10_000] = embedder.inner.embed(chunk[at : at + 10_000])
                print(f"  embedded {start + min(len(chunk), at + 10_000):,} facts", flush=True)
            partial = path.with_suffix(".partial.npy")
            np.save(partial, vectors)
            partial.rename(path)
        vectors = np.load(path)[: n - start]
        embedder.remember(texts[start : start + len(vectors)], vectors)
    return embedder


def _timed(call: Any) -> float:
    began = time.perf_counter()
    call()
    return 1000 * (time.perf_counter() - began)


def summary_markdown(r: dict[str, Any]) -> str:
    rows = [
        [
            f"{s['up_to'] - s['facts']:,}-{s['up_to']:,}",
            f"{s['facts_per_s']:,.0f}",
            f"{s['seconds']:.0f}",
            f"{s['peak_rss_mb']:,.0f}",
        ]
        for s in r["segments"]
    ]
    head = markdown_table(["facts", "facts/s", "seconds", "peak RSS MiB"], rows)
    return (
        f"{head}\n\n{r['facts']:,} facts ({r['embedder']} embedder): {r['disk_mb']:,.0f} MiB on disk;"
        f" reopened in {r['open_seconds']:.1f} s (after {r['import_lancedb_seconds']:.1f} s"
        f" importing LanceDB, once per process), first search {r['first_search_seconds']:.1f} s;"
        f" hybrid search p50 {r['search_ms']['p50']:.1f} / p95 {r['search_ms']['p95']:.1f} ms;"
        f" vector leg recall@10 against exact {r['vector_recall_at_10']:.3f};"
        f" lookup p50 {r['lookup_ms']['p50']:.2f} ms; check"
        f" {'ok' if r['check_ok'] else 'NOT ok'} in {r['check_seconds']:.1f} s; measuring"
        f" process PSS {r['pss_mb']:,.0f} MiB, after its first write"
        f" ({r['first_write_seconds']:.1f} s) {r['pss_after_write_mb']:,.0f} MiB, of which its own"
        f" (anonymous) {r['anonymous_after_write_mb']:,.0f} MiB;"
        f" peak RSS {r['peak_rss_mb']:,.0f} MiB"
    )


if __name__ == "__main__":
    raise SystemExit(main())
