"""Reflection: patterns synthesised from many recent facts, then rules from the patterns, by the
chat model in one request each.

1. The facts recorded in the last ``window_days`` (at most ``PER_CATEGORY`` of each category,
   the newest; no patterns, rules or checkpoints) are listed under short names, ``E1``, ``E2``…,
   as the classifier names existing facts.
2. One request asks for patterns, each backed by at least two listed facts
   (:data:`PATTERNS_PROMPT`); the answer is ``{"patterns": [{"text": …, "evidence": ["E1",
   "E4"]}]}``. An entry with fewer than two valid evidence names, or without text, is ignored;
   a pattern within cosine ``DUPLICATE_SIMILARITY`` of a live pattern (or of one found before it
   in the same answer) is skipped.
3. Each pattern is stored as category ``pattern``, importance 0.9, decay class ``permanent``,
   source ``reflection``, with a DEPENDS_ON link (origin ``reflection``) to each fact it was drawn
   from: the pattern holds only as long as its evidence does, which is what DEPENDS_ON says
   (``dependency_order`` puts the evidence first, and a caller who forgets the evidence finds the
   pattern among its dependants).
4. If any pattern was stored, one more request asks for rules from the new patterns (``P1``,
   ``P2``…), answered as ``{"rules": [{"text": …, "evidence": ["P1"]}]}``: short imperative
   sentences, category ``rule``, each linked DEPENDS_ON to the patterns it names (at least one);
   a rule within the same cosine of a live rule is skipped.

A failed, late or malformed answer stores nothing from that request and is reported (``error``);
reflecting over fewer than two facts asks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from .jsonform import json_fields
from .limits import MAX_TEXT_LENGTH
from .llm import ChatClient, ask_list
from .models import Fact, LinkOrigin, StoreResult
from .temporal import to_iso

if TYPE_CHECKING:
    from .models import Vectors
    from .storage.interface import Transaction

#: Facts of each category a reflection reads at most (the newest).
PER_CATEGORY: Final = 50
#: Cosine at or above which a new pattern (rule) repeats an existing one and is skipped.
DUPLICATE_SIMILARITY: Final = 0.85
#: Patterns (and rules) one reflection stores at most.
MAX_FOUND: Final = 20
#: Live patterns (rules) compared with the new ones at most (the newest).
MAX_COMPARED: Final = 1_000
#: Categories a reflection writes, and does not read.
PATTERN: Final = "pattern"
RULE: Final = "rule"
SOURCE: Final = "reflection"
IMPORTANCE: Final = 0.9

PATTERNS_PROMPT: Final = """\
You keep the long-term memory of an AI agent. Below are facts it recorded recently, each under a \
name (E1, E2, …). Find patterns: recurring behaviours, preferences, habits, problems or themes \
that several facts show together, stated as one general sentence each. Every pattern must be \
backed by at least two of the listed facts; do not restate a single fact.
Answer with one JSON object and nothing else:
{"patterns": [{"text": <the pattern, one sentence>, "evidence": [<names of the facts that show \
it, e.g. "E1", "E4">]}]}
At most 10 patterns; {"patterns": []} when there are none."""

RULES_PROMPT: Final = """\
You keep the long-term memory of an AI agent. Below are patterns found in its memory, each under \
a name (P1, P2, …). Turn them into rules the agent should follow from now on: short imperative \
sentences ("Ask before deleting files.", "Answer in French."), each drawn from one or more of the \
patterns. Skip patterns that suggest no rule.
Answer with one JSON object and nothing else:
{"rules": [{"text": <the rule, one short imperative sentence>, "evidence": [<names of the \
patterns it comes from, e.g. "P2">]}]}
{"rules": []} when there are none."""


@dataclass
class ReflectReport:
    """What a reflection stored — the new patterns and rules (facts) — how many chat requests
    it made, how many answer entries it passed over (too little evidence, no text, a
    repeat), and why a request's answer was not used."""

    patterns: list[Fact] = field(default_factory=list)
    rules: list[Fact] = field(default_factory=list)
    requests: int = 0
    ignored: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return json_fields(
            self,
            patterns=[{"id": f.id, "text": f.text} for f in self.patterns],
            rules=[{"id": f.id, "text": f.text} for f in self.rules],
        )


#: Writes new facts — (items, then(tx, results)) — and returns their results.
Write = Callable[
    [list[dict[str, Any]], Callable[["Transaction", list[StoreResult]], None]], list[StoreResult]
]


