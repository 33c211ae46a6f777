"""The in-memory mirror of the vector table: exact search, and approximate search and
near-duplicate checks on inverted lists."""

from __future__ import annotations

import logging
import math
import os
import stat
import threading
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt
import pytest

from graphmem import Memory, Settings
from graphmem.errors import StorageError
from graphmem.vectors import index as vectors
from graphmem.vectors import inverted, kernels, projection
from graphmem.vectors import mirror as mirror_engine
from graphmem.vectors.mirror import APPROXIMATE_MIN_ROWS, Mirror


def unit_rows(n: int, dims: int = 32, seed: int = 0) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_exact_search_matches_brute_force_and_respects_live_flags() -> None:
    rows = unit_rows(500)
    mirror = Mirror(32)
    live = [i % 3 != 0 for i in range(500)]
    mirror.upsert([f"f{i}" for i in range(500)], rows, live)
    query = rows[7] + 0.1 * rows[8]
    expected = [f"f{i}" for i in np.argsort(-(rows @ query)) if live[i]][:10]
    assert [i for i, _ in mirror.nearest(query, 10, live_only=True)] == expected
    assert mirror.nearest(query, 1, live_only=False)[0][0] == "f7"


def test_deleting_rows_keeps_the_others_findable() -> None:
    rows = unit_rows(100)
    mirror = Mirror(32)
    mirror.upsert([f"f{i}" for i in range(100)], rows, [True] * 100)
    mirror.delete(["f0", "f50", "missing"])
    assert len(mirror) == 98
    for i in (1, 49, 99):
        assert mirror.nearest(rows[i], 1, live_only=False)[0][0] == f"f{i}"
    assert all(hit[0] not in {"f0", "f50"} for hit in mirror.nearest(rows[0], 98, live_only=False))


def test_approximate_near_duplicate_checks_find_close_copies_in_a_large_table() -> None:
    n = APPROXIMATE_MIN_ROWS + 5_000
    rows = unit_rows(n, seed=1)
    mirror = Mirror(32)
    mirror.upsert([f"f{i}" for i in range(n)], rows, [True] * n)
    picks = np.random.default_rng(2).choice(n, size=200, replace=False)
    noise = unit_rows(200, seed=3) * 0.05
    queries = rows[picks] + noise
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    found = mirror.neighbours_many(queries, 3, live_only=True)
    hits = sum(bool(hit) and hit[0][0] == f"f{i}" for hit, i in zip(found, picks, strict=True))
    assert hits >= 196  # approximate by design, but near-copies are almost always found
    # Rows written after the lists were trained are found too.
    mirror.upsert(["late"], unit_rows(1, seed=4), [True])
    assert mirror.neighbours_many(unit_rows(1, seed=4), 1, live_only=True)[0][0][0] == "late"


@pytest.mark.parametrize("n", [3_000, APPROXIMATE_MIN_ROWS + 2_000])
def test_a_floor_keeps_exactly_the_neighbours_that_reach_it(n: int) -> None:
    """Write-time checks pass the similarity they need: the same best neighbours come back,
    less those below the floor, whether the table is scanned or its inverted lists probed."""
    rows = structured_rows(n, dims=32, factors=6, seed=5)
    mirror = Mirror(32)
    live = [i % 7 != 0 for i in range(n)]
    mirror.upsert([f"f{i}" for i in range(n)], rows, live)
    queries = structured_rows(300, dims=32, factors=6, seed=6)
    queries[:50] = rows[:50] + 0.02 * unit_rows(50, seed=7)  # near-copies, some of dead rows
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    unranked = mirror.neighbours_many(queries, 5, live_only=True)
    for floor in (0.0, 0.6, 0.9, 0.99):  # from "most rows pass" to "a few near-copies pass"
        ranked = mirror.neighbours_many(queries, 5, live_only=True, floor=floor)
        expected = [[(i, s) for i, s in hits if s >= floor] for hits in unranked]
        assert ranked == expected
        assert any(ranked) and (floor < 0.9 or not all(len(hits) == 5 for hits in ranked))
    assert not any(hits and hits[0][0] in {f"f{i}" for i in range(0, 50, 7)} for hits in unranked)


