"""The bitemporal rule, checked everywhere at once against a reference model.

Hypothesis draws a history of writes under a controlled clock (stores, back-dated stores that
become history, updates by entity and key, explicit supersessions, forgets, links with and
without a validity, relinks, unlinks, purges). A small reference model replays the same events.
Then, at sampled (asOf, knownAt) pairs, every read path (get, get_many, facts, lookup, history,
links, traverse, path, search, recall, the GraphQL fields and the MCP tools) must show exactly
the facts and links the model says are visible, each field as memory knew it at knownAt.

``MODEL_EXAMPLES`` sets how many histories are drawn (``make soak`` draws many more).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

import pytest
from graphmem.server.http.app import create_app
from graphmem.server.mcp import tools
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphmem import Conflict, Fact, InvalidInput, Link, Memory, Settings
from graphmem.temporal import parse_time

from ..support.clock import Clock
from ..support.graphql_clients import InProcess


class At(TypedDict):
    """A read's time scope, as keyword arguments."""

    as_of: float | None
    known_at: float | None


#: ``DataObject.draw``: a value from a strategy, with a label for the failure report.
Draw = Callable[..., Any]

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "40"))
STEPS = 14
#: Valid times a write may give (None: the moment of the write).
VALID_FROMS = (None, "2020", "2022-03", "2024-06-15", "2025-12-31T12:00")
LINK_UNTILS = (None, "2023", "2024-06-15", "2027")
ENTITIES = ("ana", "bo")
KEYS = ("city", "employer")
KINDS = ("CAUSED_BY", "PART_OF", "RELATED_TO", "DEPENDS_ON")
EVERY_TYPE = (*KINDS, "SUPERSEDES")
#: Every text holds this word, so a keyword search for it matches every fact.
WORD = "memo"


# ----------------------------------------------------------------------------- the model


@dataclass
class MFact:
    id: str
    seq: int
    entity: str | None
    key: str | None
    valid_from: float
    recorded_at: float
    valid_until: float | None = None
    valid_until_recorded_at: float | None = None
    superseded_by: str | None = None
    supersedes_id: str | None = None
    retracted_at: float | None = None

    @property
    def current(self) -> bool:
        return self.retracted_at is None and self.superseded_by is None


@dataclass
class MLink:
    key: Any  # the link id; (source, target) for a supersession link, whose id memory makes
    source_id: str
    target_id: str
    type: str
    strength: float
    recorded_at: float
    valid_from: float
    valid_until: float | None = None
    valid_until_recorded_at: float | None = None
    retracted_at: float | None = None


