"""Erasure in SQL: what a purge filter selects, what purging it would remove, and the record
that it happened (:mod:`graphmem.erasure` holds the filter and the reports).

A purge also takes the conversation behind the facts it names: a fact drawn from a turn repeats
that turn's words, so the turn goes with it, and the facts drawn from a purged turn go with the
turn. Both through the ``capture`` PART_OF links, one step each way: a turn taken with one of
its facts does not take the others, which are facts of their own.
"""

from __future__ import annotations

import json
from typing import Any

from ...erasure import Erasure, PurgeFilter, PurgeReport
from ...errors import InvalidInput
from ...limits import MAX_LIMIT
from ...models import LinkOrigin
from ...temporal import to_datetime
from .connections import SQLConnection
from .dialect import Dialect
from .params import id_list


def purge_clause(d: Dialect, where: PurgeFilter) -> tuple[str, dict[str, Any]]:
    """The SQL condition on ``facts f`` that selects what ``where`` names, and its parameters."""
    clauses, params = [], {}
    if where.ids is not None:
        clauses.append(f"{d.in_list('f.id', d.param('purge_ids'))}")
        params["purge_ids"] = id_list(where.ids)
    if where.entity_names:
        clauses.append(d.in_list(d.lower_entity("f"), d.param("purge_names")))
        params["purge_names"] = id_list(where.entity_names)
    elif where.entity is not None:
        clauses.append(f"{d.lower_entity('f')} = lower({d.param('purge_entity')})")
        params["purge_entity"] = where.entity.strip()
    if where.source is not None:
        # A document's chunks: the file's path followed by ":first-last".
        clauses.append(
            f"(f.source = {d.param('purge_source')} OR (f.source > {d.param('purge_source')} || ':'"
            f" AND f.source < {d.param('purge_source')} || ';'))"
        )
        params["purge_source"] = where.source
    if where.episode is not None:
        clauses.append(f"f.episode_id = {d.param('purge_episode')}")
        params["purge_episode"] = where.episode
    return " AND ".join(clauses), params


def count(conn: SQLConnection, where: PurgeFilter) -> PurgeReport:
    """What purging ``where`` would remove, without removing it."""
    d = conn.dialect
    ids = matching(conn, where)
    found = id_list(ids)
    (links,) = conn.execute(
        f"SELECT count(*) FROM links WHERE {d.in_list('source_id', d.arg)}"
        f" OR {d.in_list('target_id', d.arg)}",
        [found, found],
    ).fetchone()
    (vectors,) = conn.execute(
        f"SELECT count(*) FROM facts WHERE {d.in_list('id', d.arg)} AND vector_of IS NULL",
        [found],
    ).fetchone()
    (episodes,) = conn.execute(
        "SELECT count(DISTINCT e.id) FROM episodes e JOIN facts f ON f.episode_id = e.id"
        f" WHERE {d.in_list('f.id', d.param('ids'))} AND NOT EXISTS ("
        "  SELECT 1 FROM facts o WHERE o.episode_id = e.id"
        f"  AND {d.in_list('o.id', d.param('ids'), negated=True)})",
        {"ids": found},
    ).fetchone()
    return PurgeReport(
        len(ids), int(links), int(vectors), int(episodes), dry_run=True, names=where.covered
    )


def matching(conn: SQLConnection, where: PurgeFilter) -> list[str]:
    """The ids of the facts ``where`` names, then of the turns they were drawn from and the
    facts drawn from the turns among them (see the module's docstring)."""
    d = conn.dialect
    clause, params = purge_clause(conn.dialect, where)
    named = [r[0] for r in conn.execute(f"SELECT f.id FROM facts f WHERE {clause}", params)]
    if not named:
        return named
    # Links in any state: a fact whose link was retracted still repeats its turn's words.
    drawn = conn.execute(
        f"SELECT target_id FROM links WHERE origin = {d.param('origin')} AND type = 'PART_OF'"
        f" AND {d.in_list('source_id', d.param('ids'))}"
        f" UNION SELECT source_id FROM links WHERE origin = {d.param('origin')} AND type ="
        " 'PART_OF'"
        f" AND {d.in_list('target_id', d.param('ids'))}",
        {"origin": LinkOrigin.CAPTURE.value, "ids": id_list(named)},
    )
    return named + sorted({r[0] for r in drawn} - set(named))


def record(conn: SQLConnection, at: float, where: PurgeFilter, report: PurgeReport) -> None:
    d = conn.dialect
    conn.execute(
        "INSERT INTO erasures (at, filter, facts, links, vectors, episodes)"
        f" VALUES ({d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg}, {d.arg})",
        [
            at,
            json.dumps(where.digest(), sort_keys=True),
            report.facts,
            report.links,
            report.vectors,
            report.episodes,
        ],
    )


def listing(conn: SQLConnection, limit: int) -> list[Erasure]:
    d = conn.dialect
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")
    rows = conn.execute(
        "SELECT at, filter, facts, links, vectors, episodes FROM erasures"
        f" ORDER BY seq DESC {d.limit(d.arg)}",
        [limit],
    )
    out = []
    for at, filter_, facts, links, vectors, episodes in rows:
        moment = to_datetime(at)
        assert moment is not None
        out.append(Erasure(moment, json.loads(filter_), facts, links, vectors, episodes))
    return out