@pytest.mark.parametrize("floor", [-math.inf, 0.6, 0.95])
def test_checks_shared_between_threads_find_what_one_thread_finds(
    monkeypatch: pytest.MonkeyPatch, floor: float
) -> None:
    """A bulk check's blocks of queries are probed and scored by several threads at once, each
    writing its own rows of the results: the neighbours are those one thread finds."""
    n = APPROXIMATE_MIN_ROWS + 2_000
    rows = structured_rows(n, dims=32, factors=6, seed=21)
    mirror = Mirror(32)
    mirror.upsert([f"f{i}" for i in range(n)], rows, [i % 5 != 0 for i in range(n)])
    queries = structured_rows(400, dims=32, factors=6, seed=22)
    queries[:100] = rows[:100] + 0.02 * unit_rows(100, seed=23)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    monkeypatch.setattr(kernels, "SCORING_THREADS", 1)
    alone = mirror.neighbours_many(queries, 5, live_only=True, floor=floor)
    monkeypatch.setattr(kernels, "SCORING_THREADS", 3)
    monkeypatch.setattr(kernels, "SHARED_MIN_ITEMS", 1)
    shared = mirror.neighbours_many(queries, 5, live_only=True, floor=floor)
    assert shared == alone
    assert sum(map(len, alone)) >= 100  # the near-copies at least: the check found something


def test_inverted_lists_keep_finding_rows_after_deletes_rewrites_and_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A delete fills its hole with the last row, a rewrite changes a row's vector, a live flag
    changes alone, and the table outgrows the lists: every row stays findable by its vector,
    no removed one is, and the lists hold exactly the table's rows."""
    monkeypatch.setattr(inverted, "LIST_ROWS", 64)
    n = APPROXIMATE_MIN_ROWS + 1_000
    rows = structured_rows(n + 50_000, dims=32, factors=8, seed=11)
    mirror = Mirror(32)
    mirror.upsert([f"f{i}" for i in range(n)], rows[:n], [True] * n)

    def finds(ids: list[int], vectors: npt.NDArray[np.float32], *, live_only: bool = True) -> int:
        hits = mirror.neighbours_many(vectors, 1, live_only=live_only, floor=0.99)
        return sum(bool(h) and h[0][0] == f"f{i}" for h, i in zip(hits, ids, strict=True))

    def held() -> int:
        assert mirror._lists is not None
        return int(mirror._lists._index.ntotal)

    picks = list(range(0, n, 97))
    assert finds(picks, rows[picks]) == len(picks)
    trained = mirror._lists
    assert trained is not None and held() == n
    mirror.delete([f"f{i}" for i in picks[:20]])  # holes filled with the last rows
    swapped = list(range(n - 20, n))
    assert finds(swapped, rows[swapped]) == 20
    assert not any(mirror.neighbours_many(rows[picks[:20]], 1, live_only=True, floor=0.99))
    mirror.upsert([f"f{picks[20]}"], rows[-1][None, :], [True])  # a rewritten vector
    assert finds([picks[20]], rows[-1][None, :]) == 1
    assert finds([picks[20]], rows[picks[20]][None, :]) == 0
    mirror.upsert([f"f{picks[21]}"], rows[picks[21]][None, :], [False])  # superseded
    assert finds([picks[21]], rows[picks[21]][None, :]) == 0
    assert finds([picks[21]], rows[picks[21]][None, :], live_only=False) == 1
    assert held() == len(mirror) == n - 20
    late = list(range(n, n + 48_000))  # past RETRAIN_GROWTH x the rows trained on
    mirror.upsert([f"f{i}" for i in late], rows[n : n + 48_000], [True] * 48_000)
    assert finds(late[::500], rows[late[::500]]) == 96  # the old lists, while new ones train
    assert mirror.retrained(timeout=120)
    assert finds(swapped, rows[swapped]) == 20
    retrained = mirror._lists
    assert retrained is not None and retrained is not trained
    assert retrained.trained_on == len(mirror) == held()


