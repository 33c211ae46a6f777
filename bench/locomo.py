"""LoCoMo retrieval: does search find the conversation turns that answer a question?

Recipe (../shared/bench-data/README.md): one namespace per conversation; each turn is a fact
"{speaker}: {text}" with entity = speaker and source_date = valid_from = its session's date,
stored with one store_many call per conversation; the query is the question and the gold results
are the evidence turns. Metrics per category and overall: recall_frac@5/@10 (share of evidence
turns in the top k), recall_all@10 (all of them), NDCG@10, for the fts, vector and hybrid modes,
hybrid at several keyword weights (Settings.fts_weight).

Categories use the official code's numbering: 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial.

Evidence ids with formatting slips are repaired ("D8:6; D9:17" → two ids, "D:11:26",
"D30:05"); ids naming no turn are dropped; questions left without evidence are skipped and
counted. Duplicate turns (same text) become one fact that stands for all of their ids.

Turns are stored without automatic links unless ``--autolink``.
``--episodes`` stores each session as an episode, as an agent would: search lends evidence along
the episode's links by default, so the hybrid runs use them; added runs: without them
(``episode_links=False``), at each of ``--evidence-weights``, and with ``graph_depth=1``.
``--link-turns`` links each turn to the previous turn of its session (RELATED_TO, strength 1)
and adds hybrid runs with ``graph_depth=1`` (graph-aware ranking, graphmem/expansion.py), at
several evidence weights.

``--context`` also indexes each turn's previous and next turn (same session) in the fact's
down-weighted ``context`` FTS column. ``--explore [parts]`` adds sweeps (slower): FTS column
weights one at a time, fusion candidates, ranking without the quality adjustment, and other
fusion methods. ``--column-weights`` overrides graphmem.ranking.FTS_COLUMN_WEIGHTS for the run.
Query embeddings are cached across runs of one invocation, so ms/query is indicative only
(bench/speed.py measures latency).

    python -m bench.locomo [--samples N] [--embedder local|hash] [--context] [--link-turns] [--autolink]
                           [--explore [parts]]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import graphmem.ranking as ranking
from graphmem import Memory, Settings, expansion, search, timehints, windows
from graphmem.storage.sql import keyword
from graphmem.vectors.embedders import Embedder

from .common import (
    OUT_DIR,
    CachingEmbedder,
    dataset,
    lend_nothing,
    machine,
    make_embedder,
    markdown_table,
    mean,
    ndcg,
    patched,
    recall_all,
    recall_frac,
    session_any,
    write_json,
)
from .common import store as bench_store

CATEGORIES: Final = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
METRICS: Final = (
    "recall_frac@5",
    "recall_frac@10",
    "recall_all@10",
    "ndcg@10",
    "session_any@5",
)
#: Hits read per question for session_any@5 (the first ten are those of limit=10: without
#: graph_depth a search's hits are the head of a longer one's; graph runs read ten).
SESSION_DEPTH: Final = 50
DEFAULT_WEIGHTS: Final = (0.4, 0.5, 0.6, 0.7, 0.8)
SESSION_DATE_FORMAT: Final = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
FTS_COLUMNS: Final = ("text", "category", "entity", "key", "value", "tags", "context", "date_terms")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    samples = samples[: args.samples] if args.samples else samples
    if args.conversations:
        first, last = args.conversations
        samples = samples[first : last + 1]
    if args.column_weights:
        ranking.FTS_COLUMN_WEIGHTS = args.column_weights  # type: ignore[misc]  # sweeps a Final
    if args.ranking_budget:  # a conversation is small: a tiny budget takes the large-memory paths
        keyword.RANKING_BUDGET = args.ranking_budget  # type: ignore[misc]  # sweeps a Final
    embedder = CachingEmbedder(make_embedder(args.embedder))
    with bench_store(args.store) as url, tempfile.TemporaryDirectory(prefix="bench-locomo-") as tmp:
        settings = Settings(
            track_access=False, fusion_candidates=args.candidates, autolink=args.autolink, store=url
        )
        started = time.perf_counter()
        conversations = [
            build_conversation(
                Path(tmp),
                sample,
                embedder,
                settings,
                context=args.context,
                link_turns=args.link_turns,
                episodes=args.episodes,
            )
            for sample in samples
        ]
        build_seconds = time.perf_counter() - started
        print(f"stored {sum(c.turns for c in conversations)} turns in {build_seconds:.1f} s")
        try:
            runs: dict[str, Run] = {}
            for mode in ("fts", "vector"):
                runs[mode] = evaluate(conversations, mode)
            for weight in args.weights:
                runs[f"hybrid@{weight:g}"] = evaluate(conversations, "hybrid", fts_weight=weight)
            if args.time_hints:
                runs["hybrid@0.6, no time hints"] = evaluate(
                    conversations, "hybrid", fts_weight=0.6, time_hints=False
                )
                for boost in args.time_hints:
                    with patched(timehints, "TIME_HINT_BOOST", boost):
                        runs[f"hybrid@0.6, time hints, boost {boost:g}"] = evaluate(
                            conversations, "hybrid", fts_weight=0.6
                        )
            if args.stated_time:
                runs.update(stated_time_runs(conversations))
            if args.episodes:
                runs["hybrid@0.6, no episode links"] = evaluate(
                    conversations, "hybrid", fts_weight=0.6, episode_links=False
                )
                for lend in args.evidence_weights:
                    with patched(expansion, "EVIDENCE_WEIGHT", lend):
                        runs[f"hybrid@0.6, episode links lending {lend:g}"] = evaluate(
                            conversations, "hybrid", fts_weight=0.6
                        )
            if args.episodes:
                with patched(windows, "lend", lend_nothing):
                    runs["hybrid@0.6, no windows"] = evaluate(
                        conversations, "hybrid", fts_weight=0.6
                    )
                with patched(search, "ENTITY_BOOST", 0.0):
                    runs["hybrid@0.6, no entity boost"] = evaluate(
                        conversations, "hybrid", fts_weight=0.6
                    )
                for spec in args.window_settings:
                    with ExitStack() as stack:
                        for name, value in _settings(spec).items():
                            owner = search if name == "ENTITY_BOOST" else windows
                            stack.enter_context(patched(owner, name, value))
                        runs[f"hybrid@0.6, {spec}"] = evaluate(
                            conversations, "hybrid", fts_weight=0.6
                        )
            if args.link_turns or args.autolink or args.episodes:
                for lend in args.evidence_weights:
                    with patched(expansion, "EVIDENCE_WEIGHT", lend):
                        runs[f"hybrid@0.6, graph_depth 1, evidence {lend:g}"] = evaluate(
                            conversations, "hybrid", fts_weight=0.6, graph_depth=1
                        )
            if args.autolink:  # similarity links are skipped by default; here they count
                with patched(expansion, "NEIGHBOUR_SKIPS", ()):
                    runs["graph_depth 1, similarity links followed, lending no evidence"] = (
                        evaluate(conversations, "hybrid", fts_weight=0.6, graph_depth=1)
                    )
                    with patched(expansion, "EVIDENCE_SKIPS", ()):
                        runs["graph_depth 1, similarity links followed and lending"] = evaluate(
                            conversations, "hybrid", fts_weight=0.6, graph_depth=1
                        )
            exploration = explore(conversations, args) if args.explore else None
        finally:
            for c in conversations:
                c.memory.close()

    report = _report(args, samples, conversations, runs, build_seconds, exploration)
    print(summary_markdown(report))
    suffix = (
        ("-context" if args.context else "")
        + ("-linked" if args.link_turns else "")
        + ("-episodes" if args.episodes else "")
        + (f"-{args.conversations[0]}-{args.conversations[1]}" if args.conversations else "")
        + ("-autolink" if args.autolink else "")
        + ("-explore" if args.explore else "")
        + ("-stated" if args.stated_time else "")
        + ("" if args.store == "sqlite" else "-postgresql")
    )
    write_json(args.out or OUT_DIR / f"locomo-{args.embedder}{suffix}.json", report)
    return 0


# --------------------------------------------------------------------------------- data


@dataclass
class Question:
    text: str
    category: int
    gold: frozenset[str]


@dataclass
class Conversation:
    memory: Memory
    #: fact id → the turns (dia_ids) it stands for; duplicate turns share one fact.
    turns_of: dict[str, frozenset[str]]
    questions: list[Question]
    turns: int
    duplicates: int
    evidence: dict[str, int] = field(default_factory=dict)


def build_conversation(
    root: Path,
    sample: dict[str, Any],
    embedder: Embedder,
    settings: Settings,
    *,
    context: bool,
    link_turns: bool = False,
    episodes: bool = False,
) -> Conversation:
    """Store one conversation's turns (one store_many call, or one per session recorded as an
    episode, as an agent would store them), link each to the previous turn of its session if
    asked, and parse its questions."""
    conv = sample["conversation"]
    items: list[dict[str, Any]] = []
    dia_ids: list[str] = []
    session_of: list[int] = []
    for session in _sessions(conv):
        turns = conv[f"session_{session}"]
        when = datetime.strptime(conv[f"session_{session}_date_time"], SESSION_DATE_FORMAT)
        epoch = when.replace(tzinfo=UTC).timestamp()
        for i, turn in enumerate(turns):
            item = {
                "text": f"{turn['speaker']}: {turn['text']}",
                "entity": turn["speaker"],
                "source_date": epoch,
                "valid_from": epoch,
                "classify": False,
            }
            if context:
                around = [turns[j] for j in (i - 1, i + 1) if 0 <= j < len(turns)]
                item["context"] = " ".join(f"{t['speaker']}: {t['text']}" for t in around)
            items.append(item)
            dia_ids.append(turn["dia_id"])
            session_of.append(session)
    namespace = re.sub(r"[^A-Za-z0-9_.-]", "_", sample["sample_id"])
    memory = Memory.open(root, namespace=namespace, embedder=embedder, settings=settings)
    if episodes:
        results = []
        for session in dict.fromkeys(session_of):
            chosen = [item for item, s in zip(items, session_of, strict=True) if s == session]
            episode = {
                "id": f"{sample['sample_id']}/session_{session}",
                "kind": "conversation",
                "time": chosen[0]["source_date"],
            }
            results += memory.store_many(chosen, episode=episode)
    else:
        results = memory.store_many(items)
    if link_turns:
        turn_links = []  # one transaction for the conversation's links
        for i in range(1, len(results)):
            before, after = results[i - 1].fact, results[i].fact
            if session_of[i] == session_of[i - 1] and before and after and before.id != after.id:
                turn_links.append(
                    {"source_id": after.id, "target_id": before.id, "type": "RELATED_TO"}
                )
        memory.link_many(turn_links)
    turns_of: dict[str, set[str]] = defaultdict(set)
    for dia_id, result in zip(dia_ids, results, strict=True):
        assert result.fact is not None
        turns_of[result.fact.id].add(dia_id)
    known = set(dia_ids)
    questions: list[Question] = []
    counts = {"questions": 0, "skipped_no_evidence": 0, "ids_repaired": 0, "ids_dropped": 0}
    for qa in sample["qa"]:
        counts["questions"] += 1
        gold, repaired, dropped = evidence_ids(qa.get("evidence") or [], known)
        counts["ids_repaired"] += repaired
        counts["ids_dropped"] += dropped
        if not gold:
            counts["skipped_no_evidence"] += 1
            continue
        questions.append(Question(qa["question"], int(qa["category"]), gold))
    return Conversation(
        memory=memory,
        turns_of={k: frozenset(v) for k, v in turns_of.items()},
        questions=questions,
        turns=len(items),
        duplicates=sum(1 for r in results if r.action == "NOOP"),
        evidence=counts,
    )


def evidence_ids(raw: Sequence[str], known: set[str]) -> tuple[frozenset[str], int, int]:
    """Gold turn ids, with formatting slips repaired: several ids in one string ("D8:6; D9:17"),
    "D:11:26", zero-padded "D30:05". Returns (ids, how many repaired, how many dropped as
    unknown)."""
    gold: set[str] = set()
    repaired = dropped = 0
    for item in raw:
        parts = [p for p in re.split(r"[;,\s]+", str(item)) if p]
        for part in parts:
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part)
            fixed = f"D{match.group(1)}:{match.group(2)}" if match else part
            if fixed in known:
                gold.add(fixed)
                repaired += fixed != item
            else:
                dropped += 1
    return frozenset(gold), repaired, dropped


def _sessions(conv: dict[str, Any]) -> list[int]:
    """Session numbers that have turns (some samples list more dates than sessions)."""
    numbers = [int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k))]
    return sorted(n for n in numbers if conv[f"session_{n}"])


# --------------------------------------------------------------------------------- evaluation

#: metric name → per-category mean (category names, plus "overall"), and the query count.
Run = dict[str, Any]


def stated_time_runs(conversations: Sequence[Conversation]) -> dict[str, Run]:
    """The questions that name a time (``timehints.understand`` reads one), searched with the
    facts' stated time as written, then with it cleared (as before graphmem read it), and
    without time hints."""
    now = time.time()

    def timed(q: Question) -> bool:
        return timehints.understand(q.text, now) is not None

    runs = {
        "time-word questions, stated time read": evaluate(
            conversations, "hybrid", fts_weight=0.6, only=timed
        ),
        "time-word questions, no time hints": evaluate(
            conversations, "hybrid", fts_weight=0.6, only=timed, time_hints=False
        ),
    }
    stating = 0
    for conv in conversations:
        store = conv.memory._store  # the bench clears what the write path read
        cleared = [(None, None, None, row["id"]) for row in store.stated_inputs()]
        stating += sum(1 for row in store.stated_inputs() if row["stated_start"] is not None)
        with store.transaction() as tx:
            tx.set_stated(cleared)
    print(f"{stating} facts state a time")
    runs["time-word questions, stated time cleared"] = evaluate(
        conversations, "hybrid", fts_weight=0.6, only=timed
    )
    for conv in conversations:
        conv.memory.backfill_stated_time()  # back as written, for the runs after these
    return runs


def _settings(spec: str) -> dict[str, float]:
    """ "NAME=value,NAME=value" as a dict (ints stay ints)."""
    out: dict[str, float] = {}
    for item in spec.split(","):
        name, _, value = item.partition("=")
        out[name.strip()] = int(value) if value.strip().isdigit() else float(value)
    return out


def evaluate(
    conversations: Sequence[Conversation],
    mode: str,
    *,
    fts_weight: float | None = None,
    candidates: int | None = None,
    graph_depth: int = 0,
    time_hints: bool = True,
    episode_links: bool = True,
    only: Callable[[Question], bool] | None = None,
) -> Run:
    """Every question of every conversation (``only`` those it accepts) searched in ``mode``;
    metrics by category."""
    per_category: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    seconds = 0.0
    for conv in conversations:
        base = conv.memory.settings
        update: dict[str, Any] = {}
        if fts_weight is not None:
            update["fts_weight"] = fts_weight
        if candidates is not None:
            update["fusion_candidates"] = candidates
        conv.memory.settings = base.model_copy(update=update)
        try:
            for q in conv.questions:
                if only is not None and not only(q):
                    continue
                started = time.perf_counter()
                hits = conv.memory.search(
                    q.text,
                    limit=10 if graph_depth else SESSION_DEPTH,
                    mode=mode,
                    graph_depth=graph_depth,
                    time_hints=time_hints,
                    episode_links=episode_links,
                )
                seconds += time.perf_counter() - started
                ranked = [conv.turns_of[h.fact.id] for h in hits]
                scores = {
                    "recall_frac@5": recall_frac(ranked, q.gold, 5),
                    "recall_frac@10": recall_frac(ranked, q.gold, 10),
                    "recall_all@10": recall_all(ranked, q.gold, 10),
                    "ndcg@10": ndcg(ranked, q.gold, 10),
                    "session_any@5": session_any(ranked, q.gold, 5),
                }
                for name, value in scores.items():
                    per_category[CATEGORIES[q.category]][name].append(value)
                    per_category["overall"][name].append(value)
        finally:
            conv.memory.settings = base
    queries = len(per_category["overall"]["ndcg@10"])
    return {
        "mode": mode,
        "fts_weight": fts_weight,
        "graph_depth": graph_depth,
        "time_hints": time_hints,
        "episode_links": episode_links,
        "queries": queries,
        "ms_per_query": 1000 * seconds / max(queries, 1),
        "metrics": {
            cat: {name: mean(values) for name, values in metrics.items()}
            for cat, metrics in sorted(per_category.items(), key=_category_order)
        },
    }


EXPLORE_PARTS: Final = ("columns", "candidates", "adjust", "fusion")


def explore(conversations: Sequence[Conversation], args: argparse.Namespace) -> dict[str, Any]:
    """Sweeps around the current settings, each part optional: FTS column weights (one column
    at a time), fusion candidates, ranking by fused relevance alone (no importance/freshness
    adjustment), and other fusion methods (RRF k=60; bm25 scaled by its maximum)."""
    weight = args.explore_weight
    parts = EXPLORE_PARTS if args.explore == "all" else tuple(args.explore.split(","))
    out: dict[str, Any] = {"fts_weight": weight}
    base = tuple(ranking.FTS_COLUMN_WEIGHTS)

    def score(run: Run) -> dict[str, float]:
        return {m: run["metrics"]["overall"][m] for m in METRICS} | {
            "multi-hop recall_frac@10": run["metrics"]["multi-hop"]["recall_frac@10"]
        }

    if "columns" in parts:
        out["columns"] = {}
        trials: list[tuple[str, tuple[float, ...]]] = [("current", base)]
        grid = {
            "text": (0.5, 2.0),
            "category": (0.0,),
            "entity": (0.0, 1.0),
            "tags": (0.0,),
            "context": (0.0, 0.1, 0.2, 0.5, 1.0),
            "date_terms": (0.0, 0.6),
        }
        for column, values in grid.items():
            n = FTS_COLUMNS.index(column)
            for value in values:
                if value != base[n]:
                    trials.append((f"{column}={value:g}", (*base[:n], value, *base[n + 1 :])))
        for name, weights in trials:
            with patched(ranking, "FTS_COLUMN_WEIGHTS", weights):
                out["columns"][name] = {
                    "weights": list(weights),
                    "fts": score(evaluate(conversations, "fts")),
                    "hybrid": score(evaluate(conversations, "hybrid", fts_weight=weight)),
                }
            print(f"  columns {name}: {out['columns'][name]['hybrid']}")
    if "candidates" in parts:
        out["candidates"] = {}
        for n in (25, 50, 100, 200, 1000):
            out["candidates"][str(n)] = score(
                evaluate(conversations, "hybrid", fts_weight=weight, candidates=n)
            )
            print(f"  candidates {n}: {out['candidates'][str(n)]}")
    if "adjust" in parts:

        def relevance_only(relevance: float, **_: Any) -> float:
            return relevance

        with patched(ranking, "adjust", relevance_only):
            out["relevance_only"] = {
                "fts": score(evaluate(conversations, "fts")),
                "hybrid": score(evaluate(conversations, "hybrid", fts_weight=weight)),
            }
        print(f"  relevance only: {out['relevance_only']['hybrid']}")
    if "fusion" in parts:
        out["fusion"] = {}
        for name, method in (("rrf60", _rrf), ("bm25/max + cosine min-max", _max_scaled_fts)):
            with patched(ranking, "fuse", method):
                out["fusion"][name] = score(evaluate(conversations, "hybrid", fts_weight=weight))
            print(f"  fusion {name}: {out['fusion'][name]}")
    return out


def _rrf(fts: dict[str, float], vector: dict[str, float], fts_weight: float) -> dict[str, float]:
    """Reciprocal rank fusion, k = 60, legs weighted equally (the weight is ignored)."""
    fused: dict[str, float] = defaultdict(float)
    for leg in (fts, vector):
        for rank, key in enumerate(sorted(leg, key=leg.__getitem__, reverse=True)):
            fused[key] += 1.0 / (60 + rank + 1)
    return dict(fused)


def _max_scaled_fts(
    fts: dict[str, float], vector: dict[str, float], fts_weight: float
) -> dict[str, float]:
    """bm25 divided by the query's best bm25 (0 stays 0, near-equal scores stay near-equal),
    cosine min-max normalised as before."""
    top = max(fts.values(), default=0.0)
    a = {k: (v / top if top > 0 else 1.0) for k, v in fts.items()}
    b = ranking.min_max(vector)
    return {
        k: fts_weight * a.get(k, 0.0) + (1.0 - fts_weight) * b.get(k, 0.0)
        for k in a.keys() | b.keys()
    }


def _category_order(item: tuple[str, Any]) -> int:
    names = [*CATEGORIES.values(), "overall"]
    return names.index(item[0])


# --------------------------------------------------------------------------------- report


def _report(
    args: argparse.Namespace,
    samples: Sequence[dict[str, Any]],
    conversations: Sequence[Conversation],
    runs: dict[str, Run],
    build_seconds: float,
    exploration: dict[str, Any] | None,
) -> dict[str, Any]:
    evidence: dict[str, int] = defaultdict(int)
    for c in conversations:
        for k, v in c.evidence.items():
            evidence[k] += v
    return {
        "benchmark": "locomo",
        "machine": machine(),
        "config": {
            "samples": len(samples),
            "embedder": args.embedder,
            "context": args.context,
            "link_turns": args.link_turns,
            "episodes": args.episodes,
            "conversations": args.conversations,
            "autolink": args.autolink,
            "fusion_candidates": args.candidates,
            "fts_column_weights": list(ranking.FTS_COLUMN_WEIGHTS),
            "category_numbering": {str(k): v for k, v in CATEGORIES.items()},
        },
        "data": {
            "turns": sum(c.turns for c in conversations),
            "duplicate_turns_merged": sum(c.duplicates for c in conversations),
            **evidence,
            "questions_evaluated": sum(len(c.questions) for c in conversations),
            "store_seconds": build_seconds,
        },
        "runs": runs,
        "exploration": exploration,
    }


def summary_markdown(report: dict[str, Any]) -> str:
    """Markdown tables: overall per mode, then per category for fts, vector and best hybrid."""
    runs: dict[str, Run] = report["runs"]
    lines = [
        f"LoCoMo, embedder {report['config']['embedder']}, context "
        f"{'on' if report['config']['context'] else 'off'}; "
        f"{report['data']['questions_evaluated']} questions "
        f"({report['data']['skipped_no_evidence']} skipped without valid evidence)",
        "",
        markdown_table(
            ["run", *METRICS, "ms/query"],
            [
                [
                    name,
                    *(run["metrics"]["overall"][m] for m in METRICS),
                    f"{run['ms_per_query']:.1f}",
                ]
                for name, run in runs.items()
            ],
        ),
    ]
    best = max(
        (n for n in runs if n.startswith("hybrid")),
        key=lambda n: runs[n]["metrics"]["overall"]["recall_frac@10"],
        default=None,
    )
    for name in ("fts", "vector", best):
        if name is None:
            continue
        metrics = runs[name]["metrics"]
        lines += ["", f"{name}, per category (official numbering):", ""]
        lines.append(
            markdown_table(
                ["category", *METRICS],
                [[cat, *(values[m] for m in METRICS)] for cat, values in metrics.items()],
            )
        )
    return "\n".join(lines)


def _span(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--samples", type=int, default=0, help="first N conversations (0: all 10)")
    parser.add_argument(
        "--conversations",
        type=_span,
        default=None,
        help="only conversations A-B (0-based, inclusive), e.g. 0-4 to tune and 5-9 to check",
    )
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="store each session as an episode (its turns chained by episode links, no links "
        "made by the bench; the hybrid runs use them as search does by default) and add runs "
        "without them, with other evidence weights, and with graph_depth=1",
    )
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite (default), postgresql (a throwaway server on loopback) or a postgresql:// URL",
    )
    parser.add_argument(
        "--context",
        action="store_true",
        help="index the previous and next turn in each fact's context column",
    )
    parser.add_argument(
        "--link-turns",
        action="store_true",
        help="link each turn to the previous one and add graph_depth=1 runs",
    )
    parser.add_argument(
        "--autolink",
        action="store_true",
        help="store with automatic similarity links (off otherwise) and add graph_depth=1 runs",
    )
    parser.add_argument(
        "--evidence-weights",
        type=float,
        nargs="+",
        default=[0.0, 0.5, 1.0],
        help="expansion.EVIDENCE_WEIGHT values for the graph runs",
    )
    parser.add_argument(
        "--window-settings",
        nargs="+",
        default=[],
        help="with --episodes, more runs with graphmem.windows constants (and"
        " graphmem.search.ENTITY_BOOST) set, each 'NAME=value,NAME=value'",
    )
    parser.add_argument(
        "--weights",
        type=float,
        nargs="+",
        default=list(DEFAULT_WEIGHTS),
        help="fts_weight values for hybrid runs",
    )
    parser.add_argument("--candidates", type=int, default=200, help="Settings.fusion_candidates")
    parser.add_argument(
        "--ranking-budget",
        type=int,
        default=None,
        help="graphmem.storage.sql.keyword.RANKING_BUDGET (a small one ranks as a large memory would)",
    )
    parser.add_argument(
        "--column-weights",
        type=_weights,
        default=None,
        help="override FTS_COLUMN_WEIGHTS: 8 comma-separated numbers, in the order "
        + ", ".join(FTS_COLUMNS),
    )
    parser.add_argument(
        "--explore",
        nargs="?",
        const="all",
        default=None,
        help="also run exploration sweeps: all (default), or a comma list of "
        + ", ".join(EXPLORE_PARTS),
    )
    parser.add_argument(
        "--explore-weight", type=float, default=0.6, help="fts_weight used by the --explore sweeps"
    )
    parser.add_argument(
        "--time-hints",
        type=float,
        nargs="+",
        default=None,
        metavar="BOOST",
        help="add hybrid@0.6 runs without time hints and with them at these boosts "
        "(timehints.TIME_HINT_BOOST; the other runs use the defaults)",
    )
    parser.add_argument(
        "--stated-time",
        action="store_true",
        help="add hybrid@0.6 runs of the questions that name a time: with the facts' stated "
        "time, with it cleared, and without time hints",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


def _weights(text: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split(","))
    if len(values) != len(FTS_COLUMNS):
        raise argparse.ArgumentTypeError(f"expected {len(FTS_COLUMNS)} weights")
    return values


if __name__ == "__main__":
    raise SystemExit(main())
