"""The in-memory approximate tier (faiss's inverted lists inside ``Mirror``) against exact search,
on bench.scale's vectors.

graphmem's tier as the library runs it: ``Mirror.probe`` for search, ``Mirror.neighbours_many``
for the write-time checks, both on faiss's ``IndexIVFPQFastScan`` (4-bit product codes) whose
candidates are re-scored from the float32 rows the in-memory copy keeps; on the vectors of
bench.scale's facts by the local embedder (MiniLM) or the hash embedder (bench.scale's default).
bench/REPORT.md ("Vector search in memory") keeps the head to head in which this tier replaced a
k-means tier of graphmem's own.

For each size: build (training the lists and adding the rows), the bytes the lists hold beside the
float32 copy and the process's RSS growth while building them (telling for a run's first size only:
later ones reuse what the earlier freed); recall@10 against exact search and query time (one query,
one thread) at several probe counts, then at the library's SEARCH_PROBES the query times again;
the share of link candidates found by the check at several probe counts; then writes: BATCHES
batches of 1,000 new vectors, each first checked for its link candidates (cosine >= the
embedder's link threshold, the best autolink_max + 2, in one call: what ``store_many`` asks) then
added, SINGLES single writes (check then add), and the removal of 1,000 rows with the next search
after it, at the library's CHECK_PROBES. Last, the lists outgrown (marked as trained on a third of
the table): batches of 1,000 more rows (the table's own vectors again, under new ids), each checked
then added, until new lists answer: the slowest batch (one that doubles the float32 copy apart),
and the batches and seconds that took.

The local embedder's vectors are bench.scale's (``scale-local-*.npy`` in bench/out, computed once
by ``python -m bench.scale --probe-recall --facts N``, or here when missing: a million take about
three hours on two cores); the hash embedder's are computed here (a million in well under a
minute). Recall counts a hit scoring at least the exact k-th best, and a write-time candidate
scoring at least the exact bar (the link threshold, or the k-th best above it): the hash
embedder's vectors of texts sharing their words tie.

    python -m bench.ann [--facts 100000 300000] [--embedder local|hash] [--out FILE]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from graphmem import Settings
from graphmem.autolink import THRESHOLDS
from graphmem.models import Vectors
from graphmem.vectors import mirror as mirror_engine
from graphmem.vectors.mirror import Mirror

from . import scale
from .common import OUT_DIR, machine, make_embedder, markdown_table, patched, percentile, write_json

#: A tie: scores this close to the exact bar count as reaching it (float32 sums in other orders).
TIE: Final = 1e-6

K: Final = 10
BATCH: Final = 1_000
#: Batches of new vectors written onto each table (checked, then added).
BATCHES: Final = 20
#: Single writes after the batches.
SINGLES: Final = 50
#: Rows removed at once after the writes.
REMOVED: Final = 1_000
SEARCH_PROBES: Final = (16, 32, 48, 64, 80, 96)
CHECK_PROBES: Final = (2, 3, 4, 6, 8)
#: New vectors on which the check's probe counts are swept (the first batches).
SWEPT: Final = 5 * BATCH


class MirrorTier:
    """graphmem's tier: a Mirror holding the rows and their inverted lists; ids are row
    numbers."""

    name = "graphmem: faiss IVF-PQ fast scan, re-scored"

    def __init__(self, dimensions: int) -> None:
        self.mirror = Mirror(dimensions)

    def build(self) -> None:
        self.mirror.prepare(projection=False)

    def search(self, query: Vectors, probes: int = mirror_engine.SEARCH_PROBES) -> list[int]:
        with patched(mirror_engine, "SEARCH_PROBES", probes):
            hits = self.mirror.probe(query, K, live_only=True)
        return [int(i) for i, _ in hits]

    def check(
        self, batch: Vectors, k: int, floor: float, probes: int = mirror_engine.CHECK_PROBES
    ) -> list[set[int]]:
        with patched(mirror_engine, "CHECK_PROBES", probes):
            hits = self.mirror.neighbours_many(batch, k, live_only=True, floor=floor)
        return [{int(i) for i, _ in found} for found in hits]

    def add(self, first: int, vectors: Vectors) -> None:
        ids = [str(i) for i in range(first, first + len(vectors))]
        self.mirror.upsert(ids, vectors, [True] * len(ids))

    def remove(self, ids: npt.NDArray[np.int64]) -> None:
        self.mirror.delete(str(i) for i in ids.tolist())

    def index_bytes(self) -> int:
        lists = self.mirror._lists
        assert lists is not None
        return lists.nbytes()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ann", description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument(
        "--embedder",
        choices=("local", "hash"),
        default="local",
        help="whose vectors of bench.scale's facts (and link threshold)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    embedder = make_embedder(args.embedder)
    queries = embedder.embed([f["text"][:60] for f in scale.facts(scale.QUERIES, start=5_000_000)])
    results = []
    for n in args.facts:
        print(f"== {n:,} {args.embedder} vectors", flush=True)
        results.append(measured(fact_vectors(args.embedder, n), queries, args.embedder))
        print(summary_markdown(results[-1]), flush=True)
    write_json(
        args.out or OUT_DIR / f"ann-{args.embedder}.json",
        {
            "machine": machine(),
            "threads": os.cpu_count(),
            "embedder": args.embedder,
            "sizes": results,
        },
    )
    return 0


def fact_vectors(embedder: str, n: int) -> Vectors:
    """The vectors of bench.scale's first ``n`` facts by ``embedder``."""
    if embedder == "local":
        return local_vectors(n)
    hashing = make_embedder(embedder)
    texts = [f["text"] for f in scale.facts(n)]
    out = np.empty((n, hashing.dimensions), dtype=np.float32)
    for start in range(0, n, scale.PRECOMPUTED_CHUNK):
        out[start : start + scale.PRECOMPUTED_CHUNK] = hashing.embed(
            texts[start : start + scale.PRECOMPUTED_CHUNK]
        )
    return out