class Gated:
    """Stands in for ``Inverted`` in the mirror: trains only once ``opened`` is set (or fails
    with ``failure``), so a test can change the table while new lists are in training."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.opened = threading.Event()
        self.failure = failure

    def __call__(self, matrix: npt.NDArray[np.float32], n: int) -> inverted.Inverted:
        assert self.opened.wait(600), "the test never let the training go on"
        if self.failure is not None:
            raise self.failure
        return inverted.Inverted(matrix, n)


def outgrowing(
    monkeypatch: pytest.MonkeyPatch, rows: npt.NDArray[np.float32], gate: Gated
) -> tuple[Mirror, inverted.Inverted]:
    """A mirror whose lists were trained on its first APPROXIMATE_MIN_ROWS ``rows``, then
    written twice as many and one more (outgrown), new lists trained by ``gate``; and the
    old lists."""
    monkeypatch.setattr(inverted, "LIST_ROWS", 64)
    n = APPROXIMATE_MIN_ROWS
    mirror = Mirror(rows.shape[1])
    mirror.upsert([f"f{i}" for i in range(n)], rows[:n], [True] * n)
    assert mirror.neighbours_many(rows[:1], 1, live_only=True)  # lists trained on n rows
    old = mirror._lists
    assert old is not None
    monkeypatch.setattr(mirror_engine, "Inverted", gate)
    mirror.upsert([f"f{i}" for i in range(n, 2 * n + 1)], rows[n : 2 * n + 1], [True] * (n + 1))
    return mirror, old


def test_outgrown_lists_answer_while_new_ones_train_and_the_new_ones_learn_what_changed_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No check or search waits for the lists to be trained again: the old lists answer,
    with every write made meanwhile; the new lists take over with those writes too (rows
    added, rewritten, deleted and moved into the holes) and nothing else."""
    n = APPROXIMATE_MIN_ROWS
    rows = structured_rows(3 * n + 2_000, seed=5)
    gate = Gated()
    mirror, old = outgrowing(monkeypatch, rows, gate)

    def finds(ids: list[int], vectors: npt.NDArray[np.float32]) -> int:
        """How many of ``ids`` a search by their vectors finds first."""
        hits = [mirror.probe(v, 1, live_only=True)[0] for v in vectors]
        return sum(
            found == f"f{i}" and score == pytest.approx(1.0)
            for (found, score), i in zip(hits, ids, strict=True)
        )

    assert finds([2 * n], rows[2 * n][None, :]) == 1  # outgrown: new lists start training
    assert mirror._training is not None and mirror._lists is old
    gone = list(range(0, 2 * n, 401))
    mirror.delete([f"f{i}" for i in gone])  # holes filled with the last rows
    rewritten = 5
    mirror.upsert([f"f{rewritten}"], rows[-1][None, :], [True])
    added = list(range(2 * n + 1, 3 * n))
    mirror.upsert([f"f{i}" for i in added], rows[2 * n + 1 : 3 * n], [True] * len(added))
    picks = [i for i in range(0, 3 * n, 173) if i not in gone and i != rewritten]
    assert placed(old) == nearest_lists(old, mirror)  # the old lists, with every write
    assert finds(picks, rows[picks]) == len(picks)
    assert mirror.neighbours_many(rows[added[7]][None, :], 1, live_only=True)[0][0][0] == (
        f"f{added[7]}"
    )
    assert mirror._lists is old and not mirror.retrained(timeout=0)

    gate.opened.set()
    assert mirror.retrained(timeout=120)
    new = mirror._lists
    assert new is not None and new is not old and new.trained_on == 2 * n + 1
    assert placed(new) == nearest_lists(new, mirror)  # each row once, by its vector now
    assert len(placed(new)) == len(mirror) == 3 * n - len(gone)
    assert finds(picks, rows[picks]) == len(picks)
    assert finds([rewritten], rows[-1][None, :]) == 1
    assert finds([rewritten], rows[rewritten][None, :]) == 0


