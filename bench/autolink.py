"""Calibrate the similarity threshold of automatic links, per embedder.

Embeds every LoCoMo turn ("speaker: text") in conversation order, as a store would see them, and
gives each turn its AUTOLINK_MAX nearest earlier turns (of any conversation). For each cosine
threshold it counts the links that would be made and how many join turns of *different*
conversations: ten unrelated pairs of people, so such a link is almost always noise (generic
chit-chat matching generic chit-chat), while a link inside a conversation may be a real relation.
It also reports how many turn pairs that are evidence for the same question (related by the
dataset's own labels) would be linked. The calibrated threshold is the lowest at which at most
MAX_CROSS_SHARE of the links cross conversations.

    python -m bench.autolink [--embedder local hash]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphmem import autolink
from graphmem.settings import Settings

from .common import OUT_DIR, dataset, machine, make_embedder, markdown_table, write_json
from .locomo import evidence_ids

THRESHOLDS: Final = tuple(round(0.4 + 0.05 * i, 2) for i in range(12))  # 0.40 … 0.95
MAX_CROSS_SHARE: Final = 0.05
AUTOLINK_MAX: Final = Settings().autolink_max


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    texts: list[str] = []
    owner: list[int] = []  # the conversation each turn belongs to
    turn_index: dict[tuple[int, str], int] = {}  # (conversation, dialogue id) -> position in texts
    related: set[tuple[int, int]] = set()
    for c, sample in enumerate(samples):
        conv = sample["conversation"]
        sessions = sorted(
            int(k.split("_")[1])
            for k in conv
            if k.startswith("session_") and k.count("_") == 1 and conv[k]
        )
        for s in sessions:
            for turn in conv[f"session_{s}"]:
                turn_index[(c, turn["dia_id"])] = len(texts)
                texts.append(f"{turn['speaker']}: {turn['text']}")
                owner.append(c)
        known = {d for (cc, d) in turn_index if cc == c}
        for qa in sample["qa"]:
            gold, _, _ = evidence_ids(qa.get("evidence") or [], known)
            rows = sorted(turn_index[(c, d)] for d in gold)
            related.update(combinations(rows, 2))
    report: dict[str, Any] = {
        "benchmark": "autolink",
        "machine": machine(),
        "turns": len(texts),
        "evidence_pairs": len(related),
        "max_cross_share": MAX_CROSS_SHARE,
        "embedders": {},
    }
    for name in args.embedder:
        vectors = make_embedder(name).embed(texts)
        report["embedders"][name] = calibrate(vectors, np.array(owner), related)
        print(f"{name}: calibrated threshold {report['embedders'][name]['calibrated']}")
    print(summary_markdown(report))
    write_json(args.out or OUT_DIR / "autolink.json", report)
    return 0


def calibrate(
    vectors: np.ndarray, owner: np.ndarray, related: set[tuple[int, int]]
) -> dict[str, Any]:
    """Per threshold: links made (each turn to its nearest earlier turns), the share crossing
    conversations, turns with a link, and the share of evidence pairs whose cosine reaches it."""
    n = len(vectors)
    candidates = autolink.batch_neighbours(vectors, AUTOLINK_MAX, min(THRESHOLDS))
    pair_scores = np.array([float(vectors[a] @ vectors[b]) for a, b in related])
    rows = []
    for t in THRESHOLDS:
        links = [(i, j) for i, hits in enumerate(candidates) for j, s in hits if s >= t]
        cross = sum(owner[i] != owner[int(j)] for i, j in links)
        linked = {i for i, _ in links} | {int(j) for _, j in links}
        rows.append(
            {
                "threshold": t,
                "links_per_turn": len(links) / n,
                "cross_conversation_share": cross / len(links) if links else 0.0,
                "turns_linked_share": len(linked) / n,
                "evidence_pairs_reached": float((pair_scores >= t).mean())
                if len(pair_scores)
                else 0.0,
            }
        )
    ok = [
        r["threshold"]
        for r in rows
        if r["links_per_turn"] and r["cross_conversation_share"] <= MAX_CROSS_SHARE
    ]
    return {"calibrated": min(ok) if ok else None, "thresholds": rows}


def summary_markdown(report: dict[str, Any]) -> str:
    parts = [
        f"LoCoMo, {report['turns']} turns, {report['evidence_pairs']} evidence pairs; "
        f"calibrated = lowest threshold with at most {report['max_cross_share']:.0%} of "
        "links across conversations\n"
    ]
    for name, r in report["embedders"].items():
        parts.append(f"{name}: calibrated threshold **{r['calibrated']}**\n")
        parts.append(
            markdown_table(
                [
                    "cosine ≥",
                    "links per turn",
                    "across conversations",
                    "turns linked",
                    "evidence pairs reached",
                ],
                [
                    [
                        f"{x['threshold']:.2f}",
                        f"{x['links_per_turn']:.2f}",
                        f"{x['cross_conversation_share']:.1%}",
                        f"{x['turns_linked_share']:.1%}",
                        f"{x['evidence_pairs_reached']:.1%}",
                    ]
                    for x in r["thresholds"]
                ],
            )
        )
    return "\n".join(parts)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.autolink", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--embedder", nargs="+", choices=("local", "hash"), default=["local", "hash"]
    )
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