def local_vectors(n: int) -> Vectors:
    """The local embedder's vectors of bench.scale's first ``n`` facts, read from its files
    of PRECOMPUTED_CHUNK vectors (computed first where missing)."""
    chunk = scale.PRECOMPUTED_CHUNK
    whole = -(-n // chunk) * chunk
    paths = [OUT_DIR / f"scale-local-{s}-{s + chunk}.npy" for s in range(0, whole, chunk)]
    if not all(p.exists() for p in paths):
        scale.precomputed(whole)
    return np.concatenate([np.load(p) for p in paths])[:n]


def rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measured(vectors: Vectors, queries: Vectors, embedder: str) -> dict[str, Any]:
    """The tier on a table of the ``vectors`` less the BATCHES x BATCH + SINGLES written onto
    it, which bring it to all of them; the link threshold is ``embedder``'s."""
    size = len(vectors)
    n = size - BATCHES * BATCH - SINGLES
    table = vectors[:n]
    floor, k = THRESHOLDS[embedder], Settings().autolink_max + 2
    tier = MirrorTier(vectors.shape[1])
    tier.add(0, table)
    before = rss()
    began = time.perf_counter()
    tier.build()
    out: dict[str, Any] = {
        "facts": size,
        "embedder": embedder,
        "table": n,
        "build_s": time.perf_counter() - began,
        "index_mib": tier.index_bytes() / 2**20,
        "rss_growth_mib": (rss() - before) / 2**20,
    }
    assert tier.mirror._lists is not None
    out["lists"] = tier.mirror._lists.lists
    print(f"  built {out['lists']} lists in {out['build_s']:.1f} s", flush=True)
    exact = [float(-np.partition(-(table @ q), K - 1)[K - 1]) for q in queries]
    out["search_sweep"] = {p: searched(tier, table, queries, exact, p) for p in SEARCH_PROBES}
    times = []
    for q in queries:
        began = time.perf_counter()
        tier.search(q)
        times.append(1000 * (time.perf_counter() - began))
    out["search_probes"] = mirror_engine.SEARCH_PROBES
    out["recall_at_10"] = searched(tier, table, queries, exact, mirror_engine.SEARCH_PROBES)[
        "recall_at_10"
    ]
    out["search_ms"] = {"p50": percentile(times, 50), "p95": percentile(times, 95)}
    # The write-time check's probe counts, on the first SWEPT new vectors checked at once
    # (against the table as built).
    swept = vectors[n : n + SWEPT]
    wanted = link_candidates(table, swept, k, floor)
    out["check_sweep_candidates"] = wanted_total(wanted)
    out["check_sweep"] = {}
    for p in CHECK_PROBES:
        began = time.perf_counter()
        hits = tier.check(swept, k, floor, p)
        out["check_sweep"][p] = {
            "found": found(hits, vectors, swept, wanted) / max(wanted_total(wanted), 1),
            "ms": 1000 * (time.perf_counter() - began),
        }
    out["writes"] = writes(tier, vectors, n, k, floor)
    out["outgrown"] = outgrown(tier, vectors, k, floor)
    return out


#: Batches written at the most while outgrown lists are trained again.
OUTGROWN_BATCHES: Final = 400


def outgrown(tier: MirrorTier, vectors: Vectors, k: int, floor: float) -> dict[str, Any]:
    """Batches checked then added after the lists are marked outgrown, until new lists answer."""
    mirror = tier.mirror
    old = mirror._lists
    assert old is not None
    old.trained_on = len(mirror) // 3
    at = 10 * len(vectors)  # ids no row has
    took: list[float] = []
    grew: list[float] = []
    rng = np.random.default_rng(2)
    began = time.perf_counter()
    while mirror._lists is old and len(took) + len(grew) < OUTGROWN_BATCHES:
        batch = vectors[rng.integers(len(vectors), size=BATCH)]
        capacity = len(mirror._matrix)
        start = time.perf_counter()
        tier.check(batch, k, floor)
        tier.add(at, batch)
        # A batch that doubles the float32 copy (at 2^20 rows: a 1 GB copy, with or without
        # lists in training) is counted apart: it is not the training's cost.
        (took if len(mirror._matrix) == capacity else grew).append(
            1000 * (time.perf_counter() - start)
        )
        at += BATCH
    return {
        "batches": len(took) + len(grew),
        "seconds": time.perf_counter() - began,
        "batch_ms": summary(took),
        "growing_batch_ms": grew,
        "replaced": mirror._lists is not old,
    }


def searched(
    c: MirrorTier, table: Vectors, queries: Vectors, exact: list[float], probes: int
) -> dict[str, float]:
    """Recall@10 at ``probes``: the share of hits scoring at least the exact 10th best
    (``exact``, per query), and the median query time."""
    reached, took = 0, []
    for q, kth in zip(queries, exact, strict=True):
        began = time.perf_counter()
        hits = c.search(q, probes)
        took.append(1000 * (time.perf_counter() - began))
        reached += int(np.count_nonzero(table[hits] @ q >= kth - TIE)) if hits else 0
    return {"recall_at_10": reached / (K * len(queries)), "ms_p50": percentile(took[1:], 50)}


def link_candidates(
    table: Vectors, batch: Vectors, k: int, floor: float
) -> list[tuple[int, float]]:
    """Per vector of ``batch``, how many link candidates an exact scan of ``table`` finds (its
    best ``k`` rows with cosine >= ``floor``) and the bar a row's cosine must reach to be one
    of them: ``floor``, or the k-th best cosine where that is higher (rows tying with it are
    as good a candidate as the one a scan happens to pick)."""
    out: list[tuple[int, float]] = []
    for start in range(0, len(batch), 128):  # 128 x a million scores: half a GB
        scores = batch[start : start + 128] @ table.T
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1]
        above = np.count_nonzero(scores >= floor, axis=1)
        out.extend((min(int(a), k), max(float(t), floor)) for a, t in zip(above, kth, strict=True))
    return out