def placed(lists: inverted.Inverted) -> dict[int, int]:
    """Each row the lists hold, and the list it is in (a row held twice fails)."""
    invlists = faiss.extract_index_ivf(lists._index).invlists
    assert invlists is not None
    out: dict[int, int] = {}
    for number in range(invlists.nlist):
        size = invlists.list_size(number)
        for row in faiss.rev_swig_ptr(invlists.get_ids(number), size).tolist():
            assert row not in out, f"row {row} held twice"
            out[row] = number
    return out


def nearest_lists(lists: inverted.Inverted, mirror: Mirror) -> dict[int, int]:
    """Each row of ``mirror``, and the list whose centroid is nearest the vector it holds."""
    _, nearest = lists._quantiser.search(mirror._matrix[: len(mirror)], 1)
    return dict(enumerate(nearest[:, 0].tolist()))


def test_lists_that_fail_to_train_again_leave_the_old_ones_answering(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A training that fails (out of memory, say) is logged once; the old lists go on answering
    every row, and are not trained again until the table doubles once more."""
    n = APPROXIMATE_MIN_ROWS
    rows = structured_rows(2 * n + 1, dims=32, factors=8, seed=6)
    gate = Gated(MemoryError("no room for the lists"))
    mirror, old = outgrowing(monkeypatch, rows, gate)
    mirror.neighbours_many(rows[:1], 1, live_only=True)
    gate.opened.set()
    with caplog.at_level(logging.WARNING, logger="graphmem"):
        assert mirror.retrained(timeout=60)
    assert mirror._lists is old and "no room for the lists" in caplog.text
    hits = mirror.neighbours_many(rows[n::97], 1, live_only=True, floor=0.99)
    assert [h[0][0] for h in hits] == [f"f{i}" for i in range(n, 2 * n + 1, 97)]
    assert mirror._training is None  # not trained again at once


def test_rows_written_after_a_removal_are_found_by_their_vectors() -> None:
    """A removal shortens lists; rows added to them later are found by their own vectors, as
    the rows written before it are (faiss left the removed rows' codes past a list's end, and
    added codes were mixed into them: most new rows were found by no check)."""
    n = APPROXIMATE_MIN_ROWS + 10_000
    rows = structured_rows(n + 1_000, seed=8)
    mirror = Mirror(128)
    mirror.upsert([f"f{i}" for i in range(n)], rows[:n], [True] * n)
    assert mirror.neighbours_many(rows[:1], 1, live_only=True)  # the lists, trained
    mirror.delete([f"f{i}" for i in range(0, n, 7)])
    late = list(range(n, n + 1_000))
    mirror.upsert([f"f{i}" for i in late], rows[n:], [True] * 1_000)
    kept = [i for i in range(1, n, 61) if i % 7]
    for ids in (late, kept):
        hits = mirror.neighbours_many(rows[ids], 1, live_only=True, floor=0.99)
        assert [h[0][0] if h else None for h in hits] == [f"f{i}" for i in ids]


def test_probed_search_scores_exactly_and_finds_most_of_the_exact_neighbours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inverted, "LIST_ROWS", 128)
    monkeypatch.setattr(mirror_engine, "SEARCH_PROBES", 40)
    mirror = Mirror(128)
    assert _recall_against_exact(mirror, mirror.probe, APPROXIMATE_MIN_ROWS + 5_000, 5, 12) >= 0.9
    assert mirror._lists is not None and mirror._lists.lists > 3 * 40  # a fraction is read


def _recall_against_exact(mirror: Mirror, search: Any, n: int, dead_every: int, seed: int) -> float:
    """Fill ``mirror`` with ``n`` rows (every ``dead_every``-th not live), ask ``search`` for
    the best 10 of 50 queries; checks that scores are exact and only live rows come back, and
    returns the share of the exact best 10 found."""
    rows = structured_rows(n + 50, seed=seed)
    table, queries = rows[:n], rows[n:]
    live = np.arange(n) % dead_every != 0
    mirror.upsert([f"f{i}" for i in range(n)], table, live.tolist())
    found = 0
    for query in queries:
        hits = search(query, 10, live_only=True)
        exact = table @ query
        expected = {f"f{i}" for i in np.argsort(-np.where(live, exact, -np.inf))[:10]}
        found += len({h for h, _ in hits} & expected)
        for fact_id, score in hits:  # scores are exact, and only live rows come back
            assert score == pytest.approx(float(exact[int(fact_id[1:])]), abs=1e-5)
            assert live[int(fact_id[1:])]
    return found / (10 * len(queries))


def structured_rows(
    n: int, dims: int = 128, factors: int = 24, seed: int = 0
) -> npt.NDArray[np.float32]:
    """Unit vectors mostly in a low-dimensional subspace, as text embeddings are."""
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((factors, dims))
    rows = rng.standard_normal((n, factors)) @ mixing + 0.3 * rng.standard_normal((n, dims))
    rows = rows.astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_projected_search_on_a_large_table_agrees_with_brute_force(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mirror_engine, "PROJECTION_MIN_ROWS", 2_000)
    monkeypatch.setattr(projection, "PROJECTED_DIMENSIONS", 32)
    mirror = Mirror(128)
    assert _recall_against_exact(mirror, mirror.nearest, 6_000, 4, 0) >= 0.98
    assert mirror._projection is not None  # the projected path ran


def test_projected_search_sees_rows_written_and_deleted_after_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mirror_engine, "PROJECTION_MIN_ROWS", 2_000)
    monkeypatch.setattr(projection, "PROJECTED_DIMENSIONS", 32)
    rows = structured_rows(3_002, seed=5)
    mirror = Mirror(128)
    mirror.upsert([f"f{i}" for i in range(3_000)], rows[:3_000], [True] * 3_000)
    target = rows[3_000]
    best = mirror.nearest(target, 3, live_only=True)
    mirror.upsert(["late"], target[None, :], [True])
    assert mirror.nearest(target, 1, live_only=True)[0][0] == "late"
    mirror.delete(["late", best[0][0]])
    after = [h for h, _ in mirror.nearest(target, 2, live_only=True)]
    assert after == [h for h, _ in best[1:3]]
    # asking for most of the table falls back to one exact pass over every row
    assert len(mirror.nearest(target, 2_000, live_only=False)) == 2_000


def test_past_the_exact_search_size_searches_and_writes_keep_to_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "EXACT_SEARCH_MAX_ROWS", 3)
    with Memory.open(tmp_path, embedder="hash") as mem:
        for text in ("Oslo office opens at eight", "Lima office opens at nine", "Pune office"):
            mem.store(text)
        first = mem.store("The build server is ci-01").fact
        assert first is not None
        report = mem.optimize()  # 4 rows: approximate searches of the in-memory copy
        assert not report["exact_in_memory"] and report["approximate_in_memory"]
        # The write-time near-duplicate check still finds the twin in memory (no LanceDB search,
        # which without an index scans the whole table): one vector for both.
        table = mem._vectors._table
        searches: list[object] = []
        search = table.search

        def counted(*args: object, **kwargs: object) -> object:
            searches.append(args)
            return search(*args, **kwargs)

        monkeypatch.setattr(table, "search", counted)
        twin = mem.store("The build server is CI 01!").fact
        assert twin is not None and mem.stats().vectors == 4 and searches == []
        found = [h.fact.id for h in mem.search("build server", mode="vector", limit=2)]
        assert set(found) == {first.id, twin.id} and searches == []
        assert mem.check().ok


def test_a_larger_table_is_compacted_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LanceDB's compaction rewrites the table's large fragment with the small ones: it runs
    every COMPACT_EVERY writes on a small table, every rows / COMPACT_ROWS_PER_WRITE writes on
    a larger one, at most every COMPACT_EVERY_MAX, and it leaves one fragment behind."""
    monkeypatch.setattr(vectors, "COMPACT_EVERY", 3)
    monkeypatch.setattr(vectors, "COMPACT_ROWS_PER_WRITE", 10)
    monkeypatch.setattr(vectors, "COMPACT_EVERY_MAX", 8)
    index = vectors.VectorIndex(tmp_path / "vectors", 8)
    compactions: list[int] = []  # the table's rows at each compaction
    compact = index.compact

    def counted(**kwargs: Any) -> None:
        compactions.append(len(index._mirror or ()))
        compact(**kwargs)

    monkeypatch.setattr(index, "compact", counted)
    rows = unit_rows(200, dims=8, seed=41)
    for n in range(40):  # 5 rows a write
        index.upsert(
            [f"f{i}" for i in range(5 * n, 5 * n + 5)], rows[5 * n : 5 * n + 5], [True] * 5
        )
    # due after 3 writes up to 39 rows, 5 at 50, at most 8 (from 80 rows)
    assert compactions == [15, 30, 55, 95, 135, 175]
    # one fragment from the last compaction, and one per write since
    assert index._table.stats()["fragment_stats"]["num_fragments"] == 1 + 5
    assert len(index.nearest(rows[0], 200, live_only=False)) == 200


def test_native_library_output_goes_to_the_log_and_other_output_stays_on_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="graphmem")
    with vectors.native_output_logged():
        for n in range(3):  # as the Rust logger writes: straight to file descriptor 2
            os.write(2, f"[2026 WARN lance_index::kmeans] KMeans: {n} clusters empty\n".encode())
        os.write(2, b"a line of someone else\n")
    err = capfd.readouterr().err
    assert "KMeans" not in err and "a line of someone else" in err
    logged = [r.getMessage() for r in caplog.records]
    assert sum("KMeans" in m for m in logged) == 3
    assert any("printed 3 lines" in m for m in logged)