@dataclass
class Model:
    facts: dict[str, MFact] = field(default_factory=dict)
    links: dict[Any, MLink] = field(default_factory=dict)
    moments: list[float] = field(default_factory=list)

    # --- writes, as the write rules make them

    def store(
        self, fact_id: str, now: float, valid_from: float, entity: str | None, key: str | None
    ) -> tuple[str, tuple[str, ...]]:
        new = MFact(fact_id, len(self.facts), entity, key, valid_from, now)
        same = [
            f
            for f in self.facts.values()
            if key is not None
            and (f.entity, f.key) == (entity, key)
            and self.fact_visible(f, now, now)
        ]
        assert len(same) <= 1  # the rules keep one current value per entity and key
        self.facts[fact_id] = new
        if not same:
            return "ADD", ()
        [old] = same
        if old.valid_from <= valid_from:
            self._supersede(new, old, now)
            return "UPDATE", (old.id,)
        new.valid_until, new.valid_until_recorded_at, new.superseded_by = (
            old.valid_from,
            now,
            old.id,
        )
        self._supersession_link(old, new, now)
        if old.supersedes_id is None:
            old.supersedes_id = fact_id
        return "ADD", ()

    def supersede(self, fact_id: str, now: float, valid_from: float, old_id: str) -> None:
        new = MFact(fact_id, len(self.facts), None, None, valid_from, now)
        self.facts[fact_id] = new
        self._supersede(new, self.facts[old_id], now)

    def _supersede(self, new: MFact, old: MFact, now: float) -> None:
        old.valid_until, old.valid_until_recorded_at = new.valid_from, now
        old.superseded_by, new.supersedes_id = new.id, old.id
        self._supersession_link(new, old, now)

    def _supersession_link(self, newer: MFact, older: MFact, now: float) -> None:
        key = (newer.id, older.id)
        self.links[key] = MLink(key, newer.id, older.id, "SUPERSEDES", 1.0, now, newer.valid_from)

    def forget(self, fact_id: str, now: float) -> None:
        self.facts[fact_id].retracted_at = now

    def live_link(self, source: str, target: str, kind: str) -> MLink | None:
        return next(
            (
                k
                for k in self.links.values()
                if (k.source_id, k.target_id, k.type) == (source, target, kind)
                and k.retracted_at is None
            ),
            None,
        )

    def link_validity(
        self, source: str, target: str, kind: str, start: float | None, until: float | None
    ) -> tuple[float, float | None]:
        live = self.live_link(source, target, kind)
        if live is None:
            ends = self.facts[source].valid_from, self.facts[target].valid_from
            return (max(ends) if start is None else start), until
        return (
            live.valid_from if start is None else start,
            live.valid_until if until is None else until,
        )

    def link(self, made: Link, now: float, strength: float, validity: tuple[float, float | None]):
        live = self.live_link(made.source_id, made.target_id, made.type)
        if live is not None and (live.valid_from, live.valid_until) == validity:
            assert made.id == live.key
            live.strength = strength
            return
        if live is not None:
            live.retracted_at = now
        start, until = validity
        self.links[made.id] = MLink(
            made.id,
            made.source_id,
            made.target_id,
            made.type,
            strength,
            now,
            start,
            until,
            None if until is None else now,
        )

    def purge(self, fact_id: str) -> None:
        del self.facts[fact_id]
        for key in [k for k, v in self.links.items() if fact_id in (v.source_id, v.target_id)]:
            del self.links[key]
        for f in self.facts.values():
            if f.superseded_by == fact_id:
                f.superseded_by = None
            if f.supersedes_id == fact_id:
                f.supersedes_id = None

    # --- reads

    def fact_visible(self, f: MFact, t: float, k: float, *, superseded: bool = False) -> bool:
        return (
            f.recorded_at <= k
            and (f.retracted_at is None or f.retracted_at > k)
            and f.valid_from <= t
            and (
                superseded
                or not (
                    f.valid_until is not None
                    and f.valid_until_recorded_at is not None
                    and f.valid_until_recorded_at <= k
                    and f.valid_until <= t
                )
            )
        )

    def link_visible(self, link: MLink, t: float, k: float) -> bool:
        return (
            link.recorded_at <= k
            and (link.retracted_at is None or link.retracted_at > k)
            and link.valid_from <= t
            and not (
                link.valid_until is not None
                and link.valid_until_recorded_at is not None
                and link.valid_until_recorded_at <= k
                and link.valid_until <= t
            )
        )

    def visible(self, t: float, k: float, *, superseded: bool = False) -> dict[str, tuple]:
        return {
            i: self.fact_view(f, k)
            for i, f in self.facts.items()
            if self.fact_visible(f, t, k, superseded=superseded)
        }

    def fact_view(self, f: MFact, k: float) -> tuple:
        """The fields that change after a fact is recorded, as memory knew them at ``k``."""
        ended = f.valid_until_recorded_at is not None and f.valid_until_recorded_at <= k
        named = self.facts.get(f.supersedes_id) if f.supersedes_id else None
        return (
            f.id,
            f.valid_from,
            f.recorded_at,
            f.valid_until if ended else None,
            f.valid_until_recorded_at if ended else None,
            f.superseded_by if ended else None,
            f.retracted_at if f.retracted_at is not None and f.retracted_at <= k else None,
            f.supersedes_id if named is not None and named.recorded_at <= k else None,
        )

    def link_view(self, link: MLink, k: float) -> tuple:
        ended = link.valid_until_recorded_at is not None and link.valid_until_recorded_at <= k
        gone = link.retracted_at is not None and link.retracted_at <= k
        return (
            link.key,
            link.source_id,
            link.target_id,
            link.type,
            link.strength,
            link.recorded_at,
            link.valid_from,
            link.valid_until if ended else None,
            link.retracted_at if gone else None,
        )

    def links_of(self, fact_id: str, t: float, k: float) -> dict[Any, tuple]:
        return {
            key: self.link_view(v, k)
            for key, v in self.links.items()
            if fact_id in (v.source_id, v.target_id) and self.link_visible(v, t, k)
        }

    def history(self, fact_id: str, t: float, k: float) -> list[str]:
        chain, todo = {fact_id}, [fact_id]
        while todo:
            at = todo.pop()
            for v in self.links.values():
                if v.type == "SUPERSEDES" and at in (v.source_id, v.target_id):
                    other = v.target_id if v.source_id == at else v.source_id
                    if other not in chain:
                        chain.add(other)
                        todo.append(other)
        versions = [
            f
            for f in self.facts.values()
            if f.id in chain
            and f.recorded_at <= k
            and (f.retracted_at is None or f.retracted_at > k)
            and f.valid_from <= t
        ]
        versions.sort(key=lambda f: (f.valid_from, f.recorded_at, f.seq))
        return [f.id for f in versions]

    def walk(
        self, starts: Iterable[str], t: float, k: float, types: tuple[str, ...], depth: int
    ) -> tuple[dict[str, int], set[Any]]:
        """Breadth-first over visible links of ``types`` (both directions) to visible facts:
        each fact's depth, and the keys of the visible links among the facts reached."""
        superseded = "SUPERSEDES" in types

        def seen(i: str) -> bool:
            f = self.facts.get(i)
            return f is not None and self.fact_visible(f, t, k, superseded=superseded)

        usable = [v for v in self.links.values() if v.type in types and self.link_visible(v, t, k)]
        reached = {i: 0 for i in starts if seen(i)}
        frontier = list(reached)
        for level in range(1, depth + 1):
            found = []
            for v in usable:
                for near, far in ((v.source_id, v.target_id), (v.target_id, v.source_id)):
                    if near in frontier and far not in reached and seen(far):
                        reached[far] = level
                        found.append(far)
            frontier = found
        edges = {v.key for v in usable if v.source_id in reached and v.target_id in reached}
        return reached, edges


