"""Entities: the names a namespace's facts give who or what they are about, grouped so that
every name of one entity reaches the same facts ("Mel", "Melanie", "melanie's").

1. A name is compared by its key (:func:`entity_key`): case folded, curly apostrophes
   straightened, a possessive dropped ("Melanie's" is "melanie"), other punctuation and runs
   of spaces read as one space.
2. The store keeps the names the facts carry (:mod:`graphmem.storage.sql.entities`). Among
   them, names are found to be one entity when exactly one other entity fits:
   - a short form: a one-word name that begins the first word of a longer one ("Mel" and
     "Melanie"), or a common nickname of it ("Bob" and "Robert"), or the first word of a
     longer name ("Caroline" and "Caroline Smith");
   - a near spelling: names with the same words but one, that one spelt alike (trigram
     similarity at least :data:`NEAR_SPELLING`, both at least :data:`NEAR_SPELLING_MIN`
     letters: "Melany Smith" and "Melanie Smith", not "Jane" and "John").
   A name that fits two entities ("Mel" beside "Melanie" and "Melvin") joins neither.
3. Callers declare what rules cannot know, with transaction time (``Memory.alias``,
   ``merge_entities``, ``split_alias``): an alias or a merge joins two names, a split keeps a
   name on its own against the rules. A read as known at an earlier moment groups the names
   memory had and the declarations it had made by then.

The grouping of the current names is kept per namespace (:meth:`Entities.index`), so resolving
a name costs a few dictionary reads. New names that join no entity and change none (no short
form, nickname, first word or near spelling ties them to another name, no declaration names
them: most new names) are added to it in place; it is built again when a name goes, a
declaration changes, or a new name may join. The write path compares the entities of the
facts it classifies through it (:mod:`graphmem.dedup`).
"""

from __future__ import annotations

import bisect
import copy
import functools
import itertools
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .errors import Conflict, InvalidInput, NotFound
from .limits import MAX_FIELD_LENGTH
from .models import check_text
from .storage.interface import Declaration, EntityName, EntitySignature, Store
from .temporal import ACCEPTED_TIMES

#: Trigram similarity (shared over all, of the padded words) from which two words differing in
#: one name are one spelling: "melanie"/"melany" 0.5, "jonathan"/"jonathon" 0.5,
#: "caroline"/"carolyn" 0.42 (not), "john"/"jane" 0.11.
NEAR_SPELLING: Final = 0.5
#: Letters a word needs, in both names, to be compared by spelling (short words share too
#: few trigrams to tell a typo from another name).
NEAR_SPELLING_MIN: Final = 4
#: Letters a short form needs ("Mel"; "Al" would begin too many names).
SHORT_FORM_MIN: Final = 3
#: Words compared by spelling in one group (names alike but one word) at most; a larger group
#: is left to exact names, short forms and declarations, so that building stays quick.
NEAR_SPELLING_GROUP: Final = 5_000

#: Word comparisons one check of new names makes at most before it counts them as names that
#: may join (the index is then built again from every name), so that no batch of names spelt
#: alike costs the write path more than a build.
SPELLING_CHECKS: Final = 200_000

#: What ``known_at`` means to a read of entities, as every face describes the argument.
KNOWN_AT: Final = (
    "Transaction time: group the names memory had at this moment, with the aliases, merges "
    f"and splits declared by then. {ACCEPTED_TIMES}. Default: now."
)

#: What a caller declares on entities (``Memory.alias``, ``merge_entities``, ``split_alias``).
DECLARATION_KINDS: Final = ("alias", "merge", "split")

#: Common English nicknames and the first name each stands for.
NICKNAMES: Final[dict[str, str]] = {
    "bob": "robert",
    "bobby": "robert",
    "rob": "robert",
    "bill": "william",
    "billy": "william",
    "will": "william",
    "liz": "elizabeth",
    "beth": "elizabeth",
    "betty": "elizabeth",
    "kate": "katherine",
    "katie": "katherine",
    "jim": "james",
    "jimmy": "james",
    "mike": "michael",
    "dick": "richard",
    "rick": "richard",
    "tom": "thomas",
    "tony": "anthony",
    "dave": "david",
    "steve": "steven",
    "chris": "christopher",
    "matt": "matthew",
    "nick": "nicholas",
    "alex": "alexander",
    "sam": "samuel",
    "ben": "benjamin",
    "joe": "joseph",
    "jack": "john",
    "peggy": "margaret",
    "maggie": "margaret",
    "sue": "susan",
    "jenny": "jennifer",
}

