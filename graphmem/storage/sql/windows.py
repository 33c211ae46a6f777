"""Windows of turns in SQL: cut when an episode's facts are written, cut again when one is
purged or an episode imported, and read for search (:mod:`graphmem.windows` says how search
uses them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from .connections import SQLConnection
from .params import id_list

#: Facts a window holds at most: the fact it ends on and those before it in the episode.
WINDOW_TURNS: Final = 4


def add(conn: SQLConnection, episode_id: str, facts: Sequence[tuple[str, str]]) -> int:
    """Cut the windows ending on each of ``facts`` (new facts of the episode, (id, text), in
    order), after the episode's earlier facts not forgotten; returns how many."""
    d = conn.dialect
    if not facts:
        return 0
    earlier = conn.execute(
        f"SELECT id, text FROM facts WHERE episode_id = {d.param('episode')} AND retracted_at IS"
        " NULL"
        f" AND {d.in_list('id', d.param('ids'), negated=True)} ORDER BY seq DESC"
        f" {d.limit(d.param('n'))}",
        {"episode": episode_id, "ids": id_list(i for i, _ in facts), "n": WINDOW_TURNS - 1},
    ).fetchall()
    order = [(r[0], r[1]) for r in reversed(earlier)] + list(facts)
    return _insert(conn, episode_id, cut(order, first=len(earlier)))


def rebuild(conn: SQLConnection, episode_ids: Iterable[str]) -> int:
    """Cut the windows of ``episode_ids`` again from their facts not forgotten (after a purge,
    an import or for a backfill); returns how many windows they now have."""
    d = conn.dialect
    made = 0
    for episode_id in episode_ids:
        old = [
            r[0]
            for r in conn.execute(
                f"SELECT end_id FROM windows WHERE episode_id = {d.arg}", [episode_id]
            )
        ]
        conn.execute(
            f"DELETE FROM window_facts WHERE {d.in_list('end_id', d.param('ids'))}",
            {"ids": id_list(old)},
        )
        conn.execute(f"DELETE FROM windows WHERE episode_id = {d.arg}", [episode_id])
        order = conn.execute(
            f"SELECT id, text FROM facts WHERE episode_id = {d.arg} AND retracted_at IS NULL ORDER"
            " BY seq",
            [episode_id],
        ).fetchall()
        made += _insert(conn, episode_id, cut([(r[0], r[1]) for r in order], first=0))
    return made


def episodes(conn: SQLConnection, *, of: Sequence[str] | None = None) -> list[str]:
    """The episodes that have facts (those of the facts ``of``, when given), oldest first."""
    d = conn.dialect
    if of is None:
        rows = conn.execute(
            "SELECT id FROM episodes e"
            " WHERE EXISTS (SELECT 1 FROM facts f WHERE f.episode_id = e.id) ORDER BY seq"
        )
    else:
        rows = conn.execute(
            "SELECT id FROM episodes e WHERE id IN"
            f" (SELECT episode_id FROM facts WHERE {d.in_list('id', d.param('ids'))}) ORDER BY seq",
            {"ids": id_list(of)},
        )
    return [r[0] for r in rows]


def holding(conn: SQLConnection, fact_ids: Sequence[str]) -> dict[int, tuple[str, ...]]:
    """The windows holding any of ``fact_ids``: window -> its facts, in the episode's order."""
    d = conn.dialect
    if not fact_ids:
        return {}
    rows = conn.execute(
        "SELECT w.seq, w.fact_ids FROM windows w WHERE w.end_id IN"
        f" (SELECT m.end_id FROM window_facts m WHERE {d.in_list('m.fact_id', d.param('ids'))})",
        {"ids": id_list(fact_ids)},
    )
    return {int(r[0]): tuple(r[1].split()) for r in rows}


def members(conn: SQLConnection, seqs: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """The facts of the windows ``seqs``, in the episode's order."""
    d = conn.dialect
    if not seqs:
        return {}
    rows = conn.execute(
        f"SELECT seq, fact_ids FROM windows"
        f" WHERE {d.in_list('seq', d.param('ids'), kind='bigint')}",
        {"ids": id_list(seqs)},
    )
    return {int(r[0]): tuple(r[1].split()) for r in rows}


@dataclass(frozen=True, slots=True)
class Window:
    end_id: str  # the fact it ends on, which keys it
    fact_ids: tuple[str, ...]  # in the episode's order
    text: str


def cut(order: Sequence[tuple[str, str]], *, first: int) -> list[Window]:
    """The windows ending on each fact of ``order`` (an episode's ``(id, text)``, in order) from
    position ``first`` on; a fact with none before it ends no window (it is its own)."""
    out = []
    for end in range(first, len(order)):
        held = order[max(0, end - WINDOW_TURNS + 1) : end + 1]
        if len(held) > 1:
            out.append(Window(held[-1][0], tuple(i for i, _ in held), " ".join(t for _, t in held)))
    return out


def _insert(conn: SQLConnection, episode_id: str, made: list[Window]) -> int:
    d = conn.dialect
    conn.executemany(
        f"INSERT INTO windows (end_id, episode_id, fact_ids, text)"
        f" VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg})",
        [(w.end_id, episode_id, " ".join(w.fact_ids), w.text) for w in made],
    )
    conn.executemany(
        f"INSERT INTO window_facts (fact_id, end_id) VALUES ({d.arg}, {d.arg})",
        [(f, w.end_id) for w in made for f in w.fact_ids],
    )
    return len(made)
