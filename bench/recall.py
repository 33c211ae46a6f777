"""Recall blocks on LoCoMo: are the turns that answer a question in the <memory-context> block?

The conversations are stored as in bench/locomo.py (one namespace each, a turn per fact, entity =
speaker, valid_from = the session's date). Each question is the prompt of ``Memory.recall``;
its block counts when the evidence turns are among the facts in it. Metrics per category and
overall: ``all_in_block`` (share of questions whose every evidence turn is in the block: the
headline number), ``frac_in_block`` (share of evidence turns in it) and ``any_in_block``; plus
the block's mean size in facts and tokens.

Runs: the default recall at 800 tokens, then (unless ``--budgets`` narrows it) 400 and 1600
tokens, recall without the entity lookup (``recall.ENTITY_FACTS = 0``: LoCoMo's entities are
the two speakers, named by most questions) and without the relative score floor
(``recall.MIN_SHARE = 0``).

    python -m bench.recall [--samples N] [--embedder local|hash] [--budgets 800 ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

import graphmem.recall as recalls
from graphmem import Settings

from .common import (
    OUT_DIR,
    CachingEmbedder,
    dataset,
    machine,
    make_embedder,
    markdown_table,
    mean,
    patched,
    write_json,
)
from .locomo import CATEGORIES, Conversation, build_conversation

METRICS: Final = ("all_in_block", "frac_in_block", "any_in_block", "facts", "tokens")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    samples = samples[: args.samples] if args.samples else samples
    embedder = CachingEmbedder(make_embedder(args.embedder))
    settings = Settings(track_access=False, autolink=False)
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        started = time.perf_counter()
        conversations = [
            build_conversation(Path(tmp), s, embedder, settings, context=False) for s in samples
        ]
        print(
            f"stored {sum(c.turns for c in conversations)} turns "
            f"in {time.perf_counter() - started:.1f} s"
        )
        try:
            variants: list[tuple[str, int, list[tuple[str, Any]]]] = [
                (f"{budget} tokens", budget, []) for budget in args.budgets
            ]
            if not args.no_variants:
                variants += [
                    ("800 tokens, no entity lookup", 800, [("ENTITY_FACTS", 0)]),
                    ("800 tokens, no score floor", 800, [("MIN_SHARE", 0.0)]),
                ]
            for name, budget, patches in variants:
                with ExitStack() as stack:
                    for constant, value in patches:
                        stack.enter_context(patched(recalls, constant, value))
                    runs[name] = evaluate(conversations, budget)
                print(f"  {name}: {runs[name]['metrics']['overall']}")
        finally:
            for c in conversations:
                c.memory.close()
    report = {
        "benchmark": "locomo-recall",
        "machine": machine(),
        "config": {
            "samples": len(samples),
            "embedder": args.embedder,
            "candidates": recalls.CANDIDATES,
            "entity_facts": recalls.ENTITY_FACTS,
            "min_share": recalls.MIN_SHARE,
            "summary_chars": recalls.SUMMARY_CHARS,
        },
        "data": {
            "turns": sum(c.turns for c in conversations),
            "questions_evaluated": sum(len(c.questions) for c in conversations),
        },
        "runs": runs,
    }
    print(summary_markdown(report))
    write_json(args.out or OUT_DIR / f"recall-{args.embedder}.json", report)
    return 0


def evaluate(conversations: Sequence[Conversation], budget: int) -> dict[str, Any]:
    """Every question recalled at ``budget`` tokens; the metrics by category."""
    per_category: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    seconds = 0.0
    for conv in conversations:
        for q in conv.questions:
            started = time.perf_counter()
            result = conv.memory.recall(q.text, max_tokens=budget)
            seconds += time.perf_counter() - started
            shown = set().union(*(conv.turns_of[f.id] for f in result.facts))
            found = len(q.gold & shown)
            scores = {
                "all_in_block": float(found == len(q.gold)),
                "frac_in_block": found / len(q.gold),
                "any_in_block": float(found > 0),
                "facts": float(len(result.facts)),
                "tokens": float(result.tokens),
            }
            for name, value in scores.items():
                per_category[CATEGORIES[q.category]][name].append(value)
                per_category["overall"][name].append(value)
    queries = len(per_category["overall"]["facts"])
    order = [*CATEGORIES.values(), "overall"]
    return {
        "budget": budget,
        "queries": queries,
        "ms_per_query": 1000 * seconds / max(queries, 1),
        "metrics": {
            cat: {name: mean(values) for name, values in per_category[cat].items()}
            for cat in order
            if cat in per_category
        },
    }


def summary_markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    lines = [
        f"LoCoMo recall blocks, embedder {report['config']['embedder']}, "
        f"{report['config']['samples']} conversations, "
        f"{report['data']['questions_evaluated']} questions",
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
    first = next(iter(runs), None)
    if first is not None:
        lines += ["", f"{first}, per category (official numbering):", ""]
        lines.append(
            markdown_table(
                ["category", *METRICS],
                [
                    [cat, *(values[m] for m in METRICS)]
                    for cat, values in runs[first]["metrics"].items()
                ],
            )
        )
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.recall", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--samples", type=int, default=0, help="first N conversations (0: all 10)")
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument(
        "--budgets", type=int, nargs="+", default=[800, 400, 1600], help="recall budgets in tokens"
    )
    parser.add_argument(
        "--no-variants",
        action="store_true",
        help="skip the runs without entity lookup and without the score floor",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
