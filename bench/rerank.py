"""The rerank stage on LoCoMo: fit the ``features`` reranker on the tuning half, measure it on both.

1. LoCoMo's ten conversations are stored as bench/locomo.py ``--episodes`` stores them (one
   namespace each, each session an episode); every question is searched once, the default
   search, with a reranker that records the best ``rerank_candidates`` it is handed and keeps
   their order.
2. A linear model over :data:`graphmem.rerank.features.FEATURES` is fitted on conversations 0-4
   only: pairwise logistic regression (a relevant candidate against an irrelevant one of the same
   question; a candidate is relevant when it stands for an evidence turn), L2-regularised, by
   Newton's method on standardised features, then folded back to raw coefficients.
3. recall_frac@10 of the fused order and of the reranked one, on 0-4 and 5-9, overall and per
   category (reordered here, and searched again with the fitted model as ``rerank``); each feature left out in turn (fitted again on 0-4, measured on both halves); and the
   cost of a search with each reranker (``features``; ``http`` and ``llm`` against loopback stubs
   that answer at once, so the model's own time is not in it).

``--write`` stores the coefficients in graphmem/rerank/features.json with the command.

    python -m bench.rerank [--embedder local|hash] [--l2 1.0] [--write]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from graphmem import Settings
from graphmem.rerank import Candidate
from graphmem.rerank.features import FEATURES, FeatureReranker, LinearModel, features
from graphmem.usage import Meter
from tests.support.openai_stub import LoopbackServer, OpenAIStub

from . import locomo
from .common import (
    OUT_DIR,
    ROOT,
    CachingEmbedder,
    dataset,
    machine,
    make_embedder,
    mean,
    recall_frac,
    write_json,
)

TUNING: Final = range(0, 5)
HELD_OUT: Final = range(5, 10)
#: Questions of each half timed for the cost of each reranker.
TIMED: Final = 200
SHIPPED: Final = ROOT / "graphmem" / "rerank" / "features.json"


@dataclass
class Asked:
    """One question's recorded candidates: their features, which are relevant, their turns."""

    conversation: int
    category: str
    gold: frozenset[str]
    rows: npt.NDArray[np.float64]
    relevant: npt.NDArray[np.bool_]
    turns: list[frozenset[str]]


