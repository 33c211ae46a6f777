"""The PostgreSQL engine: one database every replica shares (its modules need psycopg; this one
does not)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and urlsplit(str(url)).scheme in ("postgresql", "postgres")


def redacted(url: str) -> str:
    """``url`` without its password (for messages and logs), whether in its user part or in
    a ``password`` parameter; a multi-host URL (``postgresql://u:p@h1:5432,h2:5432/db``) as
    well."""
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":***@")
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k == "password" for k, _ in pairs):
        query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="/*")
    return urlunsplit(parts._replace(netloc=netloc, query=query))