#: Each first name and its nicknames.
_NICKNAMES_OF: Final[dict[str, frozenset[str]]] = {
    formal: frozenset(n for n, f in NICKNAMES.items() if f == formal)
    for formal in set(NICKNAMES.values())
}

_APOSTROPHES: Final = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u02bc": "'"})
_POSSESSIVE: Final = re.compile(r"(?<=\w)'s?\b")
_NOT_WORD: Final = re.compile(r"[\W_]+")


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity of a namespace: its ``name`` (the first name memory recorded, of those the
    most facts then the longest; or the one a merge kept), every name its facts carry (``names``, ``name`` first), the ``aliases``
    declared for it, and how many facts carry one of its names (any state)."""

    name: str
    names: tuple[str, ...]
    aliases: tuple[str, ...]
    facts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "names": list(self.names),
            "aliases": list(self.aliases),
            "facts": self.facts,
        }


@functools.lru_cache(maxsize=2**16)
def entity_key(name: str) -> str:
    """The key two names of one spelling share: "Melanie's" (straight or curly apostrophe)
    and " MELANIE " are both "melanie"; "Jean-Luc" is "jean luc"."""
    folded = unicodedata.normalize("NFKC", name).translate(_APOSTROPHES).casefold()
    folded = _POSSESSIVE.sub("", folded).replace("'", "")
    return " ".join(_NOT_WORD.sub(" ", folded).split())


def check_name(name: Any, field: str) -> str:
    """``name`` stripped, or InvalidInput naming ``field``: not a string, empty, longer than
    MAX_FIELD_LENGTH, not text, or with nothing a key keeps ("!!")."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    if len(name) > MAX_FIELD_LENGTH:
        raise InvalidInput(f"{field} longer than {MAX_FIELD_LENGTH} characters", field=field)
    check_text(**{field: name})
    if not entity_key(name):
        raise InvalidInput(f"{field} {name!r} holds no letter or digit", field=field)
    return name.strip()


def similarity(a: str, b: str) -> float:
    """Trigram similarity of two words (shared trigrams over all, each padded as pg_trgm
    pads: two spaces before, one after)."""
    x, y = _trigrams(a), _trigrams(b)
    return len(x & y) / len(x | y) if x or y else 1.0


