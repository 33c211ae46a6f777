"""Classify-before-write by an LLM: ADD, UPDATE, DELETE or NOOP for each new fact of a batch.

1. For each new fact, the live facts most like it are found: its nearest vectors, and the facts
   with the same entity (under any of its names, :mod:`graphmem.entities`) and key
   (:func:`similar_facts`).
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
reason in the write's result (and the log): nothing is ever lost to the classifier. A turn of
a conversation is never shown as a similar fact: it is an event, nothing supersedes it.

A capture asks once (:func:`draw`): its messages go as turns, with the live facts nearest to
them, and the answer draws the facts itself (text, entity, key, value, category, the time the
text states, the message each comes from), each with its verdict and links as above. An answer
that cannot be used whole raises LLMError: the capture then keeps its trigger facts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, get_args

from .dedup import normalized_hash
from .errors import InvalidInput, LLMError
from .llm import ChatClient, answer_list, answer_object
from .models import Action, Fact, FactInput, Verdict, is_turn
from .sensitive import sensitive
from .temporal import TimeScope, parse_time, to_iso

if TYPE_CHECKING:
    from .entities import Entities
    from .storage.interface import Store

#: Nearest live facts (by vector) shown to the model for each new fact.
SIMILAR_FACTS: Final = 5
#: Nearest vectors fetched to find them: the turns among them are left out.
CANDIDATES: Final = 4 * SIMILAR_FACTS
#: Live facts with the new fact's entity and key shown besides (newest first).
SAME_KEY_FACTS: Final = 3
#: Most facts a capture's answer may draw from one message.
DRAWN_PER_MESSAGE: Final = 10
#: The categories a drawn fact may have, besides those discovered in the namespace (the
#: others are reflection's).
DRAWN_CATEGORIES: Final = ("preference", "fact", "decision", "entity", "other")

#: The actions a verdict chooses from, as both prompts give them.
_CHOICES: Final = """\
- ADD: new information; store it beside the existing facts.
- UPDATE: a newer or corrected version of one existing fact (the world changed, or it was \
wrong); that fact is replaced. target = its id.
- DELETE: the new statement withdraws one existing fact ("forget that…", "that is no longer \
true") without stating a replacement; that fact is removed and nothing is stored. target = its id.
- NOOP: one existing fact already says the same; nothing is stored. target = its id.
Facts that can hold together (two hobbies, two children) are both ADD.
"""
_RELATIONS: Final = "link (only for these three relations, only when the facts say so):\n"

SYSTEM_PROMPT: Final = f"""\
You keep the long-term memory of an AI agent. New facts are about to be stored. For each new \
fact, compare it with the existing facts listed as similar to it and choose one action:
{_CHOICES}\
Answer with one JSON object and nothing else:
{{"decisions": [{{"fact": <index of the new fact>, "action": "ADD"|"UPDATE"|"DELETE"|"NOOP", \
"target": <id of an existing fact, or null for ADD>, "reason": <a few words>}}]}}
Give exactly one decision for every new fact. When a new fact's text says when it became true \
("in 2019", "since May 2023"), add "valid_from": <that date as YYYY-MM-DD> to its decision.
Also, when a new fact is caused by, depends on, or is a part of a listed existing fact, add a \
{_RELATIONS}\
{{"decisions": [...], "links": [{{"fact": <index of the new fact>, "target": <id of an existing \
fact>, "type": "CAUSED_BY"|"DEPENDS_ON"|"PART_OF", "reason": <a few words>}}]}}"""

#: The instructions of a capture's request (:func:`draw`).
DRAW_PROMPT: Final = f"""\
You keep the long-term memory of an AI agent. You are given turns of a conversation between the \
user and the assistant (each with its message number and speaker; the conversation's date is \
given) and the existing facts most like them. Draw from the turns the facts worth remembering: \
what the user tells of themselves and of the people, places, things and events of their life, \
their preferences, plans and decisions, and what the user and the assistant agreed. Each fact \
is one short sentence that stands on its own: it names who it is about (the user is "the \
user") and gives dates as dates. Draw nothing from greetings, questions, small talk or what the \
assistant only suggests; a turn may give no fact, or several (at most {DRAWN_PER_MESSAGE}).
For each fact, compare it with the existing facts and choose one action:
{_CHOICES}\
Answer with one JSON object and nothing else:
{{"facts": [{{"message": <number of the turn it comes from>, "text": <the fact>, \
"entity": <who or what it is about ("user" for the user), or null>, "key": <the attribute it \
gives, in snake_case, or null>, "value": <that attribute's value, or null>, \
"category": {"|".join(f'"{c}"' for c in DRAWN_CATEGORIES)}, \
"valid_from": <when the text says it became true, as YYYY-MM-DD, or null>, \
"action": "ADD"|"UPDATE"|"DELETE"|"NOOP", "target": <id of an existing fact, or null for ADD>, \
"reason": <a few words>}}]}}
Answer {{"facts": []}} when no turn says anything worth keeping.
Also, when a fact is caused by, depends on, or is a part of a listed existing fact, add a \
{_RELATIONS}\
{{"facts": [...], "links": [{{"fact": <position of the fact in your "facts" list, from 0>, \
"target": <id of an existing fact>, "type": "CAUSED_BY"|"DEPENDS_ON"|"PART_OF", \
"reason": <a few words>}}]}}"""

#: The link types the classifier may draw (its answer's ``links``).
LINK_TYPES: Final = ("CAUSED_BY", "DEPENDS_ON", "PART_OF")
#: The fields of a drawn fact its answer gives.
_DRAWN_FIELDS: Final = ("text", "entity", "key", "value", "category")

_ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
_log = logging.getLogger("graphmem.classify")


def similar_facts(
    store: Store,
    inputs: Sequence[FactInput],
    neighbours: Sequence[Sequence[tuple[str, float]]],
    now: float,
    *,
    entities: Entities | None = None,
) -> list[list[Fact]]:
    """For each new fact: the live facts to show the model (nearest first, then same key, under
    any name of its entity in ``entities``), from its ``neighbours`` (up to CANDIDATES nearest
    vectors); never a turn."""
    scope = TimeScope(now, now)
    facts = _facts_among(store, neighbours, scope)
    out: list[list[Fact]] = []
    for x, hits in zip(inputs, neighbours, strict=True):
        found = {f.id: f for f in _nearest(hits, facts)}
        if x.entity and x.key:
            for fact in _same_key(store, entities, x.entity, x.key, scope):
                found.setdefault(fact.id, fact)
        out.append(list(found.values()))
    return out


def shown_facts(
    store: Store,
    neighbours: Sequence[Sequence[tuple[str, float]]],
    keys: Sequence[tuple[str, str]],
    now: float,
    *,
    entities: Entities | None = None,
) -> list[Fact]:
    """The live facts to show the model with a capture's turns: the nearest to each turn (its
    ``neighbours``, as for :func:`similar_facts`), then those with each (entity, key) of
    ``keys``; never a turn."""
    scope = TimeScope(now, now)
    facts = _facts_among(store, neighbours, scope)
    found = {f.id: f for hits in neighbours for f in _nearest(hits, facts)}
    for entity, key in dict.fromkeys(keys):
        for fact in _same_key(store, entities, entity, key, scope):
            found.setdefault(fact.id, fact)
    return list(found.values())


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


def draw(
    chat: ChatClient,
    turns: Sequence[tuple[int, str, str]],
    existing: Sequence[Fact],
    *,
    date: float,
    categories: Collection[str],
    max_chars: int,
) -> list[Drawn]:
    """The facts one chat request draws from a capture's ``turns`` (message number, role,
    text), each with its verdict against the ``existing`` facts (named ``E1``, ``E2``… as for
    :func:`classify`) and its typed links, answered as strict JSON::

        {"facts": [{"message": 0, "text": "The user lives in Porto", "entity": "user",
                    "key": "location", "value": "Porto", "category": "fact",
                    "valid_from": "2023-05-01", "action": "UPDATE", "target": "E2",
                    "reason": "moved"}, ...],
         "links": [{"fact": 0, "target": "E1", "type": "PART_OF", "reason": "..."}]}

    ``date`` is the conversation's (its episode's time), from which the model reads relative
    times. Each fact is validated as any written fact is, its text at most ``max_chars``, its
    category one of DRAWN_CATEGORIES or ``categories``. LLMError, and nothing drawn, when the
    request fails, the answer is not that shape, or any fact is unusable: it names a message
    not sent, has a field too long or an unknown category, holds a secret, or the answer
    draws more than DRAWN_PER_MESSAGE facts a message. A verdict that breaks the rules (an
    unknown action or target) falls back to ADD for its fact alone, as in :func:`classify`."""
    refs, listed = _listed(existing)
    question = {
        "date": (to_iso(date) or "")[:10],
        "turns": [{"message": i, "role": role, "text": text} for i, role, text in turns],
        "existing_facts": listed,
    }
    answer = answer_object(
        chat.complete_json(DRAW_PROMPT, json.dumps(question, ensure_ascii=False))
    )
    items = answer_list(answer, "facts")
    if len(items) > DRAWN_PER_MESSAGE * len(turns):
        raise LLMError(
            f"the answer draws {len(items)} facts from {len(turns)} messages, more than "
            f"{DRAWN_PER_MESSAGE} a message"
        )
    sent = {i for i, _, _ in turns}
    allowed = {*DRAWN_CATEGORIES, *categories}
    drawn = [_drawn_fact(n, item, sent, allowed, max_chars, refs) for n, item in enumerate(items)]
    for index, links in _links(answer.get("links"), refs, len(drawn)).items():
        verdict = dataclasses.replace(drawn[index].verdict, links=tuple(links))
        drawn[index] = dataclasses.replace(drawn[index], verdict=verdict)
    return drawn


def fallback(why: str) -> Verdict:
    """The ADD a fact falls back to when the classifier cannot decide it, saying ``why``."""
    return Verdict("ADD", None, f"classifier fell back to ADD: {why}", fallback=True)


@dataclasses.dataclass(frozen=True, slots=True)
class Drawn:
    """A fact :func:`draw` drew from message number ``message``: its ``fields`` (text, and the
    entity, key, value and category given, as FactInput takes them) and its verdict."""

    message: int
    fields: dict[str, str]
    verdict: Verdict


def _drawn_fact(
    n: int,
    item: Any,
    sent: Collection[int],
    categories: Collection[str],
    max_chars: int,
    refs: dict[str, str],
) -> Drawn:
    """Fact number ``n`` of an answer, checked; LLMError if it cannot be written as drawn."""
    if not isinstance(item, dict):
        raise LLMError(f"fact {n} is not an object")
    message = item.get("message")
    if isinstance(message, bool) or not isinstance(message, int) or message not in sent:
        raise LLMError(f"fact {n} names message {message!r}, which was not sent")
    given = {k: item.get(k) for k in _DRAWN_FIELDS if item.get(k) is not None}
    try:
        x = FactInput.parse(given)
    except InvalidInput as exc:
        raise LLMError(f"fact {n} is not a fact graphmem writes: {exc.message}") from None
    if len(x.text) > max_chars:
        raise LLMError(f"fact {n} is longer than {max_chars} characters (capture_max_chars)")
    if x.category is not None and x.category not in categories:
        raise LLMError(f"fact {n} has the unknown category {x.category!r}")
    fields = {k: v for k in _DRAWN_FIELDS if isinstance(v := getattr(x, k), str)}
    if found := next(filter(None, (sensitive(v) for v in fields.values())), None):
        raise LLMError(f"fact {n} holds {found}")
    verdict = _decided(item, refs)
    return Drawn(
        message,
        fields,
        dataclasses.replace(verdict, valid_from=_stated_start(item.get("valid_from"))),
    )


def _ask(
    chat: ChatClient, inputs: Sequence[FactInput], similar: Sequence[Sequence[Fact]]
) -> list[Verdict]:
    refs, existing = _listed({f.id: f for facts in similar for f in facts}.values())
    by_id = {fact_id: ref for ref, fact_id in refs.items()}
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
        return [fallback(exc.message) for _ in inputs]
    verdicts = [fallback("the answer gave no decision for this fact") for _ in inputs]
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
        return None, fallback("")
    verdict = _decided(item, refs)
    return index, dataclasses.replace(verdict, valid_from=_stated_start(item.get("valid_from")))


def _decided(item: dict[str, Any], refs: dict[str, str]) -> Verdict:
    raw = item.get("action")
    action = next((a for a in _ACTIONS if isinstance(raw, str) and raw.upper() == a), None)
    reason = item.get("reason")
    reason = f"llm: {reason.strip()[:500]}" if isinstance(reason, str) and reason.strip() else "llm"
    target = item.get("target")
    if action is None:
        return fallback(f"unknown action {raw!r}")
    if action == "ADD":
        return Verdict("ADD", None, reason)
    if not isinstance(target, str) or target not in refs:
        return fallback(f"{action} names {target!r}, which is not a listed fact")
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


def _described(fields: dict[str, Any]) -> dict[str, Any]:
    """A fact for the prompt, without empty fields."""
    return {k: v for k, v in fields.items() if v is not None and v != []}


def _listed(facts: Iterable[Fact]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Existing facts for the prompt under short references: (reference → fact id, the facts
    as listed)."""
    refs: dict[str, str] = {}
    listed: list[dict[str, Any]] = []
    for f in facts:
        ref = f"E{len(refs) + 1}"
        refs[ref] = f.id
        listed.append(
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
    return refs, listed


def _facts_among(
    store: Store, neighbours: Sequence[Sequence[tuple[str, float]]], scope: TimeScope
) -> dict[str, Fact]:
    """The live facts among ``neighbours``, by id: turns left out (a turn is an event, never a
    fact to update or repeat)."""
    wanted = sorted({fact_id for hits in neighbours for fact_id, _ in hits})
    return {i: f for i, f in store.get_many(wanted, scope).items() if not is_turn(f.source)}


def _nearest(hits: Sequence[tuple[str, float]], facts: Mapping[str, Fact]) -> list[Fact]:
    return [facts[fact_id] for fact_id, _ in hits if fact_id in facts][:SIMILAR_FACTS]


def _same_key(
    store: Store, entities: Entities | None, entity: str, key: str, scope: TimeScope
) -> list[Fact]:
    names = () if entities is None else entities.names(entity)
    return [
        f
        for f in store.latest(entity, key, scope, limit=SAME_KEY_FACTS, names=names)
        if not is_turn(f.source)
    ]
