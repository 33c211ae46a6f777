"""The PostgreSQL engine: one database every replica shares (its modules need psycopg; this one
does not)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and urlsplit(str(url)).scheme in ("postgresql", "postgres")


def redacted(url: str) -> str:
    """``url`` without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
