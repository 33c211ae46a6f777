"""PathQuestion: multi-hop questions over a small knowledge base, answered by search + graph.

Recipe (../shared/bench-data/README.md): every KB triple ``s r o`` is a fact "{s} {r} {o}"
(entity = s, key = r, value = o; underscores read as spaces; stored without the entity/key
rule, since keys such as "children" hold several values) with no automatic links. The bench
links facts **explicitly** (RELATED_TO, strength 1): a fact whose value is another fact's entity
links to every fact about that entity (the KB's own edges: the path's next hop). ``--siblings N``
also links each fact to N other facts about the same entity (0 by default: measured, such links
only crowd the results: 3H 0.707 with 10 versus 0.721 without, before look-ahead evidence). The query is the question; the gold is the 2 or 3
triples of its path. Metrics: recall_all@10 (the whole path in the top 10) and recall_frac@10,
for search without graph expansion and with graph_depth 1 and 2.

    python -m bench.pathquestion [--embedder hash|local] [--limit N] [--sets 2H 3H]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings, expansion

from .common import (
    OUT_DIR,
    CachingEmbedder,
    dataset,
    machine,
    make_embedder,
    markdown_table,
    mean,
    patched,
    recall_all,
    recall_frac,
    write_json,
)

SETS: Final = {"2H": ("PQ-2H.txt", "2H-kb.txt"), "3H": ("PQ-3H.txt", "3H-kb.txt")}
DEPTHS: Final = (0, 1, 2)
#: Same-subject links made per fact (``--siblings``); none by default.
SIBLINGS_PER_FACT: Final = 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("pathquestion")
    if folder is None:
        return 0
    embedder = CachingEmbedder(make_embedder(args.embedder))
    settings = Settings(track_access=False, autolink=False)  # the links are made below
    report: dict[str, Any] = {
        "benchmark": "pathquestion",
        "machine": machine(),
        "embedder": args.embedder,
        "sets": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-pathquestion-") as tmp:
        for name in args.sets:
            questions_file, kb_file = SETS[name]
            parsed = [_triple(line) for line in (folder / kb_file).open(encoding="utf-8")]
            triples = [t for t in parsed if t is not None]
            asked = [_question(line) for line in (folder / questions_file).open(encoding="utf-8")]
            questions = [q for q in asked if q is not None][: args.limit or None]
            memory = Memory.open(tmp, namespace=f"pq-{name}", embedder=embedder, settings=settings)
            try:
                began = time.perf_counter()
                fact_of, links = build(memory, triples, args.siblings)
                runs = {f"graph_depth {d}": evaluate(memory, questions, fact_of, d) for d in DEPTHS}
                for hop in args.hop_factors:
                    with patched(expansion, "HOP_FACTOR", hop):
                        runs[f"graph_depth 2, hop factor {hop:g}"] = evaluate(
                            memory, questions, fact_of, 2
                        )
                report["sets"][name] = {
                    "triples": len(triples),
                    "facts": len(set(fact_of.values())),
                    "links": links,
                    "questions": len(questions),
                    "questions_without_gold": sum(
                        1 for _, path in questions if not all(t in fact_of for t in path)
                    ),
                    "seconds": time.perf_counter() - began,
                    "runs": runs,
                }
            finally:
                memory.close()
    print(summary_markdown(report))
    write_json(args.out or OUT_DIR / f"pathquestion-{args.embedder}.json", report)
    return 0


Triple = tuple[str, str, str]


def _words(text: str) -> str:
    return text.replace("_", " ").strip()


def _triple(line: str) -> Triple | None:
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        return None
    s, r, o = (_words(p) for p in parts)
    return s, r, o


def _question(line: str) -> tuple[str, list[Triple]] | None:
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 3:
        return None
    hops = parts[2].split("#<end>#")[0].split("#")
    path = [
        (_words(hops[i]), _words(hops[i + 1]), _words(hops[i + 2]))
        for i in range(0, len(hops) - 2, 2)
    ]
    return _words(parts[0]), path


def build(
    memory: Memory, triples: list[Triple], siblings: int = SIBLINGS_PER_FACT
) -> tuple[dict[Triple, str], int]:
    """Store the triples (one batch) and link facts that name the same entity."""
    results = memory.store_many(
        [
            {"text": f"{s} {r} {o}", "entity": s, "key": r, "value": o, "classify": False}
            for s, r, o in triples
        ]
    )
    fact_of = {t: r.fact.id for t, r in zip(triples, results, strict=True) if r.fact}
    about: dict[str, list[str]] = defaultdict(list)
    for (s, _, _), fact_id in fact_of.items():
        if fact_id not in about[s.lower()]:
            about[s.lower()].append(fact_id)
    pairs: set[tuple[str, str]] = set()
    for (_, _, o), fact_id in fact_of.items():
        for target in about.get(o.lower(), []):
            pairs.add((fact_id, target))
    for ids in about.values():
        for i, fact_id in enumerate(ids):
            for other in ids[i + 1 : i + 1 + siblings]:
                pairs.add((fact_id, other))
    memory.link_many(  # the bench's explicit linking, in one transaction
        {"source_id": s, "target_id": t, "type": "RELATED_TO"} for s, t in sorted(pairs) if s != t
    )
    return fact_of, len(pairs)


def evaluate(
    memory: Memory,
    questions: list[tuple[str, list[Triple]]],
    fact_of: dict[Triple, str],
    depth: int,
) -> dict[str, float]:
    all_at_10: list[float] = []
    frac_at_10: list[float] = []
    began = time.perf_counter()
    for text, path in questions:
        gold = frozenset(fact_of[t] for t in path if t in fact_of)
        if len(gold) != len(set(path)):
            continue
        hits = memory.search(text, limit=10, graph_depth=depth)
        ranked = [frozenset({h.fact.id}) for h in hits]
        all_at_10.append(recall_all(ranked, gold, 10))
        frac_at_10.append(recall_frac(ranked, gold, 10))
    return {
        "recall_all@10": mean(all_at_10),
        "recall_frac@10": mean(frac_at_10),
        "questions": len(all_at_10),
        "ms_per_query": 1000 * (time.perf_counter() - began) / max(1, len(all_at_10)),
    }


def summary_markdown(report: dict[str, Any]) -> str:
    rows = [
        [
            name,
            run,
            f"{r['recall_all@10']:.3f}",
            f"{r['recall_frac@10']:.3f}",
            r["questions"],
            f"{r['ms_per_query']:.1f}",
        ]
        for name, data in report["sets"].items()
        for run, r in data["runs"].items()
    ]
    return f"PathQuestion, embedder {report['embedder']}\n\n" + markdown_table(
        ["set", "search", "recall_all@10", "recall_frac@10", "questions", "ms/query"], rows
    )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pathquestion", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--embedder", choices=("hash", "local"), default="local")
    parser.add_argument("--limit", type=int, default=0, help="first N questions per set")
    parser.add_argument("--sets", nargs="+", choices=tuple(SETS), default=list(SETS))
    parser.add_argument(
        "--siblings",
        type=int,
        default=SIBLINGS_PER_FACT,
        help="same-subject links per fact (0: only value -> entity links)",
    )
    parser.add_argument(
        "--hop-factors",
        type=float,
        nargs="*",
        default=[],
        help="extra graph_depth 2 runs with expansion.HOP_FACTOR patched",
    )
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