def test_loading_in_batches_keeps_one_row_per_fact_the_last_read() -> None:
    """The table can hold a fact twice (a process killed between its table write and its log
    entry while another wrote the same fact: `check` reports it); the copy keeps the last."""
    import pyarrow as pa

    rows = unit_rows(3_000)

    def batch(ids: list[str], vectors: npt.NDArray[np.float32]) -> pa.RecordBatch:
        flat = pa.array(vectors.ravel(), type=pa.float32())
        return pa.record_batch(
            [
                pa.array(ids),
                pa.FixedSizeListArray.from_arrays(flat, 32),
                pa.array([True] * len(ids)),
            ],
            names=["id", "vector", "live"],
        )

    first = batch([f"f{i}" for i in range(2_000)], rows[:2_000])
    second = batch(["f5", *(f"f{i}" for i in range(2_000, 2_999))], rows[2_000:3_000])
    mirror = Mirror(32)
    mirror.load([first, second], 2_000)  # more rows than announced: the copy grows
    assert len(mirror) == 2_999
    assert mirror.nearest(rows[2_000], 1, live_only=True)[0][0] == "f5"
    assert mirror.nearest(rows[5], 1, live_only=True)[0][0] != "f5"
    assert mirror.nearest(rows[2_999], 1, live_only=True)[0][0] == "f2998"


