"""Profiles: who or what an entity is, as of any moment, from its current facts.

``Memory.profile(name)`` finds the entity a name reaches (:mod:`graphmem.entities`: NotFound
when none does, InvalidInput for a bad name) and reads, in one snapshot at the read's time scope
(``as_of`` and ``known_at``, as every read takes them):

1. its **attributes**: its facts with a key, grouped by key (case-insensitive), each key with
   every value visible at the scope, the latest valid first. A single-valued key holds one (a
   new value supersedes the old); a key of ``multi_valued_keys``, or values written without
   classification, several. At most VALUES_PER_KEY a key, the keys whose most important value
   is the most important first, at most KEYS;
2. its **facts** without a key, the most important then the newest first, at most FACTS;
3. the entities **linked** to it: those whose visible facts a visible link other than
   SUPERSEDES joins to its own, the most links first, each with the types of those links, at
   most LINKED;
4. with ``summary=True`` and a chat model (the ``llm_*`` settings), a **summary** the model
   writes of the entity's names and the facts of 1 and 2 in one request, citing the facts it
   rests on (:func:`summarize`). The model is not shown the linked entities: a summary holds
   nothing but what its own facts and names say, so deleting it with them erases it all.

``truncated`` says whether a bound left something out.

The summary is kept in the store under the entity and a signature of what the model was shown
(facts, names, the prompt and the model), so the model is asked again only when one of them
changes; a purge deletes every summary that was shown a fact it erases. The answer is
``{"summary": text, "facts": [the names of the facts it rests on]}``: names of facts it was not
shown are dropped; an answer that cites none of them, a failed request or an unusable answer
leaves the profile without a summary, saying why (``summary_error``), and writes nothing. Each
request counts in the chat model's usage (``Memory.stats().llm_usage``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from .entities import Entity, EntityIndex, entity_key
from .errors import LLMError
from .jsonform import JSONForm
from .limits import MAX_NOTE_LENGTH
from .llm import ChatClient, answer_object
from .models import Fact
from .storage.interface import Store
from .temporal import TimeScope, to_iso

#: Keys a profile lists at most.
KEYS: Final = 50
#: Values a profile lists of one key at most (the latest valid).
VALUES_PER_KEY: Final = 10
#: Facts without a key a profile lists at most.
FACTS: Final = 20
#: Linked entities a profile lists at most.
LINKED: Final = 20
#: (entity name, link type) pairs read to find the LINKED entities with the most links.
LINK_ROWS: Final = 200
#: Characters of a fact's text the summary's model reads.
TEXT_CHARACTERS: Final = 600

SUMMARY_PROMPT: Final = """\
You keep the long-term memory of an AI agent. Below is what it knows about one entity: its \
names and its facts (each under a name: F1, F2, …; with a key and value when it is an \
attribute, and the time it holds from). Write a short profile of the \
entity: who or what it is, from these facts only, in at most five sentences.
Answer with one JSON object and nothing else:
{"summary": <the profile>, "facts": [<names of the facts it rests on, e.g. "F1", "F3">]}"""


@dataclass(frozen=True, slots=True)
class AttributeValue(JSONForm):
    """One current value of a key: the value (None when the fact gives none: its text says
    it), when it holds from and until (None: open), and the fact that says it."""

    value: str | None
    valid_from: datetime
    valid_until: datetime | None
    fact: Fact


@dataclass(frozen=True, slots=True)
class Attribute(JSONForm):
    """A key of an entity (as its latest value's fact spells it) and its current values, the
    latest valid first."""

    key: str
    values: tuple[AttributeValue, ...]


@dataclass(frozen=True, slots=True)
class LinkedEntity(JSONForm):
    """An entity whose facts are linked to the profiled entity's: how many links, and their
    types, the most links first."""

    entity: Entity
    links: int
    types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ProfileSummary(JSONForm):
    """What the chat model wrote of an entity, the ids of the facts it cites, and whether it
    was kept from an earlier profile of the same facts (no request made)."""

    text: str
    facts: tuple[str, ...]
    cached: bool


@dataclass(frozen=True, slots=True)
class Profile(JSONForm):
    """An entity as memory knows it at one time scope (see :mod:`graphmem.profiles`): its
    ``attributes`` (current values by key), its ``facts`` without a key, the entities
    ``linked`` to it, whether a bound left something out (``truncated``), and the ``summary``
    when one was asked for and written (``summary_error``: why there is none)."""

    entity: Entity
    attributes: tuple[Attribute, ...]
    facts: tuple[Fact, ...]
    linked: tuple[LinkedEntity, ...]
    truncated: bool
    summary: ProfileSummary | None = None
    summary_error: str | None = None

    @property
    def shown(self) -> list[Fact]:
        """Every fact the profile holds: its attributes' values, then its facts without a key."""
        return [v.fact for a in self.attributes for v in a.values] + list(self.facts)


def read(store: Store, index: EntityIndex, group: str, scope: TimeScope) -> Profile:
    """The profile of the entity ``group`` of ``index`` at ``scope`` (steps 1-3)."""
    names = index.names_of(group)
    with store.snapshot():
        keyed, plain = store.profile_facts(
            names, scope, keys=KEYS, per_key=VALUES_PER_KEY, unkeyed=FACTS
        )
        linked = store.profile_links(names, scope, limit=LINK_ROWS)
    attributes, cut = _attributes(keyed)
    entities, more = _linked(linked, index, group)
    return Profile(
        entity=index.entity(group),
        attributes=attributes,
        facts=tuple(plain[:FACTS]),
        linked=entities,
        truncated=cut or more or len(plain) > FACTS,
    )


def named(
    store: Store, index: EntityIndex, names: Sequence[str], scope: TimeScope, *, most: int
) -> list[Profile]:
    """The attributes alone (no other facts, no links) of the first ``most`` entities that
    ``names`` (a prompt's words and runs of words) name exactly, in the order named; those
    without an attribute left out."""
    groups: dict[str, None] = {}
    for name in names:
        group = index.resolve(name)
        if group is not None and len(groups) < most:
            groups.setdefault(group)
    found = []
    for group in groups:
        keyed, _ = store.profile_facts(
            index.names_of(group), scope, keys=KEYS, per_key=VALUES_PER_KEY, unkeyed=0
        )
        attributes, cut = _attributes(keyed)
        if attributes:
            found.append(Profile(index.entity(group), attributes, (), (), truncated=cut))
    return found


def summarize(profile: Profile, chat: ChatClient | None, store: Store) -> Profile:
    """``profile`` with its summary (step 4): the one kept under the signature of what the
    model would be shown, else the model's answer, kept; or without, saying why."""
    if chat is None:
        return replace(
            profile,
            summary_error="no chat model to summarise with: set llm_base_url (any "
            "OpenAI-compatible server) or llm_api_key",
        )
    listed = {f"F{n}": fact for n, fact in enumerate(profile.shown, 1)}
    if not listed:
        return replace(profile, summary_error="no current fact to summarise")
    question = _question(profile, listed)
    signed = json.dumps([chat.model, SUMMARY_PROMPT, question], ensure_ascii=False)
    signature = hashlib.sha256(signed.encode()).hexdigest()
    entity = entity_key(profile.entity.name)
    kept = store.profile_summary(entity, signature)
    if kept is not None:
        return replace(profile, summary=ProfileSummary(kept[0], tuple(kept[1]), cached=True))
    try:
        answer = chat.complete_json(SUMMARY_PROMPT, json.dumps(question, ensure_ascii=False))
        text, cited = _checked(answer_object(answer), listed)
    except LLMError as exc:
        return replace(profile, summary_error=exc.message)
    with store.transaction() as tx:
        tx.keep_profile_summary(entity, signature, text, cited, [f.id for f in listed.values()])
    return replace(profile, summary=ProfileSummary(text, tuple(cited), cached=False))


def _attributes(keyed: Sequence[Fact]) -> tuple[tuple[Attribute, ...], bool]:
    """The keyed facts (keys together, each key's latest valid first) as attributes, at most
    KEYS of at most VALUES_PER_KEY values; and whether any was left out."""
    by_key: dict[str, list[Fact]] = {}
    for fact in keyed:
        by_key.setdefault((fact.key or "").lower(), []).append(fact)
    cut = len(by_key) > KEYS or any(len(fs) > VALUES_PER_KEY for fs in by_key.values())
    attributes = tuple(
        Attribute(
            facts[0].key or "",
            tuple(
                AttributeValue(f.value, f.valid_from, f.valid_until, f)
                for f in facts[:VALUES_PER_KEY]
            ),
        )
        for facts in list(by_key.values())[:KEYS]
    )
    return attributes, cut


def _linked(
    rows: Sequence[tuple[str, str, int]], index: EntityIndex, group: str
) -> tuple[tuple[LinkedEntity, ...], bool]:
    """The entities of ``rows`` (names, link types, links) other than ``group``, the most links
    first, at most LINKED; and whether any may have been left out."""
    links: Counter[str] = Counter()
    types: dict[str, Counter[str]] = {}
    for name, type, n in rows:
        other = index.resolve(name)
        if other is None or other == group:
            continue
        links[other] += n
        types.setdefault(other, Counter())[type] += n
    ranked = sorted(links, key=lambda g: (-links[g], index.entity(g).name))
    found = tuple(
        LinkedEntity(
            index.entity(g),
            links[g],
            tuple(t for t, _ in sorted(types[g].items(), key=lambda item: (-item[1], item[0]))),
        )
        for g in ranked[:LINKED]
    )
    return found, len(ranked) > LINKED or len(rows) >= LINK_ROWS


def _question(profile: Profile, listed: dict[str, Fact]) -> dict[str, Any]:
    """What the model is shown: the entity's names and its facts under their names."""
    facts = []
    for name, fact in listed.items():
        item = {
            "name": name,
            "key": fact.key,
            "value": fact.value,
            "text": " ".join(fact.text[:TEXT_CHARACTERS].split()),
            "valid_from": to_iso(fact.valid_from.timestamp()),
            "valid_until": to_iso(fact.valid_until.timestamp()) if fact.valid_until else None,
        }
        facts.append({k: v for k, v in item.items() if v is not None})
    entity = profile.entity
    return {
        "entity": entity.name,
        "names": [*entity.names, *entity.aliases],
        "facts": facts,
    }


def _checked(answer: dict[str, Any], listed: dict[str, Fact]) -> tuple[str, list[str]]:
    """The summary's text (spaces collapsed) and the ids of the listed facts it cites;
    LLMError when it has no text, too long a text, or cites none of them."""
    text = answer.get("summary")
    if not isinstance(text, str) or not text.strip():
        raise LLMError('the answer has no "summary" text')
    text = " ".join(text.split())
    if len(text) > MAX_NOTE_LENGTH:
        raise LLMError(f"the summary is longer than {MAX_NOTE_LENGTH} characters")
    names = answer.get("facts")
    given = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    cited = [listed[n].id for n in dict.fromkeys(given) if n in listed]
    if not cited:
        raise LLMError("the summary cites none of the facts it was shown")
    return text, cited