def wanted_total(wanted: list[tuple[int, float]]) -> int:
    return sum(count for count, _ in wanted)


def found(
    hits: list[set[int]], vectors: Vectors, batch: Vectors, wanted: list[tuple[int, float]]
) -> int:
    """How many of the link candidates ``wanted`` a check's ``hits`` (rows of ``vectors``) hold:
    per vector of ``batch``, its hits reaching the bar, at most as many as the scan found."""
    total = 0
    for h, v, (count, bar) in zip(hits, batch, wanted, strict=True):
        if h and count:
            reached = np.count_nonzero(vectors[sorted(h)] @ v >= bar - TIE)
            total += min(int(reached), count)
    return total


def writes(tier: MirrorTier, vectors: Vectors, n: int, k: int, floor: float) -> dict[str, Any]:
    """Batches then single writes (check, then add), then a removal and the search after it."""
    timed: dict[str, list[float]] = {"batch_check": [], "batch_add": [], "single": []}
    reached = wanted_sum = 0
    at = n
    for _ in range(BATCHES):
        batch = vectors[at : at + BATCH]
        wanted = link_candidates(vectors[:at], batch, k, floor)
        wanted_sum += wanted_total(wanted)
        began = time.perf_counter()
        hits = tier.check(batch, k, floor)
        middle = time.perf_counter()
        tier.add(at, batch)
        timed["batch_check"].append(1000 * (middle - began))
        timed["batch_add"].append(1000 * (time.perf_counter() - middle))
        reached += found(hits, vectors, batch, wanted)
        at += BATCH
    for _ in range(SINGLES):
        one = vectors[at : at + 1]
        began = time.perf_counter()
        tier.check(one, k, floor)
        tier.add(at, one)
        timed["single"].append(1000 * (time.perf_counter() - began))
        at += 1
    gone = np.random.default_rng(1).choice(n, size=REMOVED, replace=False).astype(np.int64)
    began = time.perf_counter()
    tier.remove(gone)
    middle = time.perf_counter()
    returned = tier.search(vectors[gone[0]])
    after = time.perf_counter()
    assert not set(returned) & set(gone.tolist()), "a removed row returned"
    return {
        "check_probes": mirror_engine.CHECK_PROBES,
        "link_candidates_found": reached / max(wanted_sum, 1),
        "batch_check_ms": summary(timed["batch_check"]),
        "batch_add_ms": summary(timed["batch_add"]),
        "single_write_ms": summary(timed["single"]),
        "remove_1000_ms": 1000 * (middle - began),
        "search_after_remove_ms": 1000 * (after - middle),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else math.nan,
    }


