"""The in-memory approximate tier against faiss at the same recall@10, on bench.scale's vectors.

graphmem's k-means partitions (``Mirror.probe`` for search, ``Mirror.neighbours_many`` for the
write-time checks) against faiss's inverted lists (``IndexIVFFlat``, and
``IndexIVFScalarQuantizer`` with 8-bit codes whose candidates are re-scored from the float32 rows
the in-memory copy keeps anyway), at the same recall@10 against exact search, on the vectors
of bench.scale's facts by the local embedder (MiniLM) or the hash embedder (bench.scale's default).

For each size: build (the partitions and the write-time projection; faiss's training and adding),
the bytes each index holds beside the float32 copy and the process's RSS growth while building it
(telling for a run's first size only: later ones reuse what the earlier freed); recall@10 and query
time (one query, one thread) at several probe counts; then, at the probe counts matched on recall,
the query times again, then writes: BATCHES batches of 1,000 new vectors, each first checked for its
link candidates (cosine >= the embedder's link threshold, the best autolink_max + 2, in one
call: what ``store_many`` asks) then added, SINGLES single writes (check then add), and the removal
of 1,000 rows with the next search after it. The contenders take turns query by query and batch by
batch in one process, so a busy period of the shared cores slows all of them alike.

The local embedder's vectors are bench.scale's (``scale-local-*.npy`` in bench/out, computed once
by ``python -m bench.scale --probe-recall --facts N``, or here when missing: a million take about
three hours on two cores); the hash embedder's are computed here (a million in well under a
minute). Recall counts a hit scoring at least the exact k-th best, and a write-time candidate
scoring at least the exact bar (the link threshold, or the k-th best above it): the hash
embedder's vectors of texts sharing their words tie. faiss is a bench requirement only:
``make bench-ann`` installs it.

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
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from graphmem import Settings
from graphmem.autolink import THRESHOLDS
from graphmem.models import Vectors
from graphmem.vectors import kernels
from graphmem.vectors import mirror as mirror_engine
from graphmem.vectors import partitions as partitions_engine
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
#: Candidates a quantised index returns per result wanted, re-scored from the float32 rows.
RESCORED: Final = 4
#: Rows per inverted list, as the partitions' PARTITION_ROWS: the same granularity.
LIST_ROWS: Final = partitions_engine.PARTITION_ROWS
#: Vectors faiss's k-means trains on, per list (the partitions' first clustering: 40 per centroid).
TRAIN_PER_LIST: Final = 40
#: OpenMP threads of faiss's bulk calls (the Mirror's bulk checks use as many: SCORING_THREADS).
THREADS: Final = kernels.SCORING_THREADS
#: k-means rounds of faiss's training (faiss's default 25 costs a minute more at 1M).
TRAIN_ROUNDS: Final = 10

SEARCH_PROBES: Final = (32, 40, 48, 56, 64)
FAISS_PROBES: Final = (8, 16, 24, 32, 40, 48, 56, 64, 80)
CHECK_PROBES: Final = (2, 3, 4, 6, 8)
#: New vectors whose link candidates match the contenders' check probes (the first batches).
SWEPT: Final = 5 * BATCH


class Contender(Protocol):
    name: str

    def build(self, table: Vectors) -> None: ...
    def search(self, query: Vectors, probes: int) -> list[int]: ...
    def check(self, batch: Vectors, probes: int, k: int, floor: float) -> list[set[int]]: ...
    def add(self, first: int, vectors: Vectors) -> None: ...
    def remove(self, ids: npt.NDArray[np.int64]) -> None: ...
    def index_bytes(self, n: int) -> int: ...


class PartitionsTier:
    """graphmem's tier: a Mirror holding the rows, its partitions and write-time projection."""

    name = "partitions"

    def __init__(self, dimensions: int) -> None:
        self.mirror = Mirror(dimensions)

    def build(self, table: Vectors) -> None:
        self.mirror._partitions()
        self.mirror._projected(len(self.mirror))  # what a write-time check with a floor bounds

    def search(self, query: Vectors, probes: int) -> list[int]:
        with patched(mirror_engine, "SEARCH_PROBES", probes):
            hits = self.mirror.probe(query, K, live_only=True)
        return [int(i) for i, _ in hits]

    def check(self, batch: Vectors, probes: int, k: int, floor: float) -> list[set[int]]:
        with patched(partitions_engine, "PARTITION_PROBES", probes):
            hits = self.mirror.neighbours_many(batch, k, live_only=True, floor=floor)
        return [{int(i) for i, _ in found} for found in hits]

    def add(self, first: int, vectors: Vectors) -> None:
        ids = [str(i) for i in range(first, first + len(vectors))]
        self.mirror.upsert(ids, vectors, [True] * len(ids))

    def remove(self, ids: npt.NDArray[np.int64]) -> None:
        self.mirror.delete(str(i) for i in ids.tolist())

    def index_bytes(self, n: int) -> int:
        ivf, projection = self.mirror._ivf, self.mirror._projection
        assert ivf is not None
        row = ivf.labels.itemsize
        if projection is not None:  # from PROJECTION_MIN_ROWS
            row += projection.rows.shape[1] * projection.rows.itemsize
        return n * row + ivf.centroids.nbytes + ivf._ranges.nbytes


