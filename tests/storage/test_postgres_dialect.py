"""Each rewrite graphmem.storage.postgres.dialect.translate makes of the reference store's SQL (no server needed:
the suites run with --store postgresql execute every statement against a real one)."""

from __future__ import annotations

import pytest

from graphmem.storage.postgres.dialect import translate


@pytest.mark.parametrize(
    ("sqlite", "postgres"),
    [
        ("SELECT id FROM facts WHERE id = ?", "SELECT id FROM facts WHERE id = %s"),
        ("SELECT :a, :b_2", "SELECT %(a)s, %(b_2)s"),
        (
            "SELECT id FROM facts WHERE tags LIKE '%x%' ESCAPE '\\'",
            "SELECT id FROM facts WHERE tags ILIKE '%%x%%' ESCAPE '\\'",
        ),
        (
            "SELECT 1 FROM facts f WHERE f.id IN (SELECT value FROM json_each(:ids))",
            "SELECT 1 FROM facts f WHERE f.id = ANY(CAST(%(ids)s AS text[]))",
        ),
        (
            "SELECT 1 FROM links WHERE seq NOT IN (SELECT value FROM json_each(?))",
            "SELECT 1 FROM links WHERE seq <> ALL(CAST(%s AS bigint[]))",
        ),
        (
            "SELECT 1 WHERE lower(f.entity) IN (SELECT value FROM json_each(:names))",
            "SELECT 1 WHERE f.lower_entity = ANY(CAST(%(names)s AS text[]))",
        ),
        (
            "SELECT 1 FROM facts o WHERE lower(o.key) = lower(:key)"
            " ORDER BY COALESCE(o.source_date, o.valid_from), COALESCE(x.source_date, o.valid_from)",
            "SELECT 1 FROM facts o WHERE o.lower_key = lower(%(key)s)"
            " ORDER BY o.dated, COALESCE(x.source_date, o.valid_from)",
        ),
        (
            "SELECT fr.value FROM json_each(:frontier) fr JOIN links l ON l.source_id = fr.value",
            "SELECT fr.value FROM unnest(CAST(%(frontier)s AS text[])) WITH ORDINALITY"
            " AS fr(value, key) JOIN links l ON l.source_id = fr.value",
        ),
        ("SELECT max(a, b), max(c) FROM t", "SELECT GREATEST(a, b), max(c) FROM t"),
        (
            "SELECT min(coalesce(max(x), 0), (SELECT 1)) FROM t",
            "SELECT LEAST(coalesce(max(x), 0), (SELECT 1)) FROM t",
        ),
        (
            "SELECT CAST(strftime('%m', COALESCE(a, b), 'unixepoch') AS INTEGER)",
            "SELECT CAST(to_char(to_timestamp(COALESCE(a, b)) AT TIME ZONE 'UTC', 'MM')"
            " AS INTEGER)",
        ),
        (
            "SELECT k.seq FROM links k WHERE k.rowid IN (SELECT l.rowid FROM links l"
            " INDEXED BY links_source_strength WHERE +l.target_id = 'x')",
            "SELECT k.seq FROM links k WHERE k.seq IN (SELECT l.seq FROM links l"
            "  WHERE l.target_id = 'x')",
        ),
        (
            "SELECT fr.value, l.id FROM json_each(:frontier) fr JOIN links l ON l.rowid IN ("
            "  SELECT l.rowid FROM links l WHERE l.source_id = fr.value"
            "  ORDER BY l.strength DESC LIMIT :cap) UNION ALL SELECT 1, 2",
            "SELECT fr.value, l.id FROM unnest(CAST(%(frontier)s AS text[])) WITH ORDINALITY"
            " AS fr(value, key) CROSS JOIN LATERAL (SELECT l.* FROM links l WHERE l.source_id"
            " = fr.value  ORDER BY l.strength DESC LIMIT NULLIF(GREATEST(%(cap)s, -1), -1)) l"
            " UNION ALL SELECT 1, 2",
        ),
        (
            "SELECT * FROM (SELECT 1 AS n) WHERE n = 1",
            "SELECT * FROM (SELECT 1 AS n) AS _q1 WHERE n = 1",
        ),
        ("SELECT * FROM (SELECT 1 AS n) s", "SELECT * FROM (SELECT 1 AS n) s"),
        ("SELECT id FROM facts LIMIT ?", "SELECT id FROM facts LIMIT NULLIF(GREATEST(%s, -1), -1)"),
        (
            "INSERT OR IGNORE INTO facts (id, text) VALUES (?, ?)",
            "INSERT INTO facts (id, text) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        ),
        (
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            "INSERT INTO meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
        ),
        (
            "INSERT OR REPLACE INTO outbox (fact_id, queued_at) VALUES (?, ?)",
            "INSERT INTO outbox (fact_id, queued_at) VALUES (%s, %s)"
            " ON CONFLICT (namespace, fact_id) DO UPDATE SET queued_at = excluded.queued_at,"
            " seq = nextval(pg_get_serial_sequence('gm_outbox', 'seq'))",
        ),
        (
            "INSERT INTO links (a) VALUES (?) ON CONFLICT (a, b) WHERE x IS NULL DO NOTHING",
            "INSERT INTO links (a) VALUES (%s) ON CONFLICT (namespace, a, b) WHERE x IS NULL"
            " DO NOTHING",
        ),
    ],
)
def test_each_sqlite_construct_is_rewritten(sqlite: str, postgres: str) -> None:
    assert translate(sqlite) == postgres


def test_a_strftime_form_it_does_not_know_is_refused_not_passed_on() -> None:
    with pytest.raises(ValueError, match="strftime form not translated"):
        translate("SELECT strftime('%Y', x, 'unixepoch')")