class EntityIndex:
    """The names of a namespace grouped into entities, as known at one moment."""

    def __init__(
        self,
        names: Iterable[EntityName],
        declarations: Iterable[Declaration],
        known_at: float | None = None,
    ) -> None:
        names, declarations = list(names), list(declarations)
        #: What a current index was built from, to build it again with more names.
        self._rows = names if known_at is None else []
        self._declarations = declarations if known_at is None else []
        #: The words of its names by spelling, made when a name is first added in place.
        self._spellings: _Spellings | None = None
        #: New keys found to join no entity of this index (:meth:`joins_none`).
        self._inert: set[str] = set()
        #: key -> the names (as the facts' index compares them) with that key.
        self._stored: dict[str, list[str]] = defaultdict(list)
        self._spelling: dict[str, str] = {}
        self._facts: Counter[str] = Counter()
        first: dict[str, float] = {}
        for name, spelling, count, recorded in names:
            if known_at is not None and recorded > known_at:
                continue
            key = entity_key(name)
            if not key:
                continue
            self._stored[key].append(name)
            self._facts[key] += count
            if key not in first or recorded < first[key]:
                first[key], self._spelling[key] = recorded, spelling
        #: key -> its live declaration: (position, kind, name as given, target key).
        self.declared: dict[str, tuple[int, str, str, str]] = {}
        for seq, kind, name, target, recorded, retracted in declarations:
            if known_at is not None and (
                recorded > known_at or (retracted is not None and retracted <= known_at)
            ):
                continue
            if retracted is not None and known_at is None:
                continue
            self.declared[entity_key(name)] = (seq, kind, name, entity_key(target))
        self._parent: dict[str, str] = {k: k for k in self._stored}
        for key, (_, _, name, _) in self.declared.items():
            self._parent.setdefault(key, key)
            self._spelling.setdefault(key, name)
        #: The keys a declaration joins another name to.
        self._targets = {t for _, kind, _, t in self.declared.values() if kind != "split"}
        for key, (_, kind, _, target) in self.declared.items():
            if kind != "split" and target in self._parent:
                self._join(key, target)
        split = {k for k, (_, kind, _, _) in self.declared.items() if kind == "split"}
        self._derive([k for k in self._stored if k not in split])
        subjects = {k for k, (_, kind, _, _) in self.declared.items() if kind != "split"}
        order = sorted(
            self._parent,
            key=lambda k: (k in subjects, first.get(k, float("inf")), -self._facts[k], -len(k), k),
        )
        #: group root -> its keys, the entity's own name first.
        self._members: dict[str, list[str]] = defaultdict(list)
        for key in order:
            self._members[self._find(key)].append(key)
        self._ordered = sorted(self._parent)

    def resolve(self, name: str, *, guess: bool = False) -> str | None:
        """The group of ``name`` (the key of its entity), or None when no fact and no
        declaration gives it. ``guess``: a one-word name no fact gives is also read as the
        short form or nickname of the one entity it fits ("Mel" for "Melanie")."""
        key = entity_key(name)
        if key in self._parent:
            return self._find(key)
        if not guess or " " in key or not key:
            return None
        fits = _longer_names(key, self._ordered)
        formal = NICKNAMES.get(key)
        if formal is not None:
            known = {formal} & set(self._parent)
            fits |= known | _longer_names(formal, self._ordered, exact=True)
        groups = {self._find(k) for k in fits}
        return groups.pop() if len(groups) == 1 else None

    def token(self, name: str) -> str:
        """What the names of one entity share: the entity's group, or for a name no entity
        has its own key (the name lower-cased when it has no key), as a name that joins no
        entity once stored has."""
        group = self.resolve(name)
        return group if group is not None else (entity_key(name) or name.lower())

    def newcomers(self, names: Iterable[str], recorded: float) -> dict[str, EntityName]:
        """The names among ``names`` whose key this index does not have, by key, as rows of
        names recorded at ``recorded``."""
        rows: dict[str, EntityName] = {}
        for name in dict.fromkeys(names):
            key = entity_key(name)
            if key and key not in self._parent:
                rows.setdefault(key, (name.lower(), name, 1, recorded))
        return rows

    def built_with(self, rows: Iterable[EntityName]) -> EntityIndex:
        """This (current) index built again with the names ``rows`` besides its own."""
        return EntityIndex([*self._rows, *rows], self._declarations)

    def extended(self, rows: Sequence[EntityName]) -> EntityIndex | None:
        """This (current) index with the names ``rows``, newly recorded, added in place of a
        new build: None when one of them may join an entity or change one (a name only a
        declaration gave, or one :meth:`joins_none` is wary of)."""
        fresh: dict[str, list[EntityName]] = defaultdict(list)
        known: list[tuple[str, EntityName]] = []
        for row in rows:
            key = entity_key(row[0])
            if not key or row[0] in self._stored.get(key, ()):
                continue
            if key in self._stored:
                known.append((key, row))
            elif key in self._parent:
                return None
            else:
                fresh[key].append(row)
        if fresh and not self.joins_none(list(fresh)):
            return None
        grown = copy.copy(self)
        grown._rows = [*self._rows, *rows]
        grown._stored = defaultdict(list, self._stored)
        grown._facts = Counter(self._facts)
        grown._spelling = dict(self._spelling)
        grown._parent = dict(self._parent)
        grown._members = defaultdict(list, self._members)
        for key, (name, _, count, _) in known:
            grown._stored[key] = [*grown._stored[key], name]
            grown._facts[key] += count
        for key, named in fresh.items():
            grown._stored[key] = list(dict.fromkeys(row[0] for row in named))
            grown._facts[key] = sum(row[2] for row in named)
            grown._spelling[key] = named[0][1]
            grown._parent[key] = key
            grown._members[key] = [key]
        grown._ordered = sorted([*self._ordered, *fresh])
        spellings = self._spelt()
        for key in fresh:
            spellings.add(key)
        grown._spellings, self._spellings = spellings, None
        grown._inert = set()
        return grown

    def names_of(self, group: str) -> list[str]:
        """The names, as the facts' index compares them, of every fact name of ``group``."""
        return [n for key in self._members[group] for n in self._stored.get(key, ())]

    def entity(self, group: str) -> Entity:
        keys = self._members[group]
        carried = [k for k in keys if k in self._stored]
        head = carried[0] if carried else keys[0]
        return Entity(
            name=self._spelling[head],
            names=tuple(self._spelling[k] for k in carried),
            aliases=tuple(
                self.declared[k][2]
                for k in keys
                if k in self.declared and self.declared[k][1] == "alias"
            ),
            facts=sum(self._facts[k] for k in keys),
        )

    def groups(self) -> list[str]:
        """Every entity's group, the most facts first."""
        return sorted(
            self._members, key=lambda g: (-sum(self._facts[k] for k in self._members[g]), g)
        )

    def members(self, group: str) -> list[str]:
        """The keys of ``group``."""
        return list(self._members[group])

    def joins_none(self, keys: Sequence[str]) -> bool:
        """Whether the new ``keys`` (distinct, none of them the index's), added, would each be
        an entity of its own and leave every other as it is: no declaration joins one, none
        is a short form or nickname of another name or has one (module docstring, 2), and
        none has a word spelt like another name's. Wary: what might join counts as joining.
        The keys last found to join none are remembered: the names a write brought are
        checked once, when it classifies them, not again when they are added."""
        if self._inert.issuperset(keys):
            return True
        singles: set[str] = set()  # the one-word keys checked
        begun: set[str] = set()  # every beginning of the first words of the keys checked
        spelt: dict[tuple[int, str], list[str]] = defaultdict(list)
        for key in keys:
            head = key.split(" ", 1)[0]
            starts = [head[:n] for n in range(1, len(head) + 1)]
            if (
                key in self._targets
                # a one-word name this one begins with (its first word, or a short form of it)
                or any(p in self._parent or p in singles for p in starts)
                or any(n in self._parent or n in singles for n in _NICKNAMES_OF.get(head, ()))
            ):
                return False
            if " " not in key:
                formal = NICKNAMES.get(key)
                # a longer name beginning with it, or with the name it is a nickname of
                if any(w is not None and (self._begins(w) or w in begun) for w in (key, formal)):
                    return False
                singles.add(key)
            begun.update(starts)
            for group, word in _spelt_words(key):
                spelt[group].append(word)
        if self._spelt().alike_any(spelt):
            return False
        self._inert = set(keys)
        return True

    def _begins(self, start: str) -> bool:
        """Whether a key of the index begins with ``start`` (or is it)."""
        i = bisect.bisect_left(self._ordered, start)
        return i < len(self._ordered) and self._ordered[i].startswith(start)

    def _spelt(self) -> _Spellings:
        if self._spellings is None:
            self._spellings = _Spellings(self._stored)
        return self._spellings

    def _derive(self, keys: Sequence[str]) -> None:
        """Join the names the rules find to be one entity (module docstring, 2): first near
        spellings and the first words of longer names, then short forms and nicknames, each
        when the names it fits are one entity by then."""
        ordered = sorted(keys)
        for a, b in _near_spellings(keys):
            self._join(a, b)
        for key in keys:
            fits = _longer_names(key, ordered, exact=True) if " " not in key else set()
            if fits and _one_entity(fits):
                for other in fits:
                    self._join(key, other)
        present = set(keys)
        for key in keys:
            if " " in key:
                continue
            fits = _longer_names(key, ordered)
            formal = NICKNAMES.get(key)
            if formal is not None:
                fits |= ({formal} & present) | _longer_names(formal, ordered, exact=True)
            if fits and len({self._find(k) for k in fits}) == 1:
                self._join(key, next(iter(fits)))

    def _find(self, key: str) -> str:
        root = key
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[key] != root:
            self._parent[key], key = root, self._parent[key]
        return root

    def _join(self, a: str, b: str) -> None:
        self._parent[self._find(a)] = self._find(b)