class FaissTier:
    """faiss's inverted lists over the same rows, ids = row numbers of ``rows`` (the float32
    copy graphmem keeps in memory anyway, read to re-score a quantised index's candidates)."""

    def __init__(self, rows: Vectors, *, quantised: bool) -> None:
        import faiss

        self.faiss = faiss
        self.rows = rows
        self.quantised = quantised
        self.name = "faiss IVF-SQ8 + re-score" if quantised else "faiss IVF-Flat"
        self.index: Any = None

    def build(self, table: Vectors) -> None:
        faiss = self.faiss
        d, n = table.shape[1], len(table)
        lists = max(64, round(n / LIST_ROWS))
        quantiser = faiss.IndexFlatIP(d)
        if self.quantised:
            index = faiss.IndexIVFScalarQuantizer(
                quantiser, d, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        else:
            index = faiss.IndexIVFFlat(quantiser, d, lists, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = TRAIN_ROUNDS
        rng = np.random.default_rng(0)
        sample = table[np.sort(rng.choice(n, size=min(n, TRAIN_PER_LIST * lists), replace=False))]
        index.train(sample)
        index.add_with_ids(table, np.arange(n, dtype=np.int64))
        self.quantiser, self.index = quantiser, index

    def _threads(self, rows: int) -> int:
        """OpenMP threads for a call on ``rows`` vectors: one for a few (waking a second costs
        more than it saves, as the Mirror's own few-query rule finds), else faiss's default."""
        threads = self.faiss.omp_get_max_threads()
        self.faiss.omp_set_num_threads(1 if rows < mirror_engine.QUERY_BLOCK else THREADS)
        return int(threads)

    def _search(self, queries: Vectors, probes: int, k: int) -> tuple[Vectors, Any]:
        self.index.nprobe = probes
        wanted = RESCORED * k if self.quantised else k
        threads = self._threads(len(queries))
        try:
            scores, ids = self.index.search(np.ascontiguousarray(queries, np.float32), wanted)
        finally:
            self.faiss.omp_set_num_threads(threads)
        if self.quantised:  # exact scores of the candidates, from the float32 rows
            safe = np.where(ids >= 0, ids, 0)
            scores = np.einsum("qcd,qd->qc", self.rows[safe], queries)
            scores = np.where(ids >= 0, scores, -np.inf)
        return scores, ids

    def search(self, query: Vectors, probes: int) -> list[int]:
        scores, ids = self._search(query[None], probes, K)
        top = np.argsort(-scores[0], kind="stable")[:K]
        return [int(ids[0, t]) for t in top if ids[0, t] >= 0]

    def check(self, batch: Vectors, probes: int, k: int, floor: float) -> list[set[int]]:
        scores, ids = self._search(batch, probes, k)
        out = []
        for s, i in zip(scores, ids, strict=True):
            top = np.argsort(-s, kind="stable")[:k]
            out.append({int(i[t]) for t in top if i[t] >= 0 and s[t] >= floor})
        return out

    def add(self, first: int, vectors: Vectors) -> None:
        threads = self._threads(len(vectors))
        try:
            self.index.add_with_ids(vectors, np.arange(first, first + len(vectors), dtype=np.int64))
        finally:
            self.faiss.omp_set_num_threads(threads)

    def remove(self, ids: npt.NDArray[np.int64]) -> None:
        self.index.remove_ids(ids.astype(np.int64))

    def index_bytes(self, n: int) -> int:
        invlists = self.index.invlists
        stored = sum(invlists.list_size(c) for c in range(invlists.nlist))
        return int(stored * (invlists.code_size + 8) + self.quantiser.ntotal * self.index.d * 4)


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
        results.append(head_to_head(fact_vectors(args.embedder, n), queries, args.embedder))
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


def head_to_head(vectors: Vectors, queries: Vectors, embedder: str) -> dict[str, Any]:
    """The contenders on a table of the ``vectors`` less the BATCHES x BATCH + SINGLES written
    onto it, which bring it to all of them; the link threshold is ``embedder``'s."""
    size = len(vectors)
    n = size - BATCHES * BATCH - SINGLES
    table = vectors[:n]
    floor, k = THRESHOLDS[embedder], Settings().autolink_max + 2
    partitions = PartitionsTier(vectors.shape[1])
    partitions.add(0, table)
    contenders: list[Contender] = [
        partitions,
        FaissTier(vectors, quantised=True),
        FaissTier(vectors, quantised=False),
    ]
    out: dict[str, Any] = {"facts": size, "embedder": embedder, "table": n, "contenders": {}}
    for c in contenders:
        before = rss()
        began = time.perf_counter()
        c.build(table)
        spent = time.perf_counter() - began
        out["contenders"][c.name] = {
            "build_s": spent,
            "index_mib": c.index_bytes(n) / 2**20,
            "rss_growth_mib": (rss() - before) / 2**20,
        }
        print(f"  built {c.name} in {spent:.1f} s", flush=True)
    ivf = partitions.mirror._ivf
    assert ivf is not None
    out["partitions"] = len(ivf.centroids)
    exact = [float(-np.partition(-(table @ q), K - 1)[K - 1]) for q in queries]

    sweeps: dict[str, dict[int, dict[str, float]]] = {}
    for c in contenders:
        probes = SEARCH_PROBES if c is partitions else FAISS_PROBES
        sweeps[c.name] = {p: searched(c, table, queries, exact, p) for p in probes}
    out["search_sweep"] = sweeps
    matched = {
        partitions.name: mirror_engine.SEARCH_PROBES,
        **{
            c.name: matching(sweeps[c.name], sweeps[partitions.name][mirror_engine.SEARCH_PROBES])
            for c in contenders[1:]
        },
    }
    out["search_probes"] = matched
    times: dict[str, list[float]] = {c.name: [] for c in contenders}
    for turn in range(2):  # each query asked of every contender in turn, in both orders
        for q in queries:
            for c in contenders if turn == 0 else contenders[::-1]:
                began = time.perf_counter()
                c.search(q, matched[c.name])
                times[c.name].append(1000 * (time.perf_counter() - began))
    for c in contenders:
        row = out["contenders"][c.name]
        row["search_probes"] = matched[c.name]
        row["recall_at_10"] = sweeps[c.name][matched[c.name]]["recall_at_10"]
        row["search_ms"] = {
            "p50": percentile(times[c.name], 50),
            "p95": percentile(times[c.name], 95),
        }

    # The write-time check's probe counts, matched on the share of link candidates found among
    # the first SWEPT new vectors, checked at once (against the table as built); where an exact
    # scan finds none (the hash embedder's threshold asks for near-copies), every contender
    # probes as many lists as the partitions.
    swept = vectors[n : n + SWEPT]
    wanted = link_candidates(vectors[:n], swept, k, floor)
    out["check_sweep_candidates"] = wanted_total(wanted)
    check_sweep: dict[str, dict[int, tuple[list[set[int]], float]]] = {
        c.name: {} for c in contenders
    }
    for turn, p in enumerate(CHECK_PROBES):  # in turn, as the writes
        for c in contenders if turn % 2 == 0 else contenders[::-1]:
            check_sweep[c.name][p] = swept_check(c, swept, p, k, floor)
    found_by = {
        name: {
            p: found(hits, vectors, swept, wanted) / max(wanted_total(wanted), 1)
            for p, (hits, _) in sweep.items()
        }
        for name, sweep in check_sweep.items()
    }
    out["check_sweep"] = {
        name: {p: {"found": found_by[name][p], "ms": check_sweep[name][p][1]} for p in CHECK_PROBES}
        for name in check_sweep
    }
    base = found_by[partitions.name][partitions_engine.PARTITION_PROBES]
    checks = {
        c.name: partitions_engine.PARTITION_PROBES
        if c is partitions or not wanted_total(wanted)
        else matching_share(found_by[c.name], base)
        for c in contenders
    }
    out["check_probes"] = checks
    out["writes"] = writes(contenders, vectors, n, checks, matched, k, floor)
    return out


def swept_check(
    c: Contender, vectors: Vectors, probes: int, k: int, floor: float
) -> tuple[list[set[int]], float]:
    """A check of all ``vectors`` at once at ``probes``: its hits and milliseconds."""
    began = time.perf_counter()
    hits = c.check(vectors, probes, k, floor)
    return hits, 1000 * (time.perf_counter() - began)


def searched(
    c: Contender, table: Vectors, queries: Vectors, exact: list[float], probes: int
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


def matching(sweep: dict[int, dict[str, float]], target: dict[str, float]) -> int:
    """The fewest probes whose recall reaches ``target``'s (the most if none does)."""
    for p in sorted(sweep):
        if sweep[p]["recall_at_10"] >= target["recall_at_10"] - 1e-9:
            return p
    return max(sweep)


def matching_share(sweep: dict[int, float], target: float) -> int:
    for p in sorted(sweep):
        if sweep[p] >= target - 1e-9:
            return p
    return max(sweep)


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


def writes(
    contenders: Sequence[Contender],
    vectors: Vectors,
    n: int,
    checks: dict[str, int],
    search_probes: dict[str, int],
    k: int,
    floor: float,
) -> dict[str, Any]:
    """Batches then single writes (check, then add), then a removal and the search after it,
    each contender in turn."""
    timed: dict[str, dict[str, list[float]]] = {
        c.name: {"batch_check": [], "batch_add": [], "single": [], "remove": [], "after_remove": []}
        for c in contenders
    }
    reached = {c.name: 0 for c in contenders}
    wanted_sum = 0
    at = n
    for b in range(BATCHES):
        batch = vectors[at : at + BATCH]
        wanted = link_candidates(vectors[:at], batch, k, floor)
        wanted_sum += wanted_total(wanted)
        for c in contenders if b % 2 == 0 else contenders[::-1]:
            began = time.perf_counter()
            hits = c.check(batch, checks[c.name], k, floor)
            middle = time.perf_counter()
            c.add(at, batch)
            timed[c.name]["batch_check"].append(1000 * (middle - began))
            timed[c.name]["batch_add"].append(1000 * (time.perf_counter() - middle))
            reached[c.name] += found(hits, vectors, batch, wanted)
        at += BATCH
    for s in range(SINGLES):
        one = vectors[at : at + 1]
        for c in contenders if s % 2 == 0 else contenders[::-1]:
            began = time.perf_counter()
            c.check(one, checks[c.name], k, floor)
            c.add(at, one)
            timed[c.name]["single"].append(1000 * (time.perf_counter() - began))
        at += 1
    gone = np.random.default_rng(1).choice(n, size=REMOVED, replace=False).astype(np.int64)
    probe = vectors[gone[0]]
    for c in contenders:
        began = time.perf_counter()
        c.remove(gone)
        middle = time.perf_counter()
        returned = c.search(probe, search_probes[c.name])
        timed[c.name]["remove"].append(1000 * (middle - began))
        timed[c.name]["after_remove"].append(1000 * (time.perf_counter() - middle))
        assert not set(returned) & set(gone.tolist()), f"{c.name} returned a removed row"
    out: dict[str, Any] = {}
    for c in contenders:
        t = timed[c.name]
        out[c.name] = {
            "check_probes": checks[c.name],
            "link_candidates_found": reached[c.name] / max(wanted_sum, 1),
            "batch_check_ms": summary(t["batch_check"]),
            "batch_add_ms": summary(t["batch_add"]),
            "single_write_ms": summary(t["single"]),
            "remove_1000_ms": t["remove"][0],
            "search_after_remove_ms": t["after_remove"][0],
        }
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else math.nan,
    }


def summary_markdown(r: dict[str, Any]) -> str:
    rows = []
    for name, c in r["contenders"].items():
        w = r["writes"][name]
        rows.append(
            [
                name,
                f"{c['search_probes']}",
                f"{c['recall_at_10']:.3f}",
                f"{c['search_ms']['p50']:.2f} / {c['search_ms']['p95']:.2f}",
                f"{c['build_s']:.1f}",
                f"{c['index_mib']:.0f} / {c['rss_growth_mib']:.0f}",
                f"{w['check_probes']}: {w['link_candidates_found']:.3f}",
                f"{w['batch_check_ms']['p50']:.0f} / {w['batch_check_ms']['max']:.0f}",
                f"{w['batch_add_ms']['p50']:.1f} / {w['batch_add_ms']['max']:.0f}",
                f"{w['single_write_ms']['p50']:.2f} / {w['single_write_ms']['p95']:.2f}",
                f"{w['remove_1000_ms']:.0f} + {w['search_after_remove_ms']:.0f}",
            ]
        )
    return (
        f"{r['table']:,} {r['embedder']} vectors growing to {r['facts']:,} ({r['partitions']} partitions)\n\n"
        + markdown_table(
            [
                "",
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
            rows,
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
