"""Each construct the shared SQL spells per engine, in SQLite's dialect and PostgreSQL's (no server
needed: the suites run with --store postgresql execute every statement against a real one), and the
shared SQL written through them rather than in one engine's spelling."""

from __future__ import annotations

import ast
import io
import re
import sqlite3
import tokenize
from collections.abc import Callable
from pathlib import Path

import pytest

import graphmem.storage.sql
from graphmem.storage.postgres.dialect import POSTGRES
from graphmem.storage.sql.dialect import SQLITE, Dialect
from graphmem.storage.sql.params import id_list


@pytest.mark.parametrize(
    ("construct", "sqlite", "postgres"),
    [
        (
            lambda d: d.in_list("f.id", ":ids"),
            "f.id IN (SELECT value FROM json_each(:ids))",
            "f.id = ANY(CAST(:ids AS text[]))",
        ),
        (
            lambda d: d.in_list("seq", "?", negated=True, kind="bigint"),
            "seq NOT IN (SELECT value FROM json_each(?))",
            "seq <> ALL(CAST(? AS bigint[]))",
        ),
        (
            lambda d: d.list_table(":frontier", "fr"),
            "json_each(:frontier) fr",
            "unnest(CAST(:frontier AS text[])) WITH ORDINALITY AS fr(value, key)",
        ),
        (lambda d: d.greatest("a", "b"), "max(a, b)", "GREATEST(a, b)"),
        (lambda d: d.least("a", "b", "c"), "min(a, b, c)", "LEAST(a, b, c)"),
        (
            lambda d: d.month("x"),
            "CAST(strftime('%m', x, 'unixepoch') AS INTEGER)",
            "CAST(to_char(to_timestamp(x) AT TIME ZONE 'UTC', 'MM') AS INTEGER)",
        ),
        (lambda d: d.limit(":n"), "LIMIT :n", "LIMIT NULLIF(GREATEST(:n, -1), -1)"),
        (
            lambda d: d.insert_ignoring("facts", "id, text", "VALUES (?, ?)"),
            "INSERT OR IGNORE INTO facts (id, text) VALUES (?, ?)",
            "INSERT INTO facts (id, text) VALUES (?, ?) ON CONFLICT DO NOTHING",
        ),
        (
            lambda d: d.upsert("meta", "key, value", "VALUES (?, ?)", ("key",)),
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
        ),
        (
            lambda d: d.upsert(
                "outbox", "fact_id, queued_at", "VALUES (?, ?)", ("fact_id",), renumber=True
            ),
            "INSERT OR REPLACE INTO outbox (fact_id, queued_at) VALUES (?, ?)",
            "INSERT INTO outbox (fact_id, queued_at) VALUES (?, ?)"
            " ON CONFLICT (namespace, fact_id) DO UPDATE SET queued_at = excluded.queued_at,"
            " seq = nextval(pg_get_serial_sequence('gm_outbox', 'seq'))",
        ),
        (lambda d: d.on_conflict("a, b"), "ON CONFLICT (a, b)", "ON CONFLICT (namespace, a, b)"),
        (
            lambda d: d.picked("links", "l", "links l WHERE l.a = x.a LIMIT :cap"),
            "JOIN links l ON l.rowid IN (SELECT l.rowid FROM links l WHERE l.a = x.a LIMIT :cap)",
            "CROSS JOIN LATERAL (SELECT l.* FROM links l WHERE l.a = x.a LIMIT :cap) l",
        ),
        (lambda d: f"links l{d.indexed_by('i')}", "links l INDEXED BY i", "links l"),
        (lambda d: d.unindexed("l.a"), "+l.a", "l.a"),
        (lambda d: d.lower_entity("o"), "lower(o.entity)", "o.lower_entity"),
        (lambda d: d.lower_key("o"), "lower(o.key)", "o.lower_key"),
        (lambda d: d.dated("o"), "COALESCE(o.source_date, o.valid_from)", "o.dated"),
        (lambda d: d.rowid, "rowid", "seq"),
        (lambda d: d.param("ids"), ":ids", "%(ids)s"),
        (lambda d: d.arg, "?", "%s"),
        (lambda d: d.like, "LIKE", "ILIKE"),
    ],
)
def test_each_construct_is_spelled_for_its_engine(
    construct: Callable[[Dialect], str], sqlite: str, postgres: str
) -> None:
    assert construct(SQLITE) == sqlite
    assert construct(POSTGRES) == postgres