def test_the_first_writes_after_loading_do_not_copy_the_loaded_rows() -> None:
    """A loaded copy has room for a quarter more rows (untouched, so not resident, until
    written): writes after opening a large namespace do not copy it all to grow it."""
    import pyarrow as pa

    rows = unit_rows(4_000)
    flat = pa.array(rows[:2_000].ravel(), type=pa.float32())
    loaded = pa.record_batch(
        [
            pa.array([f"f{i}" for i in range(2_000)]),
            pa.FixedSizeListArray.from_arrays(flat, 32),
            pa.array([True] * 2_000),
        ],
        names=["id", "vector", "live"],
    )
    mirror = Mirror(32)
    mirror.load([loaded], 2_000)
    matrix = mirror._matrix
    mirror.upsert([f"f{i}" for i in range(2_000, 2_500)], rows[2_000:2_500], [True] * 500)
    assert mirror._matrix is matrix  # written in place
    assert mirror.nearest(rows[2_400], 1, live_only=True)[0][0] == "f2400"
    mirror.upsert([f"f{i}" for i in range(2_500, 4_000)], rows[2_500:], [True] * 1_500)
    assert mirror._matrix is not matrix and len(mirror) == 4_000  # then it grows
    assert mirror.nearest(rows[10], 1, live_only=True)[0][0] == "f10"


