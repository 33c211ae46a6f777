"""Capture on LoCoMo: does an agent that captures each session find the evidence when it recalls?

The protocol of docs/agents.md, run as a new user would on LoCoMo's conversations:

1. each conversation in a namespace of its own (a fresh directory), its first speaker the
   ``user`` and its second the ``assistant``, a message being the turn's text (no speaker name);
2. the **capture** path: each session one ``Memory.capture(messages, episode={"id":
   "c<conv>/session-<n>", "time": <the session's date>})``; the **whole** path: the same
   messages as one ``store_many([{"text": ...}], episode=...)`` per session, a fact per turn;
3. every question with evidence (read as bench/locomo.py reads it) through
   ``Memory.recall(question, max_tokens=800)``: an evidence turn is in the block when a fact
   made of its message is (for capture, any result of that message with a fact: its turn or a
   fact drawn from it; for the whole path, the message's fact).

Reported per path, for the tuning half (conversations 0-4), the held-out half (5-9) and all,
overall and per category (official numbering: 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial): ``recall_frac``, the share of a question's evidence turns in the
block, averaged over questions, and ``all_in_block``, the share of questions with all of it
there. Also what each path wrote; the writes' cost (ms per session: the wall time of the
``capture`` or ``store_many`` call alone, embedding included, as the embedder caches nothing;
disk bytes per 1,000 turns: the namespace's files after close); and where the capture path loses
evidence: recall's steps replayed for each question (kept, live, among the search hits, above
the score floor, within the budget).

The two paths are written session by session in turn (which goes first alternating), so that a
change in the machine's speed weighs on both. Settings are the defaults but ``track_access``
off: the bench's recalls would otherwise write accesses between questions (and into the disk
figure), and every turn is within its decay class's lifetime anyway.

    python -m bench.capture [--samples A-B] [--embedder hash|local] [--path capture|whole|both]
                            [--keep conversation|facts] [--speakers] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, cast

import graphmem.recall as recalls
from graphmem import Memory, Settings
from graphmem.models import KEEPS, Keep
from graphmem.storage.interface import Filters
from graphmem.vectors.embedders import Embedder

from .common import OUT_DIR, dataset, machine, make_embedder, markdown_table, mean, write_json
from .locomo import CATEGORIES, SESSION_DATE_FORMAT, _sessions, evidence_ids

PATHS: Final = ("capture", "whole")
#: Conversations settings are tuned on, and those that check them.
HALVES: Final = {"0-4": range(0, 5), "5-9": range(5, 10)}
BUDGET: Final = 800
#: Evidence turns the capture path misses and the whole path finds, listed in the report.
EXAMPLES: Final = 30
STAGES: Final = (
    "in the block",
    "not kept",
    "kept, not live",
    "not a candidate",
    "under the score floor",
    "over the budget",
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    raw = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    first, last = args.samples or (0, len(raw) - 1)
    samples = [load(i, raw[i], args.speakers) for i in range(first, min(last, len(raw) - 1) + 1)]
    paths = PATHS if args.path == "both" else (args.path,)
    embedder = make_embedder(args.embedder)
    embedder.embed(["warm the model up before the first timed write"])
    settings = Settings(track_access=False, recall_profile=args.profile)
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    writes: dict[str, list[Written]] = {p: [] for p in paths}
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        for sample in samples:
            written = write_conversation(Path(tmp), sample, paths, embedder, settings, args.keep)
            try:
                records += ask(sample, written)
            finally:
                for path, w in written.items():
                    w.close()
                    writes[path].append(w)
            print(
                f"  conversation {sample.index}: {len(sample.questions)} questions, "
                + ", ".join(f"{p} {_frac(records, p, sample.index):.3f}" for p in paths)
                + f" ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    report = {
        "benchmark": "locomo-capture",
        "machine": machine(),
        "config": {
            "samples": [first, samples[-1].index],
            "embedder": args.embedder,
            "paths": list(paths),
            "keep": args.keep,
            "speakers": args.speakers,
            "max_tokens": BUDGET,
            "settings": "defaults, track_access=False"
            + (", recall_profile=True" if args.profile else ""),
            "category_numbering": {str(k): v for k, v in CATEGORIES.items()},
        },
        "quality": quality(records, paths),
        "written": {p: written_summary(samples, writes[p], records, p) for p in paths},
        "cost": cost(samples, writes, paths),
        "blocks": {p: blocks(records, p) for p in paths},
        "losses": losses(records, paths),
        "seconds": time.perf_counter() - started,
    }
    print(summary_markdown(report))
    suffix = "" if args.keep == "conversation" else f"-{args.keep}"
    suffix += "-speakers" if args.speakers else ""
    suffix += "-profile" if args.profile else ""
    suffix += "" if args.path == "both" else f"-{args.path}"
    suffix += "" if args.samples is None else f"-{first}-{samples[-1].index}"
    write_json(args.out or OUT_DIR / f"capture-{args.embedder}{suffix}.json", report)
    return 0


# --------------------------------------------------------------------------------- data


@dataclass
class Session:
    number: int
    time: float
    messages: list[dict[str, str]]
    dia_ids: list[str]


@dataclass
class Question:
    text: str
    category: int
    gold: frozenset[str]


@dataclass
class Sample:
    index: int
    sessions: list[Session]
    questions: list[Question]
    said: dict[str, str]  # dia_id → the turn's text

    @property
    def turns(self) -> int:
        return sum(len(s.messages) for s in self.sessions)


def load(index: int, sample: dict[str, Any], speakers: bool = False) -> Sample:
    """Conversation ``index`` of LoCoMo: its sessions as chat messages (each message's text
    after its speaker's name, ``speakers``), its questions with evidence."""
    conv = sample["conversation"]
    sessions = []
    said: dict[str, str] = {}
    for n in _sessions(conv):
        when = datetime.strptime(conv[f"session_{n}_date_time"], SESSION_DATE_FORMAT)
        turns = conv[f"session_{n}"]
        messages = [
            {
                "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                "content": f"{t['speaker']}: {t['text']}" if speakers else t["text"],
            }
            for t in turns
        ]
        sessions.append(
            Session(n, when.replace(tzinfo=UTC).timestamp(), messages, [t["dia_id"] for t in turns])
        )
        said.update((t["dia_id"], t["text"]) for t in turns)
    questions = []
    for qa in sample["qa"]:
        gold, _, _ = evidence_ids(qa.get("evidence") or [], set(said))
        if gold:
            questions.append(Question(qa["question"], int(qa["category"]), gold))
    return Sample(index, sessions, questions, said)


# --------------------------------------------------------------------------------- writes


@dataclass
class Written:
    """One path's namespace for one conversation and what its writes did."""

    path: str
    memory: Memory
    directory: Path
    #: dia_id → ids of the facts made of that message (what counts as recalling it).
    made: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: Wall time of each session's write call, in ms.
    ms: list[float] = field(default_factory=list)
    #: "<kind> <action>" → results (capture: kind turn or fact; whole: fact).
    actions: Counter[str] = field(default_factory=Counter)
    standing_for_turns: int = 0
    live: int = 0
    live_turns: int = 0
    by_decay_class: Counter[str] = field(default_factory=Counter)
    by_category: Counter[str] = field(default_factory=Counter)
    disk_bytes: int = 0

    def close(self) -> None:
        stats = self.memory.stats()
        self.live, self.live_turns = stats.current, stats.by_decay_class.get("turn", 0)
        self.by_decay_class.update(stats.by_decay_class)
        self.by_category.update(stats.by_category)
        self.memory.close()
        self.disk_bytes = sum(
            (Path(top) / name).stat().st_size
            for top, _, names in os.walk(self.directory)
            for name in names
        )


def write_conversation(
    root: Path,
    sample: Sample,
    paths: Sequence[str],
    embedder: Embedder,
    settings: Settings,
    keep: Keep,
) -> dict[str, Written]:
    """Each path's namespace for ``sample``, its sessions written in turn (alternating which
    path goes first)."""
    namespace = f"c{sample.index}"
    out = {}
    for path in paths:
        memory = Memory.open(root / path, namespace=namespace, embedder=embedder, settings=settings)
        out[path] = Written(path, memory, root / path / namespace)
    for s_i, session in enumerate(sample.sessions):
        episode = {"id": f"c{sample.index}/session-{session.number}", "time": session.time}
        for path in paths if s_i % 2 == 0 else paths[::-1]:
            write_session(out[path], session, episode, keep)
    return out


def write_session(w: Written, session: Session, episode: dict[str, Any], keep: Keep) -> None:
    if w.path == "capture":
        began = time.perf_counter()
        results = w.memory.capture(session.messages, episode=episode, keep=keep)
        w.ms.append(1000 * (time.perf_counter() - began))
        for r in results:
            w.actions[f"{r.kind} {r.action}"] += 1
            if r.fact is not None:
                w.made[session.dia_ids[r.message]].add(r.fact.id)
            if keep == "conversation" and r.kind == "fact" and r.turn_id is None:
                w.standing_for_turns += r.action in ("ADD", "UPDATE")
        return
    items = [{"text": m["content"]} for m in session.messages]
    began = time.perf_counter()
    stored = w.memory.store_many(items, episode=episode)
    w.ms.append(1000 * (time.perf_counter() - began))
    for dia_id, s in zip(session.dia_ids, stored, strict=True):
        w.actions[f"fact {s.action}"] += 1
        if s.fact is not None:
            w.made[dia_id].add(s.fact.id)


# --------------------------------------------------------------------------------- recall


@dataclass
class Replay:
    """Recall's steps for one question, as ``Memory.recall`` takes them: the search hits (id,
    kind), the facts of the entities named, the candidates above the score floor, those left
    once a fact and its turn are one, and the block."""

    hits: list[tuple[str, str]]
    named: set[str]
    ranked: list[str]
    merged: list[str]
    merged_kinds: list[str]
    block: list[str]


def ask(sample: Sample, written: dict[str, Written]) -> list[dict[str, Any]]:
    """Every question recalled on each path: one record per question and path, with the stage
    at which each evidence turn was lost (or "in the block")."""
    out = []
    for number, q in enumerate(sample.questions):
        for path, w in written.items():
            result = w.memory.recall(q.text, max_tokens=BUDGET)
            kinds = {f.id: f.kind for f in result.facts}
            shown = set(kinds)
            replay = replayed(w.memory, q.text)
            stages = {d: _stage(w, d, replay, shown) for d in sorted(q.gold)}
            out.append(
                {
                    "conversation": sample.index,
                    "path": path,
                    "number": number,
                    "question": q.text,
                    "category": q.category,
                    "gold": sorted(q.gold),
                    "found": sorted(d for d in q.gold if w.made.get(d, set()) & shown),
                    "stages": stages,
                    # whether each evidence turn found was shown as its turn or as a fact only
                    "shown_as": {
                        d: "turn" if any(kinds.get(i) == "turn" for i in w.made[d]) else "fact"
                        for d in q.gold
                        if w.made.get(d, set()) & shown
                    },
                    "hit_rank": {
                        d: _first(w.made.get(d, set()), [h for h, _ in replay.hits]) for d in q.gold
                    },
                    "merged_rank": {d: _first(w.made.get(d, set()), replay.merged) for d in q.gold},
                    "items": len(result.items),
                    "turn_items": sum(1 for k in kinds.values() if k == "turn"),
                    "tokens": result.tokens,
                    "line_chars": sum(len(i.line) for i in result.items),
                    "fact_line_chars": sum(len(i.line) for i in result.items if i.kind == "fact"),
                    "omitted": result.omitted,
                    "hits": len(replay.hits),
                    "fact_hits": sum(1 for _, k in replay.hits if k == "fact"),
                    "ranked": len(replay.ranked),
                    "merged": len(replay.merged),
                    # facts (not turns) ranked above each evidence turn once merged
                    "facts_ahead": {
                        d: replay.merged_kinds[:rank].count("fact")
                        for d in q.gold
                        if (rank := _first(w.made.get(d, set()), replay.merged)) is not None
                    },
                    "replay_matches": replay.block == [f.id for f in result.facts],
                    "said": {d: sample.said[d][:160] for d in q.gold},
                }
            )
    return out


def replayed(memory: Memory, question: str) -> Replay:
    """``Memory.recall(question, max_tokens=BUDGET)`` step by step (the bench reads the same
    internals recall does; the record says whether the block came out the same)."""
    scope = memory._scope(None, None)
    hits = memory._search.run(
        question,
        scope,
        Filters(),
        limit=recalls.CANDIDATES,
        mode="hybrid",
        graph_depth=0,
        episode_links=True,
        time_hints=True,
    )
    store = memory._store
    named = store.entity_facts(
        recalls.entity_names(question), scope, per_entity=recalls.ENTITY_FACTS
    )
    ranked = recalls.ranked(
        recalls.candidates(hits), named, store.pinned(scope, limit=recalls.PINNED)
    )
    visible = store.visible([c.fact.id for c in ranked], scope, Filters())
    ranked = [c for c in ranked if c.fact.id in visible]
    merged = recalls.merged(ranked, store.drawn_from([c.fact.id for c in ranked]))
    block = recalls.assemble(merged, BUDGET, "full", memory._count_tokens())
    return Replay(
        [(h.fact.id, h.fact.kind) for h in hits],
        {f.id for f in named},
        [c.fact.id for c in ranked],
        [c.fact.id for c in merged],
        [c.fact.kind for c in merged],
        [f.id for f in block.facts],
    )


def _stage(w: Written, dia_id: str, replay: Replay, shown: set[str]) -> str:
    ids = w.made.get(dia_id, set())
    if ids & shown:
        return "in the block"
    if not ids:
        return "not kept"
    if not w.memory.get_many(ids):
        return "kept, not live"
    if not ids & ({h for h, _ in replay.hits} | replay.named):
        return "not a candidate"
    if not ids & set(replay.ranked):
        return "under the score floor"
    return "over the budget"


def _first(ids: set[str], order: Sequence[str]) -> int | None:
    return next((i for i, x in enumerate(order) if x in ids), None)


# --------------------------------------------------------------------------------- metrics


def quality(records: Sequence[dict[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """recall_frac and all_in_block per path, half and category."""
    out: dict[str, Any] = {}
    for path in paths:
        out[path] = {}
        for half, members in _halves(records):
            chosen = [r for r in records if r["path"] == path and r["conversation"] in members]
            groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in chosen:
                groups[CATEGORIES[r["category"]]].append(r)
                groups["overall"].append(r)
            out[path][half] = {
                cat: {
                    "recall_frac": mean(len(r["found"]) / len(r["gold"]) for r in groups[cat]),
                    "all_in_block": mean(float(r["found"] == r["gold"]) for r in groups[cat]),
                    "questions": len(groups[cat]),
                }
                for cat in [*CATEGORIES.values(), "overall"]
                if groups[cat]
            }
    return out


def written_summary(
    samples: Sequence[Sample],
    writes: Sequence[Written],
    records: Sequence[dict[str, Any]],
    path: str,
) -> dict[str, Any]:
    """What one path wrote: results by kind and action, facts live at the end, and the share
    of the evidence turns it kept anything of."""
    actions: Counter[str] = Counter()
    for w in writes:
        actions.update(w.actions)
    gold = {(r["conversation"], d) for r in records if r["path"] == path for d in r["gold"]}
    made = {s.index: w.made for s, w in zip(samples, writes, strict=True)}
    return {
        "turns_in_conversations": sum(s.turns for s in samples),
        "sessions": sum(len(s.sessions) for s in samples),
        "results": dict(sorted(actions.items())),
        "turns_written": actions["turn ADD"],
        "facts_written": actions["fact ADD"] + actions["fact UPDATE"],
        "facts_standing_for_their_turn": sum(w.standing_for_turns for w in writes),
        "live_facts": sum(w.live for w in writes),
        "live_turns": sum(w.live_turns for w in writes),
        "live_by_decay_class": dict(sum((w.by_decay_class for w in writes), Counter())),
        "live_by_category": dict(sum((w.by_category for w in writes), Counter())),
        "evidence_turns": len(gold),
        "evidence_turns_kept": mean(float(bool(made[c].get(d))) for c, d in gold),
    }


def cost(
    samples: Sequence[Sample], writes: dict[str, list[Written]], paths: Sequence[str]
) -> dict[str, Any]:
    """ms per session (mean, p50), total write seconds and disk bytes per 1,000 turns, per
    path; with both, capture's cost as a multiple of the whole path's."""
    turns = sum(s.turns for s in samples)
    out: dict[str, Any] = {}
    for path in paths:
        ms = [m for w in writes[path] for m in w.ms]
        out[path] = {
            "ms_per_session": mean(ms),
            "p50_ms_per_session": statistics.median(ms),
            "write_seconds": sum(ms) / 1000,
            "disk_bytes": sum(w.disk_bytes for w in writes[path]),
            "disk_bytes_per_1000_turns": 1000 * sum(w.disk_bytes for w in writes[path]) / turns,
        }
    if len(paths) == 2:
        pairs = [
            (a, b)
            for wa, wb in zip(writes["capture"], writes["whole"], strict=True)
            for a, b in zip(wa.ms, wb.ms, strict=True)
        ]
        twenty = [
            a / b for (a, b), n in zip(pairs, _session_sizes(samples), strict=True) if 15 <= n <= 25
        ]
        out["capture_over_whole"] = {
            "mean_ms": out["capture"]["ms_per_session"] / out["whole"]["ms_per_session"],
            "p50_of_session_ratios": statistics.median(a / b for a, b in pairs),
            "p50_ratio_sessions_of_15_to_25_turns": statistics.median(twenty) if twenty else None,
            "sessions_of_15_to_25_turns": len(twenty),
            "disk": out["capture"]["disk_bytes"] / out["whole"]["disk_bytes"],
        }
    return out


def blocks(records: Sequence[dict[str, Any]], path: str) -> dict[str, float]:
    """The blocks' make-up: items, turn lines among them, tokens, candidates left out."""
    mine = [r for r in records if r["path"] == path]
    found = [(d, r["shown_as"][d]) for r in mine for d in r["found"]]
    return {
        "items": mean(r["items"] for r in mine),
        "turn_items": mean(r["turn_items"] for r in mine),
        "tokens": mean(r["tokens"] for r in mine),
        "chars_per_line": sum(r["line_chars"] for r in mine)
        / max(1, sum(r["items"] for r in mine)),
        "fact_lines_share_of_chars": sum(r["fact_line_chars"] for r in mine)
        / max(1, sum(r["line_chars"] for r in mine)),
        "omitted_for_room": mean(r["omitted"] for r in mine),
        "hits": mean(r["hits"] for r in mine),
        "fact_hits": mean(r["fact_hits"] for r in mine),
        "above_floor": mean(r["ranked"] for r in mine),
        "after_merge": mean(r["merged"] for r in mine),
        # a turn drawn from is shown as the turn when both are candidates: how often not
        "evidence_found_shown_as_fact_only": (
            mean(float(k == "fact") for _, k in found) if path == "capture" else float("nan")
        ),
        "replay_matches": mean(float(r["replay_matches"]) for r in mine),
    }


def losses(records: Sequence[dict[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """Where each path's evidence turns were lost, and for those the capture path misses and
    the whole path finds: the capture stage, the ranks on both paths, and examples."""
    out: dict[str, Any] = {}
    for path in paths:
        out[path] = dict(
            Counter(s for r in records if r["path"] == path for s in r["stages"].values())
        )
    if len(paths) < 2:
        return out
    whole = {(r["conversation"], r["number"]): r for r in records if r["path"] == "whole"}
    missed = []
    for r in records:
        if r["path"] != "capture":
            continue
        other = whole[(r["conversation"], r["number"])]
        for d, stage in r["stages"].items():
            if stage != "in the block" and other["stages"][d] == "in the block":
                missed.append(
                    {
                        "conversation": r["conversation"],
                        "category": CATEGORIES[r["category"]],
                        "question": r["question"],
                        "evidence": d,
                        "said": r["said"][d],
                        "stage": stage,
                        "capture_hit_rank": r["hit_rank"][d],
                        "capture_merged_rank": r["merged_rank"][d],
                        "capture_items": r["items"],
                        "capture_facts_ahead": r["facts_ahead"].get(d),
                        "whole_hit_rank": other["hit_rank"][d],
                        "whole_merged_rank": other["merged_rank"][d],
                        "whole_items": other["items"],
                    }
                )
    out["capture_misses_whole_finds"] = {
        "count": len(missed),
        "stages": dict(Counter(m["stage"] for m in missed)),
        "by_category": dict(Counter(m["category"] for m in missed)),
        "stages_by_category": {
            cat: dict(Counter(m["stage"] for m in missed if m["category"] == cat))
            for cat in CATEGORIES.values()
        },
        "over_budget_facts_ahead_mean": mean(
            m["capture_facts_ahead"] for m in missed if m["stage"] == "over the budget"
        ),
        "over_budget_merged_rank_p50": _median(
            m["capture_merged_rank"] for m in missed if m["stage"] == "over the budget"
        ),
        "whole_hit_rank_p50": _median(m["whole_hit_rank"] for m in missed),
        "examples": random.Random(59).sample(missed, min(EXAMPLES, len(missed))),
    }
    capture = {(r["conversation"], r["number"]): r for r in records if r["path"] == "capture"}
    out["whole_misses_capture_finds"] = sum(
        1
        for key, r in whole.items()
        for d, stage in r["stages"].items()
        if stage != "in the block" and capture[key]["stages"][d] == "in the block"
    )
    return out


def _median(values: Iterator[int | None] | Sequence[int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _session_sizes(samples: Sequence[Sample]) -> list[int]:
    return [len(s.messages) for sample in samples for s in sample.sessions]


def _halves(records: Sequence[dict[str, Any]]) -> list[tuple[str, range | set[int]]]:
    present = {r["conversation"] for r in records}
    out: list[tuple[str, range | set[int]]] = [
        (name, members) for name, members in HALVES.items() if present & set(members)
    ]
    return [*out, ("all", present)]


def _frac(records: Sequence[dict[str, Any]], path: str, conversation: int) -> float:
    return mean(
        len(r["found"]) / len(r["gold"])
        for r in records
        if r["path"] == path and r["conversation"] == conversation
    )


# --------------------------------------------------------------------------------- report


def summary_markdown(report: dict[str, Any]) -> str:
    config = report["config"]
    cats = list(CATEGORIES.values())
    lines = [
        f"LoCoMo capture, embedder {config['embedder']}, keep {config['keep']}, conversations "
        f"{config['samples'][0]}-{config['samples'][1]}, recall at {config['max_tokens']} tokens "
        "(categories in the official numbering)",
        "",
        markdown_table(
            ["path", "half", "questions", "recall_frac", *cats, "all_in_block"],
            [
                [
                    path,
                    half,
                    by["overall"]["questions"],
                    by["overall"]["recall_frac"],
                    *(by[c]["recall_frac"] if c in by else float("nan") for c in cats),
                    by["overall"]["all_in_block"],
                ]
                for path, halves in report["quality"].items()
                for half, by in halves.items()
            ],
        ),
        "",
        markdown_table(
            [
                "path",
                "turns",
                "turns written",
                "facts written",
                "of which whole messages",
                "live facts",
                "evidence turns kept",
            ],
            [
                [
                    path,
                    w["turns_in_conversations"],
                    w["turns_written"],
                    w["facts_written"],
                    w["facts_standing_for_their_turn"],
                    w["live_facts"],
                    w["evidence_turns_kept"],
                ]
                for path, w in report["written"].items()
            ],
        ),
        "",
        markdown_table(
            ["path", "ms/session", "p50 ms/session", "write s", "disk bytes per 1,000 turns"],
            [
                [
                    path,
                    f"{c['ms_per_session']:.1f}",
                    f"{c['p50_ms_per_session']:.1f}",
                    f"{c['write_seconds']:.1f}",
                    f"{c['disk_bytes_per_1000_turns']:,.0f}",
                ]
                for path, c in report["cost"].items()
                if path in PATHS
            ],
        ),
    ]
    ratio = report["cost"].get("capture_over_whole")
    if ratio:
        lines += [
            "",
            f"capture / store_many: mean ms {ratio['mean_ms']:.2f}x, p50 of session ratios "
            f"{ratio['p50_of_session_ratios']:.2f}x, sessions of 15-25 turns "
            f"{ratio['p50_ratio_sessions_of_15_to_25_turns'] or float('nan'):.2f}x "
            f"(n={ratio['sessions_of_15_to_25_turns']}), disk {ratio['disk']:.2f}x",
        ]
    lines += [
        "",
        markdown_table(
            ["path", *report["blocks"][next(iter(report["blocks"]))]],
            [[path, *b.values()] for path, b in report["blocks"].items()],
        ),
        "",
        markdown_table(
            ["path", *STAGES],
            [
                [path, *(report["losses"][path].get(s, 0) for s in STAGES)]
                for path in report["config"]["paths"]
            ],
        ),
    ]
    both = report["losses"].get("capture_misses_whole_finds")
    if both:
        lines += [
            "",
            f"evidence turns capture misses and store-whole finds: {both['count']} "
            f"(store-whole misses and capture finds: {report['losses']['whole_misses_capture_finds']}); "
            f"stages {both['stages']}; by category {both['by_category']}; over-budget merged "
            f"rank p50 {both['over_budget_merged_rank_p50']}, store-whole hit rank p50 "
            f"{both['whole_hit_rank_p50']}",
            "",
            markdown_table(
                [
                    "conv",
                    "category",
                    "evidence",
                    "stage",
                    "capture hit/merged/items",
                    "whole hit/merged/items",
                    "question",
                    "said",
                ],
                [
                    [
                        m["conversation"],
                        m["category"],
                        m["evidence"],
                        m["stage"],
                        f"{m['capture_hit_rank']}/{m['capture_merged_rank']}/{m['capture_items']}",
                        f"{m['whole_hit_rank']}/{m['whole_merged_rank']}/{m['whole_items']}",
                        m["question"],
                        m["said"][:80].replace("|", "/"),
                    ]
                    for m in both["examples"]
                ],
            ),
        ]
    return "\n".join(lines)


def _span(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.capture", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--samples",
        type=_span,
        default=None,
        help="conversations A-B (0-based, inclusive), e.g. 0-4; default all ten",
    )
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--path", choices=(*PATHS, "both"), default="both")
    parser.add_argument(
        "--keep",
        choices=KEEPS,
        default="conversation",
        help="what capture keeps (Memory.capture's keep)",
    )
    parser.add_argument(
        "--speakers",
        action="store_true",
        help="each message's text after its speaker's name (\"Caroline: ...\"), as the "
        "retrieval benches store LoCoMo's turns",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="recall leads each block with the profiles the question names (recall_profile)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    args.keep = cast(Keep, args.keep)
    return args


if __name__ == "__main__":
    raise SystemExit(main())
