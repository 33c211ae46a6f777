"""Classify-before-write by an LLM: ADD, UPDATE, DELETE or NOOP for each new fact of a batch.

1. For each new fact, the live facts most like it are found: its nearest vectors, and the facts
   with the same entity and key (:func:`similar_facts`).
2. One chat request carries up to ``llm_batch_size`` new facts with those existing facts, and
   asks for strict JSON (:func:`classify`): a batch of 20 facts is one request, not 20.
3. The decisions are applied inside the write transaction by :mod:`graphmem.dedup`: UPDATE
   supersedes the target, DELETE retracts it (the new text is not stored), NOOP stores nothing.
4. The same answer may draw typed links from a new fact to listed facts (``links``: CAUSED_BY,
   DEPENDS_ON or PART_OF, with a reason); the writer stores them with the fact, origin
   ``classifier``, the reason in the link's metadata. An entry naming an unknown type, fact or
   target is ignored; no second request is ever made for them.

A new fact with no similar facts is added without asking; one repeating a live fact's text is
left to dedup, which makes it a NOOP. Anything that goes wrong falls back to ADD, with the
reason in the write's result (and the log): nothing is ever lost to the classifier.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, get_args

from .dedup import normalized_hash
from .errors import InvalidInput, LLMError
from .llm import ChatClient, answer_list, answer_object
from .models import Action, Fact, FactInput, Verdict
from .temporal import TimeScope, parse_time, to_iso

if TYPE_CHECKING:
    from .storage.interface import Store

#: Nearest live facts (by vector) shown to the model for each new fact.
SIMILAR_FACTS: Final = 5
#: Live facts with the new fact's entity and key shown besides (newest first).
SAME_KEY_FACTS: Final = 3

SYSTEM_PROMPT: Final = """\
You keep the long-term memory of an AI agent. New facts are about to be stored. For each new \
fact, compare it with the existing facts listed as similar to it and choose one action:
- ADD: new information; store it beside the existing facts.
- UPDATE: a newer or corrected version of one existing fact (the world changed, or it was \
wrong); that fact is replaced. target = its id.
- DELETE: the new statement withdraws one existing fact ("forget that…", "that is no longer \
true") without stating a replacement; that fact is removed and nothing is stored. target = its id.
- NOOP: one existing fact already says the same; nothing is stored. target = its id.
Facts that can hold together (two hobbies, two children) are both ADD.
Answer with one JSON object and nothing else:
{"decisions": [{"fact": <index of the new fact>, "action": "ADD"|"UPDATE"|"DELETE"|"NOOP", \
"target": <id of an existing fact, or null for ADD>, "reason": <a few words>}]}
Give exactly one decision for every new fact. When a new fact's text says when it became true \
("in 2019", "since May 2023"), add "valid_from": <that date as YYYY-MM-DD> to its decision.
Also, when a new fact is caused by, depends on, or is a part of a listed existing fact, add a \
link (only for these three relations, only when the facts say so):
{"decisions": [...], "links": [{"fact": <index of the new fact>, "target": <id of an existing \
fact>, "type": "CAUSED_BY"|"DEPENDS_ON"|"PART_OF", "reason": <a few words>}]}"""

#: The link types the classifier may draw (its answer's ``links``).
LINK_TYPES: Final = ("CAUSED_BY", "DEPENDS_ON", "PART_OF")

_ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
_log = logging.getLogger("graphmem.classify")


def similar_facts(
    store: Store,
    inputs: Sequence[FactInput],
    neighbours: Sequence[Sequence[tuple[str, float]]],
    now: float,
) -> list[list[Fact]]:
    """For each new fact: the live facts to show the model (nearest first, then same key)."""
    scope = TimeScope(now, now)
    wanted = {fact_id for hits in neighbours for fact_id, _ in hits[:SIMILAR_FACTS]}
    facts = store.get_many(sorted(wanted), scope)
    out: list[list[Fact]] = []
    for x, hits in zip(inputs, neighbours, strict=True):
        found = {fact_id: facts[fact_id] for fact_id, _ in hits[:SIMILAR_FACTS] if fact_id in facts}
        if x.entity and x.key:
            for fact in store.latest(x.entity, x.key, scope, limit=SAME_KEY_FACTS):
                found.setdefault(fact.id, fact)
        out.append(list(found.values()))
    return out


def repeats(store: Store, inputs: Sequence[FactInput], now: float, fuzzy: bool) -> set[int]:
    """Positions of the new facts that dedup will make NOOPs (the text of a live fact, or its
    normalised text when ``fuzzy``): nothing to ask the model about."""
    hashes = [normalized_hash(x.text) for x in inputs]
    live = store.texts_by_hash(sorted(set(hashes)), TimeScope(now, now))
    return {
        i
        for i, (x, h) in enumerate(zip(inputs, hashes, strict=True))
        if x.dedup and h in live and (fuzzy or x.text in live[h])
    }


def classify(
    chat: ChatClient,
    inputs: Sequence[FactInput],
    similar: Sequence[Sequence[Fact]],
    batch_size: int,
) -> list[Verdict]:
    """A verdict per new fact, in order: one chat request per ``batch_size`` facts that have
    similar facts, answered as strict JSON::

        {"decisions": [{"fact": 0, "action": "UPDATE", "target": "E2", "reason": "moved"}, ...]}

    Existing facts travel under short references (``E1``, ``E2``…) rather than their UUIDs:
    fewer tokens, and fewer ids for the model to mangle. Never raises: the facts concerned fall
    back to ADD, the reason in their verdict, when the request fails after its retries, the
    answer is not JSON or not that shape, an action is unknown, a target names no listed fact,
    or the answer leaves a fact out."""
    verdicts: list[Verdict] = [Verdict("ADD", None, "no similar facts") for _ in inputs]
    asked = [i for i, rows in enumerate(similar) if rows]
    for start in range(0, len(asked), batch_size):
        chunk = asked[start : start + batch_size]
        answers = _ask(chat, [inputs[i] for i in chunk], [similar[i] for i in chunk])
        for i, verdict in zip(chunk, answers, strict=True):
            verdicts[i] = verdict
    return verdicts


def _ask(
    chat: ChatClient, inputs: Sequence[FactInput], similar: Sequence[Sequence[Fact]]
) -> list[Verdict]:
    refs: dict[str, str] = {}  # E1 → fact id
    existing: list[dict[str, Any]] = []
    by_id: dict[str, str] = {}
    for facts in similar:
        for f in facts:
            if f.id not in by_id:
                ref = by_id[f.id] = f"E{len(by_id) + 1}"
                refs[ref] = f.id
                existing.append(
                    _described(
                        {
                            "id": ref,
                            "text": f.text,
                            "entity": f.entity,
                            "key": f.key,
                            "value": f.value,
                            "valid_from": to_iso(f.valid_from.timestamp()),
                        }
                    )
                )
    new = [
        _described(
            {
                "fact": n,
                "text": x.text,
                "entity": x.entity,
                "key": x.key,
                "value": x.value,
                "similar": [by_id[f.id] for f in facts],
            }
        )
        for n, (x, facts) in enumerate(zip(inputs, similar, strict=True))
    ]
    question = json.dumps({"existing_facts": existing, "new_facts": new}, ensure_ascii=False)
    try:
        answer = answer_object(chat.complete_json(SYSTEM_PROMPT, question))
        decisions = answer_list(answer, "decisions")
    except LLMError as exc:
        _log.warning("classification of %d facts fell back to ADD: %s", len(inputs), exc.message)
        return [_fallback(exc.message) for _ in inputs]
    verdicts = [_fallback("the answer gave no decision for this fact") for _ in inputs]
    decided: set[int] = set()
    for item in decisions:
        index, verdict = _verdict(item, refs, len(inputs))
        if index is None or index in decided:
            continue
        decided.add(index)
        verdicts[index] = verdict
    for index, drawn in _links(answer.get("links"), refs, len(inputs)).items():
        verdicts[index] = dataclasses.replace(verdicts[index], links=tuple(drawn))
    if missing := [n for n, v in enumerate(verdicts) if v.fallback]:
        _log.warning(
            "classifier fell back to ADD for facts %s of a batch of %d: %s",
            missing,
            len(inputs),
            "; ".join({verdicts[n].reason for n in missing}),
        )
    return verdicts


def _links(items: Any, refs: dict[str, str], count: int) -> dict[int, list[tuple[str, str, str]]]:
    """The typed links of an answer by new fact: (target id, type, reason); an entry with an
    unknown type, fact or target is ignored, as is a repeat."""
    out: dict[int, list[tuple[str, str, str]]] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        index, target, kind = item.get("fact"), item.get("target"), item.get("type")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            continue
        kind = kind.upper() if isinstance(kind, str) else None
        if kind not in LINK_TYPES or not isinstance(target, str) or target not in refs:
            continue
        reason = item.get("reason")
        reason = reason.strip()[:500] if isinstance(reason, str) else ""
        drawn = out.setdefault(index, [])
        if all((refs[target], kind) != (t, k) for t, k, _ in drawn):
            drawn.append((refs[target], kind, reason))
    return out


def _verdict(item: Any, refs: dict[str, str], count: int) -> tuple[int | None, Verdict]:
    """The fact index an answer entry is about (None if it names none) and its verdict; an
    entry that breaks the rules gives a fallback verdict for its fact."""
    index = item.get("fact") if isinstance(item, dict) else None
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        return None, _fallback("")
    verdict = _decided(item, refs)
    return index, dataclasses.replace(verdict, valid_from=_stated_start(item.get("valid_from")))


def _decided(item: dict[str, Any], refs: dict[str, str]) -> Verdict:
    raw = item.get("action")
    action = next((a for a in _ACTIONS if isinstance(raw, str) and raw.upper() == a), None)
    reason = item.get("reason")
    reason = f"llm: {reason.strip()[:500]}" if isinstance(reason, str) and reason.strip() else "llm"
    target = item.get("target")
    if action is None:
        return _fallback(f"unknown action {raw!r}")
    if action == "ADD":
        return Verdict("ADD", None, reason)
    if not isinstance(target, str) or target not in refs:
        return _fallback(f"{action} names {target!r}, which is not a listed fact")
    return Verdict(action, refs[target], reason)


def _stated_start(value: Any) -> float | None:
    """An answer's ``valid_from`` (when the fact's text says it became true) as epoch seconds;
    None when absent or not a time graphmem reads."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parse_time(value.strip())
    except InvalidInput:
        return None


def _fallback(why: str) -> Verdict:
    return Verdict("ADD", None, f"classifier fell back to ADD: {why}", fallback=True)


def _described(fields: dict[str, Any]) -> dict[str, Any]:
    """A fact for the prompt, without empty fields."""
    return {k: v for k, v in fields.items() if v is not None and v != []}