def test_batches_read_ahead_arrive_in_order_and_a_failed_read_reaches_the_caller() -> None:
    """The copy is loaded while the table's next batches are read on another thread: the caller
    sees every batch in order, the reader's error in its turn, and stopping early stops it."""
    import threading

    assert list(vectors.prefetched(iter(range(100)))) == list(range(100))

    def failing() -> Any:
        yield from range(5)
        raise OSError("the table's file is damaged")

    seen: list[int] = []
    with pytest.raises(OSError, match="damaged"):
        for item in vectors.prefetched(failing()):
            seen.append(item)
    assert seen == list(range(5))

    read: list[int] = []

    def endless() -> Any:
        n = 0
        while True:
            read.append(n)
            yield n
            n += 1

    ahead = vectors.prefetched(endless(), depth=2)
    assert next(ahead) == 0
    ahead.close()
    assert len(read) <= 4  # the one handed over, two waiting, one being handed
    assert not any(t.name == "graphmem-prefetch" for t in threading.enumerate())


def test_a_server_prepares_the_inverted_lists_when_it_opens_a_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the exact-search size the first search would make the inverted lists (about 30 s
    at a million facts); a server makes them in the background as it opens the namespace."""
    import threading

    from graphmem.server.namespaces import Namespaces

    from graphmem import Settings
    from graphmem.vectors.embedders import create_embedder

    monkeypatch.setattr(vectors, "EXACT_SEARCH_MAX_ROWS", 10)
    monkeypatch.setattr(mirror_engine, "APPROXIMATE_MIN_ROWS", 30)
    settings = Settings(embedder="hash", data_dir=tmp_path)
    with Memory.open(tmp_path, settings=settings) as mem:
        mem.store_many(
            [{"text": f"Office {i} in city {i * 7} opens at {i % 12}"} for i in range(60)]
        )
        assert mem._vectors._mirror is not None and mem._vectors._mirror._lists is None
    served = Namespaces(settings, create_embedder("hash", settings), None)
    try:
        mem = served.get(settings.namespace)
        for thread in threading.enumerate():
            if thread.name == "graphmem-vectors":
                thread.join(timeout=30)
        assert mem._vectors._mirror is not None and mem._vectors._mirror._lists is not None
        assert [h.fact.text for h in mem.search("Office 5 in city 35", mode="vector", limit=1)] == [
            "Office 5 in city 35 opens at 5"
        ]
    finally:
        served.close()


def test_a_table_listed_before_it_can_be_opened_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process creating the table on an object store has it listed before its first
    version is written (opening it then says "not found"): opening waits for it, briefly;
    any other error is not retried."""
    vectors.VectorIndex(tmp_path / "vectors", 8)  # the table exists
    connect = vectors.Location.connect
    failures: dict[str, Any] = {"left": 2, "message": "Table 'facts' was not found"}

    class Creating:
        def __init__(self, db: Any) -> None:
            self._db = db

        def __getattr__(self, name: str) -> Any:
            return getattr(self._db, name)

        def open_table(self, name: str) -> Any:
            if failures["left"]:
                failures["left"] -= 1
                raise ValueError(failures["message"])
            return self._db.open_table(name)

    monkeypatch.setattr(vectors.Location, "connect", lambda self: Creating(connect(self)))
    monkeypatch.setattr(vectors, "OPEN_RETRY_WAITS", (0.01, 0.01, 0.01))
    assert vectors.VectorIndex(tmp_path / "vectors", 8).count() == 0
    assert failures["left"] == 0
    failures.update(left=1, message="the table's files are damaged")
    with pytest.raises(StorageError, match="damaged"):
        vectors.VectorIndex(tmp_path / "vectors", 8)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")