@dataclass(frozen=True, slots=True)
class Found:
    """An answer entry kept: its text and the facts it names."""

    text: str
    evidence: tuple[Fact, ...]


def reflect(
    chat: ChatClient,
    facts: Sequence[Fact],
    existing: Callable[[str], Sequence[Fact]],
    embed: Callable[[Sequence[str]], Vectors],
    write: Write,
) -> ReflectReport:
    """Patterns among ``facts``, then rules from them (see the module's steps): ``existing(c)``
    gives the live facts of category ``c`` to compare with, ``embed`` their vectors, ``write``
    stores."""
    report = ReflectReport()
    if len(facts) < 2:
        return report
    listed = {f"E{n}": f for n, f in enumerate(facts, 1)}
    found = _ask(chat, PATTERNS_PROMPT, "patterns", _listing(listed), listed, 2, report)
    found = _new(found, existing(PATTERN), embed, report)
    if not found:
        return report
    report.patterns = _store(write, found, PATTERN)
    named = {f"P{n}": f for n, f in enumerate(report.patterns, 1)}
    question = {"patterns": [{"name": name, "text": f.text} for name, f in named.items()]}
    rules = _ask(chat, RULES_PROMPT, "rules", question, named, 1, report)
    report.rules = _store(write, _new(rules, existing(RULE), embed, report), RULE)
    return report


def _listing(listed: dict[str, Fact]) -> dict[str, Any]:
    facts = []
    for name, f in listed.items():
        item = {"name": name, "text": f.text, "category": f.category, "entity": f.entity}
        item["recorded_at"] = to_iso(f.recorded_at.timestamp())
        facts.append({k: v for k, v in item.items() if v is not None})
    return {"facts": facts}


def _ask(
    chat: ChatClient,
    prompt: str,
    key: str,
    question: dict[str, Any],
    listed: dict[str, Fact],
    least: int,
    report: ReflectReport,
) -> list[Found]:
    """The entries of one request's answer that have text and at least ``least`` valid
    evidence names; a failed or malformed answer gives none and sets ``report.error``."""
    out: list[Found] = []
    for entry in ask_list(chat, prompt, question, key, report, named=True):
        text = entry.get("text") if isinstance(entry, dict) else None
        names = entry.get("evidence") if isinstance(entry, dict) else None
        evidence = (
            [listed[n] for n in dict.fromkeys(names) if isinstance(n, str) and n in listed]
            if isinstance(names, list)
            else []
        )
        if (
            not isinstance(text, str)
            or not text.strip()
            or len(text) > MAX_TEXT_LENGTH
            or len(evidence) < least
            or len(out) >= MAX_FOUND
        ):
            report.ignored += 1
        else:
            out.append(Found(" ".join(text.split()), tuple(evidence)))
    return out


def _new(
    found: list[Found],
    existing: Sequence[Fact],
    embed: Callable[[Sequence[str]], Vectors],
    report: ReflectReport,
) -> list[Found]:
    """``found`` without the entries within DUPLICATE_SIMILARITY of an existing fact or of an
    entry kept before them."""
    if not found:
        return []
    vectors = embed([f.text for f in found] + [f.text for f in existing])
    kept: list[int] = []
    for i in range(len(found)):
        others = [*kept, *range(len(found), len(vectors))]
        if others and float(np.max(vectors[others] @ vectors[i])) >= DUPLICATE_SIMILARITY:
            report.ignored += 1
        else:
            kept.append(i)
    return [found[i] for i in kept]


def _store(write: Write, found: list[Found], category: str) -> list[Fact]:
    if not found:
        return []
    items = [
        {
            "text": f.text,
            "category": category,
            "importance": IMPORTANCE,
            "decay_class": "permanent",
            "source": SOURCE,
            "classify": False,
        }
        for f in found
    ]

    def link(tx: Transaction, results: list[StoreResult]) -> None:
        links = [
            (
                r.fact.id,
                source.id,
                "DEPENDS_ON",
                1.0,
                LinkOrigin.REFLECTION.value,
                max(r.fact.valid_from, source.valid_from).timestamp(),
            )
            for r, f in zip(results, found, strict=True)
            if r.fact is not None and r.action == "ADD"
            for source in f.evidence
        ]
        tx.add_links(links)

    return [r.fact for r in write(items, link) if r.fact is not None and r.action == "ADD"]