class Entities:
    """A namespace's entities: the index, built again only when its names or declarations
    change, and the declarations. Thread-safe."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._current: tuple[EntitySignature, EntityIndex] | None = None

    def index(self, known_at: float | None = None) -> EntityIndex:
        """The index as known at ``known_at`` (None: now)."""
        signature = self._store.entity_signature()
        if not _covers(signature, known_at):
            names, declared = self._store.entity_names(), self._store.entity_declarations()
            return EntityIndex(names, declared, known_at)
        with self._lock:
            current = self._current
            if current is not None and current[0] != signature:
                grown = self._grown(*current, signature)
                if grown is not None:
                    self._current = current = (signature, grown)
            if current is not None and current[0] == signature:
                return current[1]
        built = EntityIndex(self._store.entity_names(), self._store.entity_declarations())
        with self._lock:
            self._current = (signature, built)
        return built

    def classifying(self, names: Iterable[str], recorded: float) -> EntityIndex:
        """The index a write classifies its facts by: the current one as it will be once
        facts carrying ``names`` are recorded at ``recorded`` (built again with them only when
        one of them may join an entity, :meth:`EntityIndex.joins_none`)."""
        index = self.index()
        rows = index.newcomers(names, recorded)
        with self._lock:  # it reads the spellings an extension of the index adds to
            alone = not rows or index.joins_none(list(rows))
        return index if alone else index.built_with(rows.values())

    def names(self, name: str, known_at: float | None = None) -> list[str]:
        """The names, as the facts' index compares them, of the entity ``name`` reaches, a
        short form or nickname guessed (a lower-cased ``name`` itself when it reaches none)."""
        index = self.index(known_at)
        group = index.resolve(name, guess=True)
        return [name.strip().lower()] if group is None else index.names_of(group)

    def reached(self, names: Sequence[str], known_at: float | None = None) -> list[str]:
        """The stored names of every entity that one of ``names`` (a query's words and runs of
        words) reaches, in the order of the names that reach them."""
        index = self.index(known_at)
        out: dict[str, None] = {}
        for name in names:
            group = index.resolve(name)
            if group is not None:
                out.update(dict.fromkeys(index.names_of(group)))
        return list(out)

    def find(self, name: str, known_at: float | None = None) -> Entity:
        """The entity ``name`` reaches (a short form or nickname guessed); NotFound when none
        does."""
        index, group = self.group(name, known_at)
        return index.entity(group)

    def group(self, name: str, known_at: float | None = None) -> tuple[EntityIndex, str]:
        """The index as known at ``known_at`` and the group of the entity ``name`` reaches (a
        short form or nickname guessed); InvalidInput for a bad name, NotFound when it reaches
        none."""
        index = self.index(known_at)
        return index, _group(index, check_name(name, "name"), "name")

    def erased_with(self, name: str) -> tuple[Entity, list[str], list[str]] | None:
        """What a purge of the entity ``name`` is a name or alias of takes, as grouped now:
        the entity, its names as the facts' index compares them, and the names of every
        declaration (in any state) on one of its names. None when ``name`` is none of an
        entity's: a purge guesses no short form or nickname."""
        index = self.index()
        group = index.resolve(name)
        if group is None:
            return None
        keys = set(index.members(group))
        declared = {d[2] for d in self._store.entity_declarations() if entity_key(d[2]) in keys}
        return index.entity(group), index.names_of(group), sorted(declared)

    def listing(self, known_at: float | None, limit: int) -> list[Entity]:
        """The entities, the most facts first, at most ``limit``."""
        index = self.index(known_at)
        return [index.entity(g) for g in index.groups()[:limit]]

    def alias(self, name: str, of: str) -> Entity:
        """Declare ``name`` another name of the entity ``of`` reaches; returns that entity.
        InvalidInput for a bad name, NotFound when ``of`` reaches no entity."""
        name, of = check_name(name, "name"), check_name(of, "of")
        with self._store.transaction() as tx:
            index = EntityIndex(self._store.entity_names(), tx.entity_declarations())
            group = _group(index, of, "of")
            key = entity_key(name)
            if index.resolve(name) != group or key not in index.declared:
                target = index.names_of(group)[0]
                tx.declare_entity("alias", name, target, retract=_live(index, key))
        return self.find(of)

    def merge(self, kept: str, merged: str) -> Entity:
        """Declare the entity ``merged`` reaches the entity ``kept`` reaches (whose name it
        keeps); returns it. NotFound when either reaches none; one entity already: unchanged."""
        kept, merged = check_name(kept, "a"), check_name(merged, "b")
        with self._store.transaction() as tx:
            index = EntityIndex(self._store.entity_names(), tx.entity_declarations())
            into, other = _group(index, kept, "a"), _group(index, merged, "b")
            if into != other:
                head = index.entity(other).name
                tx.declare_entity(
                    "merge", head, index.names_of(into)[0], retract=_live(index, entity_key(head))
                )
        return self.find(kept)

    def split(self, alias: str) -> Entity:
        """Take the name ``alias`` out of the entity it is a name of, whether the rules found it
        or a caller declared it (a declared alias no fact carries is then no name at all);
        returns the entity it left, as it is after. NotFound when no entity has the name,
        Conflict when it is its entity's only name or other names are declared on it."""
        alias = check_name(alias, "alias")
        key = entity_key(alias)
        with self._store.transaction() as tx:
            names, declared = self._store.entity_names(), tx.entity_declarations()
            index = EntityIndex(names, declared)
            group = index.resolve(alias)
            if group is None:
                raise NotFound(f"no entity named {alias!r}")
            others = [k for k in index.members(group) if k != key]
            if not others:
                raise Conflict(f"{alias!r} is the only name of its entity: nothing to split")
            carried = [n for n in index.names_of(group) if entity_key(n) == key]
            retract = _live(index, key)
            after = [d for d in declared if d[0] not in retract]
            if carried:
                after.append((0, "split", alias, carried[0], tx.now, None))
            then = EntityIndex(names, after)
            still = then.resolve(alias)
            if still is not None and len(then.members(still)) > 1:
                raise Conflict(f"other names are declared on {alias!r}: split those first")
            tx.declare_entity(
                "split" if carried else None, alias, carried[0] if carried else "", retract=retract
            )
        return self.find(others[0])

    def rebuild(self) -> int:
        """Count every entity name again from the facts; returns how many there are."""
        with self._store.transaction() as tx:
            return tx.rebuild_entities()

    def _grown(
        self, before: EntitySignature, index: EntityIndex, signature: EntitySignature
    ) -> EntityIndex | None:
        """``index`` (as of the signature ``before``) with the names recorded since, when
        names were only added and each joins no entity (:meth:`EntityIndex.extended`)."""
        if _declared(before) != _declared(signature) or signature.removals != before.removals:
            return None
        if signature.name_position is None or signature.name_position <= (
            before.name_position or 0
        ):
            return None  # no name added (a store restored from an older copy: fewer)
        added = self._store.entity_names_added(before.name_position or 0, signature.name_position)
        return index.extended(added)