# ----------------------------------------------------------------------------- the engine's answers


def seconds(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def view(f: Fact) -> tuple:
    return (
        f.id,
        seconds(f.valid_from),
        seconds(f.recorded_at),
        seconds(f.valid_until),
        seconds(f.valid_until_recorded_at),
        f.superseded_by,
        seconds(f.retracted_at),
        f.supersedes_id,
    )


def link_key(link: Link) -> Any:
    return (link.source_id, link.target_id) if link.type == "SUPERSEDES" else link.id


def link_view(link: Link) -> tuple:
    return (
        link_key(link),
        link.source_id,
        link.target_id,
        link.type,
        link.strength,
        seconds(link.recorded_at),
        seconds(link.valid_from),
        seconds(link.valid_until),
        seconds(link.retracted_at),
    )


def dict_view(d: dict[str, Any]) -> tuple:
    """A fact as the MCP tools return it (ISO-8601 text)."""
    return (
        d["id"],
        parse_time(d["valid_from"]),
        parse_time(d["recorded_at"]),
        parse_time(d["valid_until"]),
        parse_time(d["valid_until_recorded_at"]),
        d["superseded_by"],
        parse_time(d["retracted_at"]),
        d["supersedes_id"],
    )


# ----------------------------------------------------------------------------- the histories


@contextmanager
def memory(clock: Clock) -> Iterator[tuple[Memory, Path]]:
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        with Memory.open(data, settings=_settings(data), clock=clock) as mem:
            yield mem, data


def _settings(data: Path) -> Settings:
    return Settings(embedder="hash", data_dir=data, autolink=False, track_access=False)


def run_history(mem: Memory, model: Model, clock: Clock, draw: Draw) -> None:
    for n in range(draw(st.integers(3, STEPS), label="steps")):
        clock.advance(draw(st.sampled_from((60, 3600, 86400)), label="pause"))
        now = clock.now
        model.moments.append(now)
        # A purged successor leaves its predecessor ended with no successor: not live.
        live = [f.id for f in model.facts.values() if f.current and model.fact_visible(f, now, now)]
        known = [f.id for f in model.facts.values() if f.retracted_at is None]
        ops = ["store", "store"]
        if live:
            ops.append("supersede")
        if known:
            ops.append("forget")
        if len(known) >= 2:
            ops += ["link", "link"]
        if any(v.retracted_at is None and v.type != "SUPERSEDES" for v in model.links.values()):
            ops.append("unlink")
        if model.facts:
            ops.append("purge")
        op = draw(st.sampled_from(ops), label="op")
        if op == "store":
            given = draw(st.sampled_from(VALID_FROMS), label="valid_from")
            entity = draw(st.sampled_from((None, *ENTITIES)), label="entity")
            key = None if entity is None else draw(st.sampled_from((None, *KEYS)), label="key")
            text = f"{WORD} {n} {entity or 'someone'} {key or 'note'} value{n}"
            result = mem.store(
                text,
                entity=entity,
                key=key,
                value=None if key is None else f"value{n}",
                valid_from=given,
                decay_class="permanent",
            )
            assert result.fact is not None
            start = now if given is None else parse_time(given)
            assert start is not None
            expected = model.store(result.fact.id, now, start, entity, key)
            assert (result.action, result.target_ids) == expected, result.reason
        elif op == "supersede":
            old = model.facts[draw(st.sampled_from(live), label="old")]
            given = draw(st.sampled_from(VALID_FROMS), label="valid_from")
            start = now if given is None else parse_time(given)
            assert start is not None
            if start < old.valid_from:
                with pytest.raises(InvalidInput):
                    mem.store(f"{WORD} {n} replaces", supersedes=old.id, valid_from=given)
                continue
            result = mem.store(
                f"{WORD} {n} replaces {old.id}",
                supersedes=old.id,
                valid_from=given,
                decay_class="permanent",
            )
            assert result.fact is not None and result.action == "UPDATE"
            model.supersede(result.fact.id, now, start, old.id)
        elif op == "forget":
            target = draw(st.sampled_from(known), label="forget")
            mem.forget(target)
            model.forget(target, now)
            with pytest.raises(Conflict):
                mem.forget(target)
        elif op == "link":
            source = draw(st.sampled_from(known), label="source")
            target = draw(st.sampled_from([i for i in known if i != source]), label="target")
            kind = draw(st.sampled_from(KINDS), label="type")
            given = draw(st.sampled_from(VALID_FROMS), label="link_from")
            until = draw(st.sampled_from(LINK_UNTILS), label="link_until")
            strength = draw(st.sampled_from((0.3, 1.0)), label="strength")
            validity = model.link_validity(
                source, target, kind, parse_time(given), parse_time(until)
            )
            if validity[1] is not None and validity[1] <= validity[0]:
                with pytest.raises(InvalidInput):
                    mem.link(source, target, kind, valid_from=given, valid_until=until)
                continue
            made = mem.link(
                source, target, kind, strength=strength, valid_from=given, valid_until=until
            )
            model.link(made, now, strength, validity)
        elif op == "unlink":
            link = draw(
                st.sampled_from(
                    [
                        v
                        for v in model.links.values()
                        if v.retracted_at is None and v.type != "SUPERSEDES"
                    ]
                ),
                label="unlink",
            )
            mem.unlink(link.key)
            link.retracted_at = now
        else:
            target = draw(st.sampled_from(list(model.facts)), label="purge")
            mem.purge(target)
            model.purge(target)


def scopes(model: Model, clock: Clock, draw: Draw) -> list[tuple[float | None, float | None]]:
    """(asOf, knownAt) pairs around the moments that matter: each write and each valid time."""
    valid = {
        t for f in model.facts.values() for t in (f.valid_from, f.valid_until) if t is not None
    } | {t for v in model.links.values() for t in (v.valid_from, v.valid_until) if t is not None}
    as_ofs = sorted({None, *valid, *(t - 1 for t in valid)}, key=lambda t: (t is not None, t))
    known_ats = [None, *model.moments, *(t - 1 for t in model.moments)]
    pairs: list[tuple[float | None, float | None]] = [(None, None)]
    for _ in range(3):
        pairs.append(
            (
                draw(st.sampled_from(as_ofs), label="as_of"),
                draw(st.sampled_from(known_ats), label="known_at"),
            )
        )
    return pairs


def check_python(
    mem: Memory, model: Model, clock: Clock, as_of: float | None, known_at: float | None
) -> None:
    t = clock.now if as_of is None else as_of
    k = clock.now if known_at is None else known_at
    at: At = {"as_of": as_of, "known_at": known_at}
    visible = model.visible(t, k)
    with_superseded = model.visible(t, k, superseded=True)
    ids = [*model.facts, "purged-or-unknown"]

    for i in ids:
        got = mem.get(i, **at)
        assert (None if got is None else view(got)) == visible.get(i), ("get", i)
    assert {i: view(f) for i, f in mem.get_many(ids, **at).items()} == visible
    assert {
        i: view(f) for i, f in mem.get_many(ids, include_superseded=True, **at).items()
    } == with_superseded
    page = mem.facts(first=500, **at)
    assert {f.id: view(f) for _, f in page.items} == visible and not page.has_more
    for entity in ENTITIES:
        for superseded, expected in ((False, visible), (True, with_superseded)):
            found = mem.lookup(entity, include_superseded=superseded, limit=500, **at)
            assert {f.id: view(f) for f in found} == {
                i: v for i, v in expected.items() if model.facts[i].entity == entity
            }
    hits = mem.search(WORD, mode="fts", limit=500, **at)
    assert {h.fact.id: view(h.fact) for h in hits} == visible
    hybrid = mem.search(f"{WORD} ana city", limit=500, **at)
    assert {h.fact.id: view(h.fact) for h in hybrid} == visible
    recalled = mem.recall(f"{WORD} ana bo", **at).facts
    assert all(visible.get(f.id) == view(f) for f in recalled)

    for i in model.facts:
        assert [v.id for v in mem.history(i, **at)] == model.history(i, t, k)
        assert all(view(v) == model.fact_view(model.facts[v.id], k) for v in mem.history(i, **at))
        assert {link_key(x): link_view(x) for x in mem.links(i, **at)} == model.links_of(i, t, k)
    for types in (KINDS, EVERY_TYPE):
        for start in model.facts:
            sub = mem.traverse(start, depth=3, types=types, **at)
            reached, edges = model.walk([start], t, k, types, 3)
            assert {n.fact.id: n.depth for n in sub.nodes} == reached
            assert all(
                view(n.fact) == model.fact_view(model.facts[n.fact.id], k) for n in sub.nodes
            )
            assert {link_key(e) for e in sub.edges} == edges
            assert all(
                link_view(e) == model.link_view(model.links[link_key(e)], k) for e in sub.edges
            )
    starts = list(model.facts)[:3]
    for a in starts:
        reached, _ = model.walk([a], t, k, KINDS, 6)
        for b in model.facts:
            path = mem.path(a, b, max_depth=6, **at)
            assert (path is None) == (b not in reached), ("path", a, b)
            if path is not None:
                assert len(path.links) == reached[b]
                assert all(
                    link_view(x) == model.link_view(model.links[link_key(x)], k) for x in path.links
                )


def check_mcp(
    mem: Memory, model: Model, clock: Clock, as_of: float | None, known_at: float | None
) -> None:
    t = clock.now if as_of is None else as_of
    k = clock.now if known_at is None else known_at
    visible = model.visible(t, k)
    _, found = tools.search(
        mem,
        tools.SearchArgs(query=WORD, limit=500, as_of=as_of, known_at=known_at),
    )
    assert {h["fact"]["id"]: dict_view(h["fact"]) for h in found["hits"]} == visible
    for entity in ENTITIES:
        _, found = tools.lookup(
            mem, tools.LookupArgs(entity=entity, as_of=as_of, known_at=known_at)
        )
        assert {f["id"]: dict_view(f) for f in found["facts"]} == {
            i: v for i, v in visible.items() if model.facts[i].entity == entity
        }


GRAPHQL = """query($asOf: DateTime, $knownAt: DateTime) {
  facts(first: 500, asOf: $asOf, knownAt: $knownAt) { edges { node {
    id validFrom recordedAt validUntil validUntilRecordedAt supersededById retractedAt supersedesId
    supersedes { id } supersededBy { id } history { id }
    knownNow { validUntil supersededById retractedAt }
    links(first: 500) { edges { link { id type sourceId targetId validUntil retractedAt } } }
  } } } }"""


def check_graphql(api: InProcess, model: Model, clock: Clock, as_of, known_at) -> None:
    t = clock.now if as_of is None else as_of
    k = clock.now if known_at is None else known_at
    visible = model.visible(t, k)
    data = api.data(GRAPHQL, {"asOf": as_of, "knownAt": known_at})
    nodes = {e["node"]["id"]: e["node"] for e in data["facts"]["edges"]}
    assert set(nodes) == set(visible)
    for i, node in nodes.items():
        assert (
            node["id"],
            parse_time(node["validFrom"]),
            parse_time(node["recordedAt"]),
            parse_time(node["validUntil"]),
            parse_time(node["validUntilRecordedAt"]),
            node["supersededById"],
            parse_time(node["retractedAt"]),
            node["supersedesId"],
        ) == visible[i]
        f = model.facts[i]
        for name, other in (
            ("supersedes", node["supersedesId"]),
            ("supersededBy", node["supersededById"]),
        ):
            shown = other is not None and model.fact_visible(
                model.facts[other], t, k, superseded=True
            )
            assert node[name] == ({"id": other} if shown else None), (name, i)
        assert [v["id"] for v in node["history"]] == model.history(i, t, k)
        now = node["knownNow"]
        assert (
            parse_time(now["validUntil"]),
            now["supersededById"],
            parse_time(now["retractedAt"]),
        ) == (
            f.valid_until,
            f.superseded_by,
            f.retracted_at,
        )
        links = {
            (e["link"]["sourceId"], e["link"]["targetId"])
            if e["link"]["type"] == "SUPERSEDES"
            else e["link"]["id"]: (
                parse_time(e["link"]["validUntil"]),
                parse_time(e["link"]["retractedAt"]),
            )
            for e in node["links"]["edges"]
        }
        assert links == {key: (v[7], v[8]) for key, v in model.links_of(i, t, k).items()}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_every_read_answers_what_the_event_log_says_at_every_time_scope(
    data: st.DataObject,
) -> None:
    clock = Clock()
    model = Model()
    with memory(clock) as (mem, folder):
        run_history(mem, model, clock, data.draw)
        pairs = scopes(model, clock, data.draw)
        for as_of, known_at in pairs:
            check_python(mem, model, clock, as_of, known_at)
            check_mcp(mem, model, clock, as_of, known_at)
        mem.close()
        with InProcess(create_app(_settings(folder), clock=clock)) as api:
            for as_of, known_at in pairs:
                check_graphql(api, model, clock, as_of, known_at)