class Recorder:
    """A reranker that keeps the order it is handed and records the candidates."""

    name = "recorder"

    def __init__(self) -> None:
        self.meter = Meter("rerank", "recorder", "none")
        self.seen: list[tuple[str, list[Candidate]]] = []

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> list[tuple[int, float]]:
        self.seen.append((query, list(candidates)))
        return []


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    embedder = CachingEmbedder(make_embedder(args.embedder))
    settings = Settings(track_access=False)
    with tempfile.TemporaryDirectory(prefix="bench-rerank-") as tmp:
        conversations = [
            locomo.build_conversation(
                Path(tmp), sample, embedder, settings, context=False, episodes=True
            )
            for sample in samples
        ]
        try:
            asked = _record(conversations)
            model = fit([a for a in asked if a.conversation in TUNING], args.l2)
            online = _online(conversations, FeatureReranker(model))
            costs = _costs(conversations)
        finally:
            for c in conversations:
                c.memory.close()
    tuning = [a for a in asked if a.conversation in TUNING]
    weights = np.asarray(model.weights)
    report: dict[str, Any] = {
        "machine": machine(),
        "l2": args.l2,
        "model": model.to_dict(),
        "halves": {},
        "ablation": {},
        "ms_per_search": costs,
    }
    for name, half in (("0-4", TUNING), ("5-9", HELD_OUT)):
        chosen = [a for a in asked if a.conversation in half]
        report["halves"][name] = {
            "fused": _recall(chosen, None),
            "features": _recall(chosen, (weights, model.intercept)),
            "features, searched": online[name],
        }
    for left_out in range(len(FEATURES)):
        kept = [i for i in range(len(FEATURES)) if i != left_out]
        sub = fit(tuning, args.l2, kept)
        w = np.zeros(len(FEATURES))
        w[kept] = np.asarray(sub.weights)[kept]
        report["ablation"][FEATURES[left_out]] = {
            name: _recall([a for a in asked if a.conversation in half], (w, 0.0))["overall"]
            for name, half in (("0-4", TUNING), ("5-9", HELD_OUT))
        }
    print(_summary(report))
    if args.write:
        made = (
            f"python -m bench.rerank --embedder {args.embedder} --l2 {args.l2:g} --write: "
            f"pairwise logistic regression on LoCoMo conversations 0-4 (stored as episodes, the "
            f"default search, its best {settings.rerank_candidates} candidates); recall_frac@10 "
            + ", ".join(
                f"{h} {v['fused']['overall']:.3f} -> {v['features']['overall']:.3f}"
                for h, v in report["halves"].items()
            )
        )
        shipped = LinearModel(model.weights, model.intercept, made)
        SHIPPED.write_text(json.dumps(shipped.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {SHIPPED}")
    write_json(OUT_DIR / f"rerank-{args.embedder}.json", report)
    return 0


def _record(conversations: Sequence[locomo.Conversation]) -> list[Asked]:
    """Every question searched once, its candidates recorded with their features."""
    asked = []
    for number, conv in enumerate(conversations):
        recorder = Recorder()
        for q in conv.questions:
            conv.memory.search(q.text, limit=10, rerank=recorder)
            query, candidates = recorder.seen[-1]
            turns = [conv.turns_of[c.id] for c in candidates]
            asked.append(
                Asked(
                    number,
                    locomo.CATEGORIES[q.category],
                    q.gold,
                    features(query, candidates),
                    np.array([bool(t & q.gold) for t in turns]),
                    turns,
                )
            )
    return asked


def _online(
    conversations: Sequence[locomo.Conversation], reranker: FeatureReranker
) -> dict[str, dict[str, float]]:
    """recall_frac@10 by category of each half, searched with ``reranker`` (the engine's own
    rerank stage, checking the offline reordering)."""
    halves: dict[str, dict[str, list[float]]] = {"0-4": defaultdict(list), "5-9": defaultdict(list)}
    for number, conv in enumerate(conversations):
        by = halves["0-4" if number in TUNING else "5-9"]
        for q in conv.questions:
            hits = conv.memory.search(q.text, limit=10, rerank=reranker)
            value = recall_frac([conv.turns_of[h.fact.id] for h in hits], q.gold, 10)
            by[locomo.CATEGORIES[q.category]].append(value)
            by["overall"].append(value)
    return {
        half: {name: mean(values) for name, values in sorted(by.items())}
        for half, by in halves.items()
    }


def fit(asked: Sequence[Asked], l2: float, kept: Sequence[int] | None = None) -> LinearModel:
    """Pairwise logistic regression over ``asked`` (only the ``kept`` features), raw coefficients."""
    columns = list(range(len(FEATURES))) if kept is None else list(kept)
    differences = []
    for a in asked:
        good, bad = a.rows[a.relevant], a.rows[~a.relevant]
        if len(good) and len(bad):
            differences.append((good[:, None, :] - bad[None, :, :]).reshape(-1, a.rows.shape[1]))
    x = np.concatenate(differences)[:, columns]
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = x / scale
    w = np.zeros(len(columns))
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (p - 1.0) + l2 * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + l2 * np.eye(len(columns))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = np.zeros(len(FEATURES))
    raw[columns] = w / scale
    return LinearModel(tuple(float(v) for v in raw), 0.0, "")


def _recall(
    asked: Sequence[Asked], model: tuple[npt.NDArray[np.float64], float] | None
) -> dict[str, float]:
    """recall_frac@10 by category and overall: the fused order, or the model's."""
    by: dict[str, list[float]] = defaultdict(list)
    for a in asked:
        if model is None:
            order = list(range(len(a.turns)))
        else:
            scores = a.rows @ model[0] + model[1]
            order = sorted(range(len(a.turns)), key=lambda i: (-scores[i], i))
        value = recall_frac([a.turns[i] for i in order], a.gold, 10)
        by[a.category].append(value)
        by["overall"].append(value)
    return {name: mean(values) for name, values in sorted(by.items())}


def _costs(conversations: Sequence[locomo.Conversation]) -> dict[str, float]:
    """ms per search, the first TIMED questions of each conversation's turn, with each reranker:
    none, features, and http and llm against stubs answering at once on 127.0.0.1."""
    tei = LoopbackServer(Starlette(routes=[Route("/rerank", _tei, methods=["POST"])]), "tei")
    chat = OpenAIStub()
    chat.default_reply = lambda body: '{"ranking": [3, 1, 0, 2]}'
    try:
        with chat as chat_url:
            costs = {}
            questions = [(c, q) for c in conversations for q in c.questions][: 2 * TIMED]
            for choice in ("none", "features", "http", "llm", "none"):
                for c in conversations:
                    c.memory.settings = c.memory.settings.model_copy(
                        update={
                            "rerank_url": tei.url + "/rerank",
                            "rerank_api": "tei",
                            "llm_base_url": chat_url,
                            "llm_api_key": "bench",
                        }
                    )
                started = time.perf_counter()
                for c, q in questions:
                    c.memory.search(q.text, limit=10, rerank=choice)
                costs[choice] = 1000 * (time.perf_counter() - started) / len(questions)
            return costs
    finally:
        tei.stop()


async def _tei(request: Request) -> JSONResponse:
    texts = (await request.json())["texts"]
    return JSONResponse([{"index": i, "score": 1.0 / (1 + i)} for i in range(len(texts))])


def _summary(report: dict[str, Any]) -> str:
    lines = [
        "| half | order | multi-hop | temporal | open-domain | single-hop | adversarial | overall |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for half, runs in report["halves"].items():
        for order, values in runs.items():
            cells = [f"{values.get(c, 0):.3f}" for c in locomo.CATEGORIES.values()]
            lines.append(f"| {half} | {order} | {' | '.join(cells)} | {values['overall']:.3f} |")
    lines.append("")
    lines.append(
        "left out: "
        + ", ".join(
            f"{name} {v['0-4']:.3f}/{v['5-9']:.3f}" for name, v in report["ablation"].items()
        )
    )
    lines.append(
        "ms per search: " + ", ".join(f"{k} {v:.1f}" for k, v in report["ms_per_search"].items())
    )
    lines.append(
        "weights: "
        + ", ".join(
            f"{n} {w:+.3f}" for n, w in zip(FEATURES, report["model"]["weights"], strict=True)
        )
    )
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--l2", type=float, default=1.0, help="L2 penalty of the fit")
    parser.add_argument("--write", action="store_true", help="ship the fitted coefficients")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