def _group(index: EntityIndex, name: str, field: str) -> str:
    group = index.resolve(name, guess=True)
    if group is None:
        raise NotFound(f"{field}: no entity named {name!r}")
    return group


def _live(index: EntityIndex, key: str) -> list[int]:
    """The live declaration of ``key``, which a new one replaces."""
    return [index.declared[key][0]] if key in index.declared else []


def _declared(signature: EntitySignature) -> tuple[Any, ...]:
    """The part of ``signature`` that the declarations make."""
    return (
        signature.declarations,
        signature.declaration_position,
        signature.declared_at,
        signature.retracted_at,
    )


def _covers(signature: EntitySignature, known_at: float | None) -> bool:
    """Whether a read as known at ``known_at`` sees every name and declaration, and every
    retraction of one, that the store holds (then the current index answers it)."""
    newest = (signature.named_at, signature.declared_at, signature.retracted_at)
    return known_at is None or all(t is None or known_at >= t for t in newest)


@functools.lru_cache(maxsize=2**16)
def _trigrams(word: str) -> frozenset[str]:
    padded = f"  {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def _longer_names(key: str, ordered: Sequence[str], *, exact: bool = False) -> set[str]:
    """The keys after ``key`` in ``ordered`` whose first word begins with it (is it, when
    ``exact`` or ``key`` is shorter than SHORT_FORM_MIN)."""
    found: set[str] = set()
    start = bisect.bisect_right(ordered, key)
    for other in ordered[start:]:
        if not other.startswith(key):
            break
        head = other.split(" ", 1)[0]
        # Only words of letters shorten: "mover" is not "mover0", nor "gpt" "gpt4".
        if head == key or (
            not exact and len(key) >= SHORT_FORM_MIN and key.isalpha() and head.isalpha()
        ):
            found.add(other)
    return found