def summary_markdown(r: dict[str, Any]) -> str:
    w = r["writes"]
    row = [
        f"{r['search_probes']}",
        f"{r['recall_at_10']:.3f}",
        f"{r['search_ms']['p50']:.2f} / {r['search_ms']['p95']:.2f}",
        f"{r['build_s']:.1f}",
        f"{r['index_mib']:.0f} / {r['rss_growth_mib']:.0f}",
        f"{w['check_probes']}: {w['link_candidates_found']:.3f}",
        f"{w['batch_check_ms']['p50']:.0f} / {w['batch_check_ms']['max']:.0f}",
        f"{w['batch_add_ms']['p50']:.1f} / {w['batch_add_ms']['max']:.0f}",
        f"{w['single_write_ms']['p50']:.2f} / {w['single_write_ms']['p95']:.2f}",
        f"{w['remove_1000_ms']:.0f} + {w['search_after_remove_ms']:.0f}",
    ]
    o = r["outgrown"]
    sweep = ", ".join(
        f"{p}: {v['recall_at_10']:.3f} ({v['ms_p50']:.2f} ms)" for p, v in r["search_sweep"].items()
    )
    checks = ", ".join(f"{p}: {v['found']:.3f}" for p, v in r["check_sweep"].items())
    return (
        f"{r['table']:,} {r['embedder']} vectors growing to {r['facts']:,} ({r['lists']} lists)\n\n"
        + markdown_table(
            [
                "probes",
                "recall@10",
                "search p50 / p95 ms",
                "build s",
                "index / RSS growth MiB",
                "check probes: links found",
                "batch check p50 / max ms",
                "batch add p50 / max ms",
                "single write p50 / p95 ms",
                "remove 1,000 + next search ms",
            ],
            [row],
        )
        + f"\n\nrecall@10 by probes: {sweep}\n\nlink candidates found by check probes: {checks}"
        + f"\n\nlists outgrown: new lists answered after {o['batches']} batches and "
        f"{o['seconds']:.1f} s (replaced: {o['replaced']}); a batch's check and add p50 "
        f"{o['batch_ms']['p50']:.0f} ms, slowest {o['batch_ms']['max']:.0f} ms"
        + "".join(f"; one growing the float32 copy {ms:.0f} ms" for ms in o["growing_batch_ms"])
    )


if __name__ == "__main__":
    raise SystemExit(main())