def test_every_file_of_the_vector_index_is_its_owners_alone_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """LanceDB writes with the process's umask: under 022 its data, manifests, transactions
    and folders were once 0644 and 0755 (35 of them), against the data directory's 0600/0700."""
    data_dir = tmp_path / "data"
    umask = os.umask(0o022)  # the usual umask, which leaves new files readable by everyone
    try:
        with Memory.open(data_dir, settings=Settings(embedder="hash")) as mem:
            for n in range(3):  # a fragment, a manifest and a transaction each
                mem.store_many([{"text": f"fact {n}.{m} about the garden"} for m in range(5)])
            gone = mem.store("Ana's phone is in the drawer").fact
            assert gone is not None
            mem.forget(gone.id)
            mem.purge(gone.id)  # deletes its row, then every older version of the table
            mem.optimize()  # compacts: new fragments, a new manifest, older versions removed
    finally:
        os.umask(umask)
    paths = list(data_dir.rglob("*"))
    table = [p.relative_to(data_dir).as_posix() for p in paths if "facts.lance" in p.parts]
    assert any("/data/" in p for p in table) and any("/_versions/" in p for p in table)
    modes = {p.relative_to(data_dir).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in paths}
    wanted = {p.relative_to(data_dir).as_posix(): 0o700 if p.is_dir() else 0o600 for p in paths}
    assert modes == wanted


def test_lists_trained_again_take_over_in_a_process_that_only_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A copy that only follows writes (no check or search asks for the lists) still puts
    the new lists in place once they are trained, at its next write, with that write in them;
    a forked child forgets the parent's training instead of waiting on its thread."""
    n = APPROXIMATE_MIN_ROWS
    rows = structured_rows(2 * n + 3, dims=32, factors=8, seed=7)
    gate = Gated()
    mirror, old = outgrowing(monkeypatch, rows, gate)
    mirror.neighbours_many(rows[:1], 1, live_only=True)  # outgrown: training starts
    training = mirror._training
    assert training is not None
    gate.opened.set()
    assert training.ended(timeout=120)
    mirror.upsert([f"f{2 * n + 1}"], rows[2 * n + 1 : 2 * n + 2], [True])
    new = mirror._lists
    assert new is not None and new is not old and mirror._training is None
    assert placed(new) == nearest_lists(new, mirror)

    mirror.upsert([f"f{2 * n + 2}"], rows[2 * n + 2 :], [True])
    mirror.neighbours_many(rows[:1], 1, live_only=True)  # not outgrown: nothing trains
    assert mirror._training is None
    mirror._training = training
    monkeypatch.setattr(training, "pid", -1)  # as in a child forked while it trained
    mirror.upsert([f"f{2 * n + 3}"], rows[:1], [True])
    assert mirror._training is None and mirror._lists is new