def _one_entity(keys: Iterable[str]) -> bool:
    """Whether ``keys`` may all name one entity: one first word, and at most one name of more
    words ("melanie" and "melanie smith" may; "caroline smith" and "caroline jones" may not)."""
    listed = list(keys)
    return len({k.split(" ", 1)[0] for k in listed}) == 1 and sum(" " in k for k in listed) <= 1


class _Spellings:
    """Words compared by spelling, each in the group of the names with its other words (as
    :func:`_near_spellings` groups them): which words of a group a new word is spelt like."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        #: group -> its words and their trigrams.
        self.words: dict[tuple[int, str], dict[str, frozenset[str]]] = defaultdict(dict)
        for key in keys:
            self.add(key)

    def add(self, key: str) -> None:
        for group, word in _spelt_words(key):
            self.words[group][word] = _trigrams(word)

    def alike_any(self, new: dict[tuple[int, str], list[str]]) -> bool:
        """Whether adding the ``new`` words of each group would pair one (module docstring,
        2): one is spelt like a word of its group, here or new; or the group grows past
        NEAR_SPELLING_GROUP, where :func:`_near_spellings` leaves its words unpaired (the pairs
        made before would come undone). Past SPELLING_CHECKS comparisons, wary: yes."""
        checks = 0
        for group, words in new.items():
            held = self.words.get(group, {})
            if len(held) > NEAR_SPELLING_GROUP:
                continue  # unpaired before and after
            if len(held) > 1 and len(held) + len(words) > NEAR_SPELLING_GROUP:
                return True
            checks += len(words) * (len(held) + len(words))
            if checks > SPELLING_CHECKS:
                return True
            grams = [_trigrams(w) for w in words]
            for n, gs in enumerate(grams):
                for other in itertools.chain(held.values(), grams[n + 1 :]):
                    shared = len(gs & other)
                    if shared >= NEAR_SPELLING * (len(gs) + len(other) - shared):
                        return True
        return False


def _spelt_words(key: str) -> Iterator[tuple[tuple[int, str], str]]:
    """Each word of ``key`` compared by spelling, with its group: its position and the other
    words (the name with that word blanked)."""
    words = key.split(" ")
    for i, word in enumerate(words):
        # Only words of letters are spelt alike: "mover0" and "mover1", "room 101" and
        # "room 102" are as far apart as their numbers.
        if len(word) >= NEAR_SPELLING_MIN and word.isalpha():
            yield (i, " ".join([*words[:i], "\0", *words[i + 1 :]])), word


def _near_spellings(keys: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of keys with the same words but one, that one spelt alike; a key alike to more
    than one other in its group pairs with none."""
    groups: dict[tuple[int, str], list[tuple[str, str]]] = defaultdict(list)
    for key in keys:
        for group, word in _spelt_words(key):
            groups[group].append((word, key))
    pairs: list[tuple[str, str]] = []
    for members in groups.values():
        if not 1 < len(members) <= NEAR_SPELLING_GROUP:
            continue
        postings: dict[str, list[int]] = defaultdict(list)
        grams = [_trigrams(word) for word, _ in members]
        for n, gs in enumerate(grams):
            for g in gs:
                postings[g].append(n)
        for n, gs in enumerate(grams):
            shared = Counter(m for g in gs for m in postings[g] if m != n)
            alike = [
                m for m, s in shared.items() if s / (len(gs) + len(grams[m]) - s) >= NEAR_SPELLING
            ]
            if len(alike) == 1:
                pairs.append((members[n][1], members[alike[0]][1]))
    return pairs