def test_sqlites_spellings_run_on_sqlite_as_meant() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    upsert = SQLITE.upsert("meta", "key, value", "VALUES (?, ?)", ("key",))
    conn.executemany(upsert, [("a", "1"), ("b", "2"), ("a", "3")])
    conn.execute(SQLITE.insert_ignoring("meta", "key, value", "VALUES (?, ?)"), ["b", "4"])
    assert conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall() == [
        ("a", "3"),
        ("b", "2"),
    ]
    listed = conn.execute(
        f"SELECT key FROM meta WHERE {SQLITE.in_list('key', '?', negated=True)}", [id_list(["a"])]
    )
    assert listed.fetchall() == [("b",)]
    (month, most, no_limit) = conn.execute(
        f"SELECT {SQLITE.month('1700000000')}, {SQLITE.greatest('1', '5', '3')},"
        f" (SELECT count(*) FROM (SELECT key FROM meta {SQLITE.limit('-1')}))"
    ).fetchone()
    assert (month, most, no_limit) == (11, 5, 2)  # 1700000000: 2023-11-14 UTC
    names = [r[1] for r in conn.execute(SQLITE.columns_of("meta"))]
    assert names == ["key", "value"]


#: What only SQLite understands: shared SQL that wrote it would fail, or mean something else,
#: on PostgreSQL.
_SQLITE_ONLY = re.compile(
    r"json_each\(|INSERT OR (IGNORE|REPLACE)|INDEXED BY|strftime\(|PRAGMA table_info|(?<!\.)\browid\b"
)


def test_the_shared_sql_spells_sqlite_only_constructs_through_its_dialect() -> None:
    folder = Path(graphmem.storage.sql.__file__).parent
    # The dialect spells them; the FTS5 keyword index is SQLite's alone (PostgreSQL's is a
    # generated column).
    exempt = {"dialect.py", "keyword_index.py"}
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(folder.glob("*.py"))
        if path.name not in exempt
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _SQLITE_ONLY.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []


#: A parameter written into a statement (sqlite3's ``?`` or ``:name``) instead of taken from the
#: dialect: psycopg would not know it, and PostgreSQL would read ``:name`` as nothing it knows.
_PLACEHOLDER = re.compile(r"\?|(?<![:\w]):[A-Za-z_]\w*(?![:`])")


def test_the_shared_sql_takes_its_parameters_from_its_dialect() -> None:
    folder = Path(graphmem.storage.sql.__file__).parent
    exempt = {"dialect.py", "keyword_index.py"}
    found = [
        f"{path.name}:{line}: {text}"
        for path in sorted(folder.glob("*.py"))
        if path.name not in exempt
        for line, text in _statements(path.read_text())
        if _PLACEHOLDER.search(text)
    ]
    assert found == []


def _statements(source: str) -> list[tuple[int, str]]:
    """The string literals of ``source`` but its docstrings, as (line, text): without what SQL
    quotes (``'...'``) and with what an f-string computes (``{...}``) as ``x``."""
    tree = ast.parse(source)
    docstrings = {
        node.body[0].lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING or token.start[0] in docstrings:
            continue
        text = re.sub(r"\{[^{}]*\}", "x", re.sub(r"'[^']*'", "", token.string.strip("rbfRBF")))
        found.append((token.start[0], text))
    return found
