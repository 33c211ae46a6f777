"""Windows of turns on LoCoMo: what an index of consecutive turns would add to search.

Each conversation is stored as bench.locomo stores it with ``--episodes`` (one episode per
session, default search). Each session's turns are also cut into windows of ``size`` turns
every ``stride`` turns (the last window ends on the session's last turn), indexed beside the
facts for the measurement only: window texts in an in-memory FTS5 table with the keyword
index's tokenizer, window vectors embedded from the window's text (``--vectors embedded``) or
the normalised sum of its turns' vectors (``summed``, no embedding at write time). A
question's default search (``--depth`` hits) is then re-scored, each window's score lent to
the turns it holds, as expansion lends along episode links:

    score(fact) = hit score + lend * best hit score * max relevance of a window holding it

window relevance = :func:`graphmem.ranking.fuse` of the windows' bm25 and cosine lists at the
window keyword weight ``wf``. ``--entity-boosts`` also raises the facts whose entity the
question names (after the lending), to measure the two together.

Reported per setting: recall_frac@10 per category and session_any@5 (any evidence session
among the first five distinct sessions of the ranking), and the cost a real index would add
at write time: windows per turn, their characters per turn's, the seconds to embed them
against the turns' (uncached; turns one batch per session, windows 32 at a time), and the
time to index them as the run does (``--vectors``) against the conversation's store_many calls
(local embedder: the first embedding of the turns).

    python -m bench.windows --conversations 0-4 [--sizes 2,3,4] [--strides 1,2]
        [--lends 0.2,0.35,0.5] [--window-fts 0.3,0.6] [--vectors embedded|summed]
        [--entity-boosts 0,0.1]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphmem import Settings, ranking
from graphmem.recall import entity_names
from graphmem.storage.sqlite.migrations import FTS_TOKENIZER
from graphmem.vectors.embedders import Embedder

from .common import (
    OUT_DIR,
    CachingEmbedder,
    dataset,
    make_embedder,
    mean,
    recall_frac,
    session_any,
    write_json,
)
from .locomo import CATEGORIES, Conversation, _sessions, build_conversation

SHOWN = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial", "overall")


@dataclass(frozen=True)
class Window:
    text: str
    turns: tuple[str, ...]  # dia_ids


@dataclass
class Windows:
    """One conversation's windows of one shape, indexed."""

    windows: list[Window]
    vectors: np.ndarray[Any, np.dtype[np.float32]]
    keywords: sqlite3.Connection

    def relevance(
        self, question: str, vector: np.ndarray[Any, Any], depth: int, wf: float
    ) -> dict[int, float]:
        """Fused relevance of the ``depth`` best windows of each leg, by window index."""
        cosines = self.vectors @ vector
        best = np.argsort(-cosines)[:depth]
        vec = {str(int(i)): float(cosines[i]) for i in best}
        fts: dict[str, float] = {}
        terms = ranking.fts_terms(question)
        if terms:
            rows = self.keywords.execute(
                "SELECT rowid, bm25(w) FROM w WHERE w MATCH ? ORDER BY 2 LIMIT ?",
                (" OR ".join(terms), depth),
            )
            fts = {str(rowid): -score for rowid, score in rows}
        return {int(k): v for k, v in ranking.fuse(fts, vec, wf).items()}


def cut(sample: dict[str, Any], size: int, stride: int) -> list[Window]:
    """Windows of ``size`` consecutive turns every ``stride`` turns, per session; a session
    shorter than ``size`` is one window, and the last window ends on the last turn."""
    conv = sample["conversation"]
    out = []
    for session in _sessions(conv):
        turns = conv[f"session_{session}"]
        starts = list(range(0, max(len(turns) - size, 0) + 1, stride))
        if starts[-1] + size < len(turns):
            starts.append(len(turns) - size)
        for start in starts:
            chunk = turns[start : start + size]
            text = " ".join(f"{t['speaker']}: {t['text']}" for t in chunk)
            out.append(Window(text, tuple(t["dia_id"] for t in chunk)))
    return out


def index(
    windows: list[Window],
    embedder: Embedder,
    turn_vectors: dict[str, np.ndarray[Any, Any]],
    how: str,
) -> Windows:
    if how == "summed":
        sums = [np.sum([turn_vectors[t] for t in w.turns], axis=0) for w in windows]
        vectors = np.asarray([v / (np.linalg.norm(v) or 1.0) for v in sums], dtype=np.float32)
    elif how == "mean":  # cosine = the mean of the turns' cosines
        means = [np.mean([turn_vectors[t] for t in w.turns], axis=0) for w in windows]
        vectors = np.asarray(means, dtype=np.float32)
    else:
        vectors = np.asarray(embedder.embed([w.text for w in windows]), dtype=np.float32)
    keywords = sqlite3.connect(":memory:")
    keywords.execute(f"CREATE VIRTUAL TABLE w USING fts5(text, tokenize='{FTS_TOKENIZER}')")
    keywords.executemany(
        "INSERT INTO w(rowid, text) VALUES (?, ?)", [(i, w.text) for i, w in enumerate(windows)]
    )
    return Windows(windows, vectors, keywords)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    first, last = args.conversations
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))[first : last + 1]
    local = make_embedder(args.embedder)
    embedder = CachingEmbedder(local)
    settings = Settings(track_access=False, autolink=False)
    shapes = [(w, s) for w in args.sizes for s in args.strides if s <= w]
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cost: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as tmp:
        for sample in samples:
            started = time.perf_counter()
            conv = build_conversation(
                Path(tmp), sample, embedder, settings, context=False, episodes=True
            )
            cost["store seconds"].append(time.perf_counter() - started)
            try:
                _conversation(conv, sample, local, embedder, shapes, args, scores, cost)
            finally:
                conv.memory.close()
            print(f"{sample['sample_id']}: {len(conv.questions)} questions", flush=True)
    table = {
        name: {c: mean(m[f"{c} recall_frac@10"]) for c in SHOWN}
        | {"session_any@5": mean(m["session_any@5"])}
        for name, m in scores.items()
    }
    print("| setting | " + " | ".join(SHOWN) + " | session_any@5 |")
    print("|---" * (len(SHOWN) + 2) + "|")
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |")
    print(
        "\n| windows | per turn | characters per turn's | embedding seconds per turns' |"
        f" indexing ({args.vectors}) per store_many's |"
    )
    print("|---|---|---|---|---|")
    for name in cost:
        if name.endswith("count"):
            shape = name.removesuffix(" count")
            print(
                f"| {shape} | {mean(cost[name]):.2f} | {mean(cost[shape + ' chars']):.2f} |"
                f" {sum(cost[shape + ' seconds']) / sum(cost['turn seconds']):.2f} |"
                f" {sum(cost[shape + ' indexing']) / sum(cost['store seconds']):.2%} |"
            )
    write_json(
        args.out or OUT_DIR / f"windows-{args.vectors}-{first}-{last}.json",
        {"args": {k: str(v) for k, v in vars(args).items()}, "recall": table},
    )
    return 0


