"""Dedup: what each fact of a validated batch becomes — new, a new version, or already stored.

``write_batch`` runs inside the caller's store transaction. It reads the state it needs for the
whole batch in two requests (live facts with the same normalised text, current facts with the
same entity and key), decides every item in order in Python, keeping that state up to date as
earlier items land, then hands every insert and update to the transaction at once
(``Transaction.apply``). Later items see earlier ones: a batch that sets a key twice
supersedes its own first value. Nothing here depends on the storage engine.

"The same entity" is the same entity of the entity index (:mod:`graphmem.entities`), as it
will be once the batch's names are stored: "Mel" city=Paris supersedes "Melanie" city=Rome, and
so does a declared alias. Without an index (a caller that gives none), names compare
case-insensitively.

With the LLM classifier, its verdicts (:mod:`graphmem.classify`, asked before the transaction)
replace the entity/key rules: each is checked against the state inside the transaction, and one
whose target is no longer live falls back to ADD.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from . import statedtime
from .decay import classify_decay, expiry
from .entities import Entities, EntityIndex, entity_key
from .errors import Conflict, InvalidInput, NotFound
from .ids import new_id
from .models import (
    DEFAULT_CONFIDENCE,
    DEFAULT_IMPORTANCE,
    Action,
    Fact,
    FactInput,
    StoreResult,
    Verdict,
    is_turn,
)
from .settings import Settings
from .storage.interface import BatchChanges, Transaction
from .tagging import detect_category, extract_tags
from .timewords import MONTHS, WEEKDAYS

_SPACES = re.compile(r"\s+")
# SQLite's built-in lower() folds ASCII only; grouping in Python must fold the same way.
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass
class _Decision:
    action: Action
    fact_id: str | None
    reason: str = ""
    targets: tuple[str, ...] = ()


@dataclass
class _Batch:
    """What the batch knows: prefetched rows plus the rows it has written so far."""

    now: float
    by_hash: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)  # superseded during this batch
    changes: BatchChanges = field(default_factory=BatchChanges)
    touched: set[str] = field(default_factory=set)
    #: The entities ``by_key`` groups by (None: names, case-insensitive).
    index: EntityIndex | None = None
    #: Each entity name met: what the names of its entity share (:meth:`EntityIndex.token`).
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, entity: str) -> str:
        token = self.tokens.get(entity)
        if token is None:
            index = self.index
            token = entity.translate(_ASCII_LOWER) if index is None else index.token(entity)
            self.tokens[entity] = token
        return token

    def current(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if r["id"] not in self.ended]


def write_batch(
    tx: Transaction,
    inputs: Sequence[FactInput],
    twins: Sequence[str | int | None],
    settings: Settings,
    verdicts: Sequence[Verdict | None] | None = None,
    *,
    episode_id: str | None = None,
    merges: Sequence[Sequence[str]] | None = None,
    outside: Collection[int] = (),
    entities: Entities | None = None,
) -> tuple[list[StoreResult], set[str]]:
    """Dedup, classify and insert ``inputs``; returns the results and the fact ids whose vectors
    must be synced. ``twins[i]`` is item i's vector near-duplicate: a live fact id, an earlier
    batch position, or None. ``verdicts[i]``, when given, is the LLM classifier's decision for
    item i. The new facts belong to ``episode_id`` (recorded by the caller), but for the items
    at the positions ``outside`` (facts capture drew from the episode's turns, which are
    linked to them instead of being part of the conversation). ``merges[i]``, when
    given, are further live facts item i supersedes besides its ``supersedes`` (a consolidation
    writes one fact replacing several). The rule classifier compares entities through
    ``entities`` (see the module's docstring). Raises (and the caller rolls back) on an invalid
    ``supersedes``."""
    hashes = [normalized_hash(x.text) for x in inputs]
    batch = _Batch(tx.now)
    _prefetch(tx, batch, hashes, inputs, settings, entities)
    decisions: list[_Decision] = []
    for i, (x, h, twin, verdict, also) in enumerate(
        zip(
            inputs,
            hashes,
            twins,
            verdicts or [None] * len(inputs),
            merges or [()] * len(inputs),
            strict=True,
        )
    ):
        owner = _vector_owner(tx, batch, twin, decisions)
        member = None if i in outside else episode_id
        decisions.append(_decide(tx, batch, x, h, owner, settings, verdict, also, member))
    tx.apply(batch.changes)
    # The batch's rows mirror what it wrote (including later supersessions of earlier items).
    results = [
        StoreResult(
            d.action,
            Fact.from_row(batch.rows[d.fact_id]) if d.fact_id else None,
            d.reason,
            d.targets,
        )
        for d in decisions
    ]
    return results, batch.touched


def normalized_hash(text: str) -> str:
    """sha256 of the text trimmed, with runs of whitespace collapsed, case-folded."""
    normalized = _normalize(text)
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def date_terms(moment: float | None) -> str:
    """A date as searchable words ("8 May 2023 Monday"), so keyword search can match dates."""
    if moment is None:
        return ""
    d = datetime.fromtimestamp(moment, tz=UTC)
    return f"{d.day} {MONTHS[d.month - 1]} {d.year} {WEEKDAYS[d.weekday()]}"


def _decide(
    tx: Transaction,
    batch: _Batch,
    x: FactInput,
    norm_hash: str,
    vector_of: str | None,
    settings: Settings,
    verdict: Verdict | None = None,
    also: Sequence[str] = (),
    episode_id: str | None = None,
) -> _Decision:
    now = batch.now
    targets = [_live_target(tx, batch, i) for i in ([x.supersedes] if x.supersedes else [])]
    targets += [_live_target(tx, batch, i) for i in dict.fromkeys(also) if i != x.supersedes]
    target = targets[0] if targets else None
    valid_from = next((t for t in (x.valid_from, x.source_date) if t is not None), now)
    # The time the text states, against the fact's own date: its source date (its episode's
    # time when it gives none), else its valid_from, else now.
    stated = (
        statedtime.stated_time(x.text, x.source_date if x.source_date is not None else valid_from)
        if settings.read_stated_time
        else None
    )
    if x.valid_from is None and (x.stated_valid_from or settings.stated_valid_from):
        # The classifier's reading of the text wins over the offline one.
        if verdict is not None and verdict.valid_from is not None:
            valid_from = verdict.valid_from
        elif stated is not None:
            valid_from = stated.start.timestamp()
    for old in targets:
        if valid_from < old["valid_from"]:
            raise InvalidInput(
                f"valid_from is before the start of fact {old['id']} it supersedes",
                field="valid_from",
            )

    # A turn is what was said when: a fact saying the same is no repeat of it.
    duplicates = [
        r
        for r in batch.current(batch.by_hash[norm_hash] if x.dedup else ())
        if r["id"] != (x.supersedes or "") and not is_turn(r["source"])
    ]
    duplicate = next((r for r in duplicates if r["text"] == x.text), None)
    if duplicate is None and duplicates and settings.fuzzy_dedup:
        duplicate = duplicates[0]
    if duplicate is not None:
        kind = "exact" if duplicate["text"] == x.text else "normalised"
        return _Decision(
            "NOOP", duplicate["id"], f"{kind} duplicate of {duplicate['id']}", (duplicate["id"],)
        )

    action: Action = "ADD"
    reason = ""
    superseded: list[dict[str, Any]] = targets
    later: dict[str, Any] | None = None  # a current version that starts after this one
    key = _group_key(x.entity, x.key, batch)
    if target is not None:
        action, reason = "UPDATE", f"supersedes {', '.join(r['id'] for r in targets)} (explicit)"
    elif verdict is not None and x.classify:
        action, reason, chosen = _checked(tx, batch, verdict, valid_from)
        if chosen is not None and action in ("NOOP", "DELETE"):
            if action == "DELETE":
                chosen.update(retracted_at=now)
                batch.changes.retractions.append((now, chosen["id"]))
                batch.ended.add(chosen["id"])
                batch.touched.add(chosen["id"])
            return _Decision(action, chosen["id"], reason, (chosen["id"],))
        superseded = [chosen] if chosen is not None else []
    elif (
        key is not None
        and x.classify
        and settings.classifier == "rules"
        and x.key is not None
        and x.key.lower() not in settings.multi_valued_keys
        and x.value is not None
    ):
        same = sorted(batch.current(batch.by_key[key]), key=lambda r: r["valid_from"], reverse=True)
        value = _normalize(x.value)
        match = next((r for r in same if _normalize(r["value"] or "") == value), None)
        if match is not None:
            said = f"{x.entity}.{x.key} is already {x.value!r}{_as_named(x, [match])}"
            return _Decision("NOOP", match["id"], said, (match["id"],))
        superseded = [r for r in same if r["valid_from"] <= valid_from]
        later = next((r for r in reversed(same) if r["valid_from"] > valid_from), None)
        if superseded:
            action = "UPDATE"
            reason = f"new value for {x.entity}.{x.key}{_as_named(x, superseded)}"
        elif later is not None:
            reason = (
                f"earlier value for {x.entity}.{x.key}{_as_named(x, [later])}, recorded as history"
            )

    fact_id = new_id()
    decay_class = x.decay_class or classify_decay(x.entity, x.key, x.value, x.text)
    tags = x.tags if x.tags is not None else extract_tags(x.text, x.entity)
    row = {
        "id": fact_id,
        "text": x.text,
        "category": x.category or detect_category(x.text),
        "importance": DEFAULT_IMPORTANCE if x.importance is None else x.importance,
        "entity": x.entity,
        "key": x.key,
        "value": x.value,
        "source": x.source,
        "tags": ",".join(tags),
        "summary": x.summary,
        "why": x.why,
        "context": x.context,
        "date_terms": date_terms(x.valid_from if x.source_date is None else x.source_date),
        "decay_class": decay_class,
        "expires_at": x.expires_at if x.expires_at is not None else expiry(decay_class, now),
        "confidence": DEFAULT_CONFIDENCE if x.confidence is None else x.confidence,
        "last_confirmed_at": now,
        "normalized_hash": norm_hash,
        "source_date": x.source_date,
        "valid_from": valid_from,
        "valid_until": None if later is None else later["valid_from"],
        "valid_until_recorded_at": None if later is None else now,
        "recorded_at": now,
        "superseded_by": None if later is None else later["id"],
        "supersedes_id": superseded[0]["id"] if superseded else None,
        "vector_of": vector_of,
        "episode_id": episode_id,
        # Not inserted (column defaults), but part of the Fact this write returns:
        "access_count": 0,
        "last_accessed_at": None,
        "retracted_at": None,
        # A new version of a pinned fact stays pinned.
        "pinned_at": next((o["pinned_at"] for o in superseded if o.get("pinned_at")), None),
        "cold_at": None,  # a new version is in use again
        "stated_start": None if stated is None else stated.start.timestamp(),
        "stated_end": None if stated is None else stated.end.timestamp(),
        "stated_text": None if stated is None else stated.text,
    }
    batch.changes.inserts.append(row)
    batch.rows[fact_id] = row
    batch.touched.add(fact_id)
    batch.by_hash[norm_hash].append(row)
    if key is not None and later is None:
        batch.by_key[key].append(row)
    for old in superseded:
        old.update(valid_until=valid_from, valid_until_recorded_at=now, superseded_by=fact_id)
        batch.changes.supersessions.append((valid_from, now, fact_id, old["id"]))
        batch.changes.links.append((fact_id, old["id"], now, valid_from))
        batch.ended.add(old["id"])
        batch.touched.add(old["id"])
    if later is not None:
        batch.changes.links.append((later["id"], fact_id, now, later["valid_from"]))
        batch.changes.back_links.append((fact_id, later["id"]))
        if later["supersedes_id"] is None:
            later["supersedes_id"] = fact_id
    return _Decision(action, fact_id, reason, tuple(r["id"] for r in superseded))


def _checked(
    tx: Transaction, batch: _Batch, verdict: Verdict, valid_from: float
) -> tuple[Action, str, dict[str, Any] | None]:
    """A classifier verdict as it can be applied now: (action, reason, the target's row). A target
    that is no longer live, or that an UPDATE would start before, makes it an ADD."""
    if verdict.target is None:
        return verdict.action, verdict.reason, None
    try:
        row = _live_target(tx, batch, verdict.target)
    except (NotFound, Conflict):
        return (
            "ADD",
            (
                f"classifier fell back to ADD: its {verdict.action} target "
                f"{verdict.target} is no longer live"
            ),
            None,
        )
    if verdict.action == "UPDATE" and valid_from < row["valid_from"]:
        return (
            "ADD",
            (
                f"classifier fell back to ADD: this fact starts before {row['id']}, "
                "which it would update"
            ),
            None,
        )
    return verdict.action, verdict.reason, row


def _prefetch(
    tx: Transaction,
    batch: _Batch,
    hashes: list[str],
    inputs: Sequence[FactInput],
    settings: Settings,
    entities: Entities | None,
) -> None:
    """Load the live facts sharing a normalised text, and the current facts sharing an
    entity+key, under any name of the entity, with any item of the batch."""
    for row in tx.live_by_hash(list(dict.fromkeys(hashes))):
        batch.by_hash[row["normalized_hash"]].append(_remember(batch, row))
    if settings.classifier != "rules":
        return
    keyed = [(x.entity, x.key) for x in inputs if x.classify and x.entity and x.key]
    if not keyed:
        return
    if entities is not None:
        batch.index = entities.classifying([e for e, _ in keyed], batch.now)
    names = {e: _names(batch.index, e) for e in dict.fromkeys(e for e, _ in keyed)}
    pairs = dict.fromkeys(
        (name, key.translate(_ASCII_LOWER)) for entity, key in keyed for name in names[entity]
    )
    for row in tx.current_by_key(list(pairs)):
        group = _group_key(row["entity"], row["key"], batch)
        assert group is not None
        batch.by_key[group].append(_remember(batch, row))


def _remember(batch: _Batch, row: dict[str, Any]) -> dict[str, Any]:
    known = batch.rows.get(row["id"])
    if known is None:
        known = batch.rows[row["id"]] = row
    return known


def _live_target(tx: Transaction, batch: _Batch, fact_id: str) -> dict[str, Any]:
    """The fact an explicit ``supersedes`` names; it must exist and be live."""
    if fact_id in batch.ended:
        raise Conflict(f"supersedes: fact {fact_id} is superseded earlier in this batch")
    if fact_id in batch.rows:
        return batch.rows[fact_id]
    row = tx.fact_row(fact_id)
    if row is None:
        raise NotFound(f"supersedes: no fact with id {fact_id!r}")
    if not tx.is_live(fact_id) or row["superseded_by"] is not None:
        raise Conflict(
            f"supersedes: fact {fact_id} is not live (already superseded, forgotten or expired)"
        )
    return _remember(batch, row)


def _vector_owner(
    tx: Transaction, batch: _Batch, twin: str | int | None, decisions: list[_Decision]
) -> str | None:
    """The fact whose stored vector a new fact shares (never a sharer: owners only)."""
    candidate = decisions[twin].fact_id if isinstance(twin, int) else twin
    if not candidate:
        return None
    row = batch.rows.get(candidate) or tx.fact_row(candidate)
    if row is None:
        return None
    return str(row["vector_of"] or candidate)


def _group_key(entity: str | None, key: str | None, batch: _Batch) -> tuple[str, str] | None:
    """What the facts of one entity and key share (None without an entity or a key)."""
    if not entity or not key:
        return None
    return batch.token(entity), key.translate(_ASCII_LOWER)


def _names(index: EntityIndex | None, entity: str) -> list[str]:
    """Every stored name of ``entity``'s entity (``entity`` itself among them), ASCII
    lower-cased as the store reads them."""
    names = [entity.translate(_ASCII_LOWER)]
    if index is not None and (group := index.resolve(entity)) is not None:
        names += index.names_of(group)
    return list(dict.fromkeys(names))


def _as_named(x: FactInput, rows: Sequence[dict[str, Any]]) -> str:
    """For a reason: the names of ``x``'s entity the rows ``rows`` carry, but its own."""
    named = entity_key(x.entity or "")
    others = [e for e in dict.fromkeys(r["entity"] for r in rows) if entity_key(e) != named]
    return f" (the same entity as {', '.join(others)})" if others else ""


def _normalize(text: str) -> str:
    return _SPACES.sub(" ", text.strip()).casefold()
