"""Profiles in SQL: an entity's current facts by key, the entities its facts are linked to, and
the summaries a chat model wrote of it (:mod:`graphmem.profiles` makes the profile).

1. The facts and links are read at the time scope of the profile, as every read is: a fact as
   the time rule shows it, a link when it and both of its ends are visible.
2. ``profile_summaries`` holds each summary under its entity and the signature of what the
   model was shown; ``profile_summary_facts`` the facts each was shown, so that a purge of any
   of them deletes the summary (:func:`forget`). They are derived, like the vector index: only
   the newest SUMMARIES_KEPT of an entity are kept, and nothing exports them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from ...models import Fact, fact_columns
from ...temporal import TimeScope
from .connections import SQLConnection
from .params import id_list
from .reads import FACT_LIST

#: Summaries kept per entity (the newest): one per state of its facts that was summarised.
SUMMARIES_KEPT: Final = 4


def facts(
    conn: SQLConnection,
    names: Sequence[str],
    scope: TimeScope,
    *,
    keys: int,
    per_key: int,
    unkeyed: int,
) -> tuple[list[Fact], list[Fact]]:
    """The visible facts of the entity ``names`` (as the facts' index compares them) with a
    key, at most ``per_key`` a key (the latest valid first) of the ``keys`` keys whose most
    important value is the most important (ties: the latest valid); and those without a key,
    at most ``unkeyed``, the most important then the newest first. One more of each than asked
    for when there are more, so a caller can tell."""
    d = conn.dialect
    params = {"names": id_list(names), **scope.params}
    lower_key = d.lower_key("f")
    keyed = conn.execute(
        f"""SELECT {FACT_LIST} FROM (
            SELECT {fact_columns("f", scope, param=d.param)}, f.seq AS seq,
                {lower_key} AS key_order,
                row_number() OVER (PARTITION BY {lower_key}
                    ORDER BY f.valid_from DESC, f.seq DESC) AS n,
                max(f.importance) OVER (PARTITION BY {lower_key}) AS key_importance,
                max(f.valid_from) OVER (PARTITION BY {lower_key}) AS key_latest
            FROM facts f WHERE {d.in_list(d.lower_entity("f"), d.param("names"))}
            AND f.key IS NOT NULL AND {scope.fact_clause(param=d.param)}
        ) AS ranked WHERE n <= {d.param("per_key")}
        ORDER BY key_importance DESC, key_latest DESC, key_order, n {d.limit(d.param("rows"))}""",
        {**params, "per_key": per_key + 1, "rows": (keys + 1) * (per_key + 1)},
    )
    plain = conn.execute(
        f"SELECT {fact_columns('f', scope, param=d.param)} FROM facts f"
        f" WHERE {d.in_list(d.lower_entity('f'), d.param('names'))} AND f.key IS NULL"
        f" AND {scope.fact_clause(param=d.param)}"
        f" ORDER BY f.importance DESC, {d.dated('f')} DESC, f.seq DESC {d.limit(d.param('n'))}",
        {**params, "n": unkeyed + 1},
    )
    return [Fact.from_values(r) for r in keyed], [Fact.from_values(r) for r in plain]


def links(
    conn: SQLConnection, names: Sequence[str], scope: TimeScope, *, limit: int
) -> list[tuple[str, str, int]]:
    """(entity name as compared, link type, links) for the other entities' facts that visible
    links (not SUPERSEDES) join to visible facts of the entity ``names``, either way: the most
    links first, at most ``limit``."""
    d = conn.dialect
    ends = [
        f"SELECT {d.lower_entity('o')} AS name, l.type AS type"
        f" FROM facts f JOIN links l ON l.{near} = f.id JOIN facts o ON o.id = l.{far}"
        f" WHERE {d.in_list(d.lower_entity('f'), d.param('names'))}"
        f" AND {scope.fact_clause(param=d.param)} AND {scope.link_clause(param=d.param)}"
        f" AND {scope.fact_clause('o', param=d.param)} AND o.entity IS NOT NULL"
        f" AND {d.in_list(d.lower_entity('o'), d.param('names'), negated=True)}"
        " AND l.type <> 'SUPERSEDES'"
        for near, far in (("source_id", "target_id"), ("target_id", "source_id"))
    ]
    rows = conn.execute(
        f"SELECT name, type, count(*) AS n FROM ({' UNION ALL '.join(ends)}) AS ends"
        f" GROUP BY name, type ORDER BY n DESC, name, type {d.limit(d.param('limit'))}",
        {"names": id_list(names), "limit": limit, **scope.params},
    )
    return [(r[0], r[1], int(r[2])) for r in rows]


def summary(conn: SQLConnection, entity: str, signature: str) -> tuple[str, list[str]] | None:
    """The summary kept of ``entity`` under ``signature``, and the ids of the facts it cites."""
    d = conn.dialect
    row = conn.execute(
        f"SELECT summary, cited FROM profile_summaries WHERE entity = {d.arg}"
        f" AND signature = {d.arg}",
        [entity, signature],
    ).fetchone()
    return None if row is None else (row[0], list(json.loads(row[1])))


def keep(
    conn: SQLConnection,
    entity: str,
    signature: str,
    text: str,
    cited: Sequence[str],
    shown: Sequence[str],
    now: float,
) -> bool:
    """Keep a summary of ``entity`` under ``signature``, resting on the facts ``shown`` (citing
    ``cited``), in place of one kept under it before; the entity's oldest beyond SUMMARIES_KEPT
    go. Not when a fact shown is gone (a purge since it was read): returns whether it kept it."""
    d = conn.dialect
    shown = list(dict.fromkeys(shown))
    (present,) = conn.execute(
        f"SELECT count(*) FROM facts WHERE {d.in_list('id', d.param('ids'))}",
        {"ids": id_list(shown)},
    ).fetchone()
    if present != len(shown):
        return False
    old = conn.execute(
        f"SELECT seq FROM profile_summaries WHERE entity = {d.arg} AND signature = {d.arg}",
        [entity, signature],
    )
    _delete(conn, [r[0] for r in old])
    (seq,) = conn.execute(
        "INSERT INTO profile_summaries (entity, signature, summary, cited, created_at)"
        f" VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}) RETURNING seq",
        [entity, signature, text, json.dumps(list(cited)), now],
    ).fetchone()
    conn.executemany(
        f"INSERT INTO profile_summary_facts (fact_id, summary_seq) VALUES ({d.arg}, {d.arg})",
        [(fact_id, seq) for fact_id in shown],
    )
    kept = conn.execute(
        f"SELECT seq FROM profile_summaries WHERE entity = {d.arg} ORDER BY seq DESC", [entity]
    )
    _delete(conn, [r[0] for r in kept][SUMMARIES_KEPT:])
    return True


def forget(conn: SQLConnection, ids: Sequence[str]) -> None:
    """Delete every summary that was shown one of the facts ``ids`` (a purge of them)."""
    d = conn.dialect
    seqs = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT summary_seq FROM profile_summary_facts"
            f" WHERE {d.in_list('fact_id', d.param('ids'))}",
            {"ids": id_list(ids)},
        )
    ]
    _delete(conn, seqs)


def _delete(conn: SQLConnection, seqs: Sequence[int]) -> None:
    if not seqs:
        return
    d = conn.dialect
    param = {"seqs": id_list(seqs)}
    conn.execute(
        "DELETE FROM profile_summary_facts"
        f" WHERE {d.in_list('summary_seq', d.param('seqs'), kind='bigint')}",
        param,
    )
    conn.execute(
        f"DELETE FROM profile_summaries WHERE {d.in_list('seq', d.param('seqs'), kind='bigint')}",
        param,
    )