def _conversation(
    conv: Conversation,
    sample: dict[str, Any],
    local: Embedder,
    embedder: CachingEmbedder,
    shapes: list[tuple[int, int]],
    args: argparse.Namespace,
    scores: dict[str, dict[str, list[float]]],
    cost: dict[str, list[float]],
) -> None:
    """Score every question of ``conv`` under every setting; record the windows' costs."""
    fact_of = {turn: fact for fact, turns in conv.turns_of.items() for turn in turns}
    turn_vectors: dict[str, np.ndarray[Any, Any]] = {}
    turn_texts = 0
    started = time.perf_counter()
    for session in _sessions(sample["conversation"]):
        turns = sample["conversation"][f"session_{session}"]
        texts = [f"{t['speaker']}: {t['text']}" for t in turns]
        turn_texts += sum(len(t) for t in texts)
        for t, v in zip(turns, local.embed(texts), strict=True):
            turn_vectors[t["dia_id"]] = np.asarray(v, dtype=np.float32)
    cost["turn seconds"].append(time.perf_counter() - started)
    indexed: dict[tuple[int, int], Windows] = {}
    for size, stride in shapes:
        windows = cut(sample, size, stride)
        shape = f"W{size} S{stride}"
        cost[f"{shape} count"].append(len(windows) / len(turn_vectors))
        cost[f"{shape} chars"].append(sum(len(w.text) for w in windows) / turn_texts)
        started = time.perf_counter()
        for i in range(0, len(windows), 32):
            local.embed([w.text for w in windows[i : i + 32]])
        cost[f"{shape} seconds"].append(time.perf_counter() - started)
        started = time.perf_counter()
        indexed[(size, stride)] = index(windows, embedder, turn_vectors, args.vectors)
        cost[f"{shape} indexing"].append(time.perf_counter() - started)
    for q in conv.questions:
        hits = conv.memory.search(q.text, limit=args.depth)
        base = {h.fact.id: h.score for h in hits}
        top = max(base.values(), default=1.0)
        names = set(entity_names(q.text))
        names |= {n.removesuffix("'s").removesuffix("\u2019s") for n in names}
        named = {h.fact.id for h in hits if h.fact.entity and h.fact.entity.lower() in names}
        vector = np.asarray(embedder.embed([q.text])[0], dtype=np.float32)
        settings: dict[str, dict[str, float]] = {"default": base}
        for (size, stride), shape_index in indexed.items():
            for wf in args.window_fts:
                lent: dict[str, float] = defaultdict(float)
                for i, rel in shape_index.relevance(q.text, vector, args.depth, wf).items():
                    for turn in shape_index.windows[i].turns:
                        fact = fact_of.get(turn)
                        if fact is not None:
                            lent[fact] = max(lent[fact], rel)
                for lend in args.lends:
                    moved = dict(base)
                    for fact, rel in lent.items():
                        moved[fact] = moved.get(fact, 0.0) + lend * top * rel
                    settings[f"W{size} S{stride} wf{wf:g} lend{lend:g}"] = moved
        for name, scored in settings.items():
            for boost in args.entity_boosts:
                final = {f: v * (1 + boost) if f in named else v for f, v in scored.items()}
                order = sorted(final, key=lambda f: -final[f])
                ranked = [conv.turns_of[f] for f in order]
                label = name + (f", entity {boost:g}" if boost else "")
                for c in (CATEGORIES[q.category], "overall"):
                    scores[label][f"{c} recall_frac@10"].append(recall_frac(ranked, q.gold, 10))
                scores[label]["session_any@5"].append(session_any(ranked, q.gold, 5))


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__)
    parser.add_argument(
        "--conversations",
        type=lambda s: tuple(int(x) for x in s.split("-", 1)),
        default=(0, 4),
        help="conversations A-B (0-based, inclusive)",
    )
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--sizes", type=_ints, default=[2, 3, 4], help="turns per window")
    parser.add_argument("--strides", type=_ints, default=[1, 2], help="turns between windows")
    parser.add_argument("--lends", type=_floats, default=[0.2, 0.35, 0.5])
    parser.add_argument(
        "--window-fts", type=_floats, default=[0.3, 0.6], help="window keyword weight"
    )
    parser.add_argument("--vectors", choices=("embedded", "summed", "mean"), default="embedded")
    parser.add_argument("--entity-boosts", type=_floats, default=[0.0])
    parser.add_argument("--depth", type=int, default=200, help="hits and windows read per leg")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
