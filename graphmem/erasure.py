"""Erasure: purge by filter, what it removed, and the record that it happened.

``Memory.purge`` deletes for good every fact a filter matches (by ids, entity, source or
episode; several filters narrow each other), in every state — current, replaced, forgotten —
with their links, vectors, cached embeddings, keyword-index entries and the episodes left
empty. An entity filter reaches the whole entity its name is a name of, as the entity index
groups them at the moment of the purge (:mod:`graphmem.entities`): the facts carrying any of
its names go, and once none is left, every declaration made on one of its names too, so no
name or alias of it stays; the report lists the names it covered. Afterwards the store scrubs its files (SQLite's ``secure_delete`` zeroes deleted
content, the keyword index is merged, the WAL checkpointed and truncated) and the vector index
drops its older table versions, so no file of the namespace still holds an erased text or
vector. Each purge that erased something leaves an erasure record (one that matched nothing
leaves none): when, which filter and how many of each kind, never the content; the filter's
values are kept as SHA-256 digests (and each name an entity filter covered, lower-cased), so the
record can confirm that a given entity, name or source was erased without listing them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from .errors import InvalidInput
from .jsonform import JSONForm
from .limits import MAX_FIELD_LENGTH, MAX_NODES

#: The filters a purge takes, in the order they are described.
FILTERS: Final = ("ids", "entity", "source", "episode")


@dataclass(frozen=True, slots=True)
class PurgeFilter:
    """Which facts a purge removes: all the given conditions hold (at least one is given)."""

    ids: tuple[str, ...] | None = None
    entity: str | None = None
    source: str | None = None
    episode: str | None = None
    #: The names ``entity`` reaches, as the facts' index compares them (empty: ``entity``
    #: itself, case-insensitive).
    entity_names: tuple[str, ...] = ()
    #: The names of the declarations on the entity's names, in any state, that go once no fact
    #: carries one of ``entity_names``.
    declared: tuple[str, ...] = ()
    #: The entity's names and aliases, as the report lists them.
    covered: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        ids: Iterable[str] | None,
        entity: str | None,
        source: str | None,
        episode: str | None,
    ) -> PurgeFilter:
        """A checked filter. InvalidInput for an empty one (a purge never erases everything by
        accident: a namespace is dropped by its own operation) or a malformed value."""
        if isinstance(ids, str):
            ids = [ids]
        checked = None
        if ids is not None:
            checked = tuple(dict.fromkeys(ids))
            if not checked or not all(isinstance(i, str) and i for i in checked):
                raise InvalidInput("ids must be one or more fact ids", field="ids")
            if len(checked) > MAX_NODES:
                raise InvalidInput(f"at most {MAX_NODES} ids per purge", field="ids")
        for name, value in (("entity", entity), ("source", source), ("episode", episode)):
            if value is not None and (
                not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_LENGTH
            ):
                raise InvalidInput(
                    f"{name} must be non-empty text of at most {MAX_FIELD_LENGTH} characters",
                    field=name,
                )
        made = cls(checked, entity, source, episode)
        if made.empty:
            raise InvalidInput(
                "a purge needs a filter: ids, entity, source or episode (it never erases a "
                "whole namespace)",
                field="filter",
            )
        return made

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in FILTERS)

    def reaching(
        self, names: Iterable[str], declared: Iterable[str], covered: Iterable[str]
    ) -> PurgeFilter:
        """This filter with its entity reaching ``names`` (as compared), the declarations
        ``declared`` and, for the report, the names and aliases ``covered``."""
        return dataclasses.replace(
            self, entity_names=tuple(names), declared=tuple(declared), covered=tuple(covered)
        )

    def digest(self) -> dict[str, Any]:
        """What the erasure record keeps of the filter: the number of ids, a SHA-256 of each
        other value (lower-cased for an entity, which matches case-insensitively), and for an
        entity the SHA-256 of each name it covered, lower-cased, in the digests' order."""
        out: dict[str, Any] = {}
        if self.ids is not None:
            out["ids"] = len(self.ids)
        for name in ("entity", "source", "episode"):
            value = getattr(self, name)
            if value is not None:
                text = value.strip().lower() if name == "entity" else value
                out[name] = _sha256(text)
        if self.covered:
            out["names"] = sorted({_sha256(n.strip().lower()) for n in self.covered})
        return out


@dataclass(frozen=True, slots=True)
class PurgeReport(JSONForm):
    """How many facts, links, vectors and emptied episodes a purge removed (or, with
    ``dry_run``, would remove), and for an entity filter the names it covered: the names the
    entity's facts carry and the aliases declared for it."""

    facts: int
    links: int
    vectors: int
    episodes: int
    dry_run: bool = False
    #: The entity filter's names, its first name first; empty without an entity filter.
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Erasure(JSONForm):
    """The record a purge leaves: when, the filter (its values as SHA-256 digests, ids as a
    count) and how many of each kind it removed; never the content."""

    at: datetime
    filter: dict[str, Any]
    facts: int
    links: int
    vectors: int
    episodes: int


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
