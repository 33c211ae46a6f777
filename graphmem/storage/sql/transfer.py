"""Export and import of a namespace as JSON Lines: lossless, so export → import → export is equal.

The first line is a header; then one ``{"kind": "episode", ...}`` line per episode (its own
kind as ``episode_kind``), one
``{"kind": "fact", ...}`` line per fact (every column, times as ISO-8601 UTC) in storage order,
then one ``{"kind": "link", ...}`` line per link, then one ``{"kind": "file", ...}`` line per
synced markdown file (:mod:`graphmem.documents`), then one ``{"kind": "entity_declaration",
...}`` line per alias, merge or split declared on the entities (its own kind as
``declaration_kind``; retracted ones too, with their transaction times, so a read as known at an
earlier moment groups the names as it did: :mod:`graphmem.entities`). Vectors and the entity
names are not exported: the importing store embeds the texts with its own embedder and counts
the names from the facts.

A file line names a path on the machine that synced it, which an export file can say anything
about: an imported file record is kept (its document's chunks came with the import, and a sync
that finds the file unchanged writes nothing) but marked ``imported``, and the file is not read
back until a sync on this machine has found it (:func:`graphmem.documents.read_lines`). The
mark, like the file's inode (which file a sync here read), is this store's, not the export's:
neither is exported nor accepted.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Set
from typing import IO, Any, Final, TypeVar

from ...errors import InvalidInput
from ...models import not_text
from ...temporal import parse_time, to_iso
from ..interface import ImportReport, ImportRules
from . import entities as sql_entities
from . import keyword_index
from .connections import SQLConnection
from .params import id_list

FORMAT: Final = "graphmem-export"

T = TypeVar("T")


VERSION: Final = 1


FACT_TIMES: Final = frozenset(
    {
        "expires_at",
        "last_confirmed_at",
        "last_accessed_at",
        "source_date",
        "valid_from",
        "valid_until",
        "valid_until_recorded_at",
        "recorded_at",
        "retracted_at",
        "pinned_at",
        "cold_at",
        "stated_start",
        "stated_end",
    }
)


EPISODE_TIMES: Final = frozenset({"time", "recorded_at"})


FILE_TIMES: Final = frozenset({"mtime", "synced_at"})


#: A file record's column that is the importing store's own (see above).
FILE_IMPORTED: Final = "imported"
#: A file record's columns that are this store's alone, never exported nor imported.
FILE_LOCAL: Final = frozenset({FILE_IMPORTED, "inode"})


LINK_TIMES: Final = frozenset(
    {"recorded_at", "valid_from", "valid_until", "valid_until_recorded_at", "retracted_at"}
)


DECLARATION_TIMES: Final = frozenset({"recorded_at", "retracted_at"})


#: The fields of a declaration's line (the table's ``kind`` as ``declaration_kind``).
_DECLARATION_FIELDS: Final = frozenset({"declaration_kind", "name", "target", *DECLARATION_TIMES})


_REQUIRED_FACT: Final = (
    "id",
    "text",
    "category",
    "importance",
    "decay_class",
    "confidence",
    "normalized_hash",
    "valid_from",
    "recorded_at",
)


_REQUIRED_EPISODE: Final = ("id", "kind", "time", "recorded_at")


_REQUIRED_FILE: Final = ("path", "hash", "mtime", "size", "chunks", "synced_at")


_REQUIRED_DECLARATION: Final = ("declaration_kind", "name", "target", "recorded_at")


_REQUIRED_LINK: Final = (
    "id",
    "source_id",
    "target_id",
    "type",
    "strength",
    "origin",
    "recorded_at",
    "valid_from",
)


def export_lines(conn: SQLConnection, namespace: str) -> Iterator[str]:
    """The export, one JSON document per line (without newlines)."""
    yield json.dumps(
        {"kind": "header", "format": FORMAT, "version": VERSION, "namespace": namespace}
    )
    for row in conn.execute("SELECT * FROM episodes ORDER BY seq"):
        item = _out(row, EPISODE_TIMES)
        item["metadata"] = json.loads(item["metadata"])
        item["episode_kind"] = item.pop("kind")  # "kind" names the line's kind
        yield json.dumps({"kind": "episode", **item}, ensure_ascii=False)
    for row in conn.execute("SELECT * FROM facts ORDER BY seq"):
        fact = _out(row, FACT_TIMES)
        # Left out when unset: older readers know none of them.
        for name in ("pinned_at", "cold_at", "stated_start", "stated_end", "stated_text"):
            if fact.get(name, 0) is None:
                del fact[name]
        yield json.dumps({"kind": "fact", **fact}, ensure_ascii=False)
    for row in conn.execute("SELECT * FROM links ORDER BY seq"):
        item = _out(row, LINK_TIMES)
        item["metadata"] = json.loads(item["metadata"])
        yield json.dumps({"kind": "link", **item}, ensure_ascii=False)
    for row in conn.execute("SELECT * FROM files ORDER BY path"):
        item = _out(row, FILE_TIMES)
        for name in FILE_LOCAL:
            item.pop(name, None)
        yield json.dumps({"kind": "file", **item}, ensure_ascii=False)
    for kind, name, target, recorded, retracted in conn.execute(
        "SELECT kind, name, target, recorded_at, retracted_at FROM entity_aliases ORDER BY seq"
    ):
        declared = {"declaration_kind": kind, "name": name, "target": target}
        declared |= {"recorded_at": to_iso(recorded), "retracted_at": to_iso(retracted)}
        yield json.dumps({"kind": "entity_declaration", **declared}, ensure_ascii=False)


def write_export(conn: SQLConnection, namespace: str, out: IO[str]) -> int:
    """Write the export to ``out``; returns the number of lines."""
    n = 0
    for line in export_lines(conn, namespace):
        out.write(line + "\n")
        n += 1
    return n


def import_rows(
    conn: SQLConnection, lines: Iterable[str], rules: ImportRules
) -> tuple[ImportReport, list[str]]:
    """Insert an export's rows in ``conn``'s open transaction, each kept to the engine's
    ``rules`` (:mod:`graphmem.imports`); the entity names are counted again from the facts
    before the declarations, which name them, are checked.

    Ids already present are skipped, as are declarations the store already holds. Raises
    InvalidInput naming the line of the first problem; the caller rolls back. Returns the
    report and the ids of the facts inserted.
    """
    with keyword_index.indexing(conn):
        report, inserted, declared = _insert_lines(conn, lines, rules)
    if inserted:
        sql_entities.rebuild(conn)
    added = _declare(conn, declared, rules)
    skipped = report.skipped_existing + len(declared) - added
    return ImportReport(report.facts, report.links, skipped, added), inserted


def _insert_lines(
    conn: SQLConnection, lines: Iterable[str], rules: ImportRules
) -> tuple[ImportReport, list[str], list[tuple[int, dict[str, Any]]]]:
    """The lines' episodes, facts, links and files inserted; their declarations (with their
    line numbers) left for :func:`_declare`."""
    d = conn.dialect
    fact_columns = _columns(conn, "facts")
    link_columns = _columns(conn, "links")
    episode_columns = _columns(conn, "episodes")
    file_columns = _columns(conn, "files") - FILE_LOCAL
    inserted: list[str] = []
    declared: list[tuple[int, dict[str, Any]]] = []
    links = skipped = 0
    header_seen = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {number}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise InvalidInput(f"line {number}: nested too deeply") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        kind = item.pop("kind", None)
        if not header_seen:
            if kind != "header" or item.get("format") != FORMAT:
                raise InvalidInput(f"line {number}: not a graphmem export (no header)")
            if item.get("version") != VERSION:
                raise InvalidInput(
                    f"line {number}: unsupported export version {item.get('version')!r}"
                )
            header_seen = True
            continue
        if kind == "episode":
            if "kind" in item:
                raise InvalidInput(f"line {number}: an episode's kind is given as episode_kind")
            item["kind"] = item.pop("episode_kind", None)
            row = _common(item, episode_columns, _REQUIRED_EPISODE, EPISODE_TIMES, number)
            _checked(rules.episode, row, number)
            row["metadata"] = json.dumps(row.get("metadata") or {}, sort_keys=True)
            if not _insert(conn, "episodes", row, number):
                skipped += 1
        elif kind == "fact":
            row = _fact_row(item, fact_columns, number)
            _checked(rules.fact, row, number)
            episode = row.get("episode_id")
            if (
                episode is not None
                and not conn.execute(
                    f"SELECT 1 FROM episodes WHERE id = {d.arg}", [episode]
                ).fetchone()
            ):
                raise InvalidInput(f"line {number}: episode_id {episode!r} is not a known episode")
            if _insert(conn, "facts", row, number):
                inserted.append(row["id"])
            else:
                skipped += 1
        elif kind == "link":
            row = _common(item, link_columns, _REQUIRED_LINK, LINK_TIMES, number)
            _checked(rules.link, row, number)
            row["metadata"] = json.dumps(row.get("metadata") or {}, sort_keys=True)
            for end in ("source_id", "target_id"):
                if (
                    conn.execute(f"SELECT 1 FROM facts WHERE id = {d.arg}", [row[end]]).fetchone()
                    is None
                ):
                    raise InvalidInput(f"line {number}: {end} {row[end]!r} is not a known fact")
            if _insert(conn, "links", row, number):
                links += 1
            else:
                skipped += 1
        elif kind == "file":
            row = _common(item, file_columns, _REQUIRED_FILE, FILE_TIMES, number)
            _checked(rules.file, row, number)
            row[FILE_IMPORTED] = 1
            if not _insert(conn, "files", row, number):
                skipped += 1
        elif kind == "entity_declaration":
            row = _common(
                item, _DECLARATION_FIELDS, _REQUIRED_DECLARATION, DECLARATION_TIMES, number
            )
            declared.append((number, row))
        else:
            raise InvalidInput(f"line {number}: unknown kind {kind!r}")
    if not header_seen:
        raise InvalidInput("empty input: not a graphmem export")
    _check_references(conn, inserted)
    return ImportReport(len(inserted), links, skipped), inserted, declared


def _declare(
    conn: SQLConnection, declared: list[tuple[int, dict[str, Any]]], rules: ImportRules
) -> int:
    """Insert the declarations the rules keep, against the names the facts now carry and the
    declarations already held; returns how many were new."""
    if not declared:
        return 0
    names = [name for name, *_ in sql_entities.names(conn)]
    check = rules.declarations(names, sql_entities.aliases(conn))
    added = 0
    for number, row in declared:
        if _checked(check, row, number):
            kept = {"kind": row["declaration_kind"], "name": row["name"], "target": row["target"]}
            kept |= {"recorded_at": row["recorded_at"], "retracted_at": row.get("retracted_at")}
            _insert(conn, "entity_aliases", kept, number)
            added += 1
    return added


#: The columns of a fact that name another fact.
_REFERENCES: Final = ("superseded_by", "supersedes_id", "vector_of")


def _check_references(conn: SQLConnection, inserted: list[str]) -> None:
    """InvalidInput when an imported fact names a fact that neither the import nor the store
    holds (a version chain or a shared vector that would lead nowhere)."""
    d = conn.dialect
    for start in range(0, len(inserted), 500):
        for column in _REFERENCES:
            row = conn.execute(
                f"SELECT f.id, f.{column} FROM facts f WHERE {d.in_list('f.id', d.param('ids'))}"
                f" AND f.{column} IS NOT NULL"
                f" AND NOT EXISTS (SELECT 1 FROM facts g WHERE g.id = f.{column})",
                {"ids": id_list(inserted[start : start + 500])},
            ).fetchone()
            if row is not None:
                raise InvalidInput(f"fact {row[0]}: {column} {row[1]!r} is not a known fact")


def _out(row: sqlite3.Row, times: frozenset[str]) -> dict[str, Any]:
    return {k: (to_iso(row[k]) if k in times else row[k]) for k in row.keys() if k != "seq"}  # noqa: SIM118 (a Row iterates values)


def _columns(conn: SQLConnection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(conn.dialect.columns_of(table))} - {"seq"}


def _fact_row(item: dict[str, Any], columns: set[str], number: int) -> dict[str, Any]:
    row = _common(item, columns, _REQUIRED_FACT, FACT_TIMES, number)
    row.setdefault("tags", "")
    row.setdefault("date_terms", "")
    row.setdefault("access_count", 0)
    return row


def _checked(rule: Callable[[dict[str, Any]], T], row: dict[str, Any], number: int) -> T:
    """The engine's ``rule`` for ``row`` (what it answers), its InvalidInput naming the line."""
    try:
        return rule(row)
    except InvalidInput as exc:
        raise InvalidInput(f"line {number}: {exc.message}") from None


def _common(
    item: dict[str, Any],
    columns: Set[str],
    required: tuple[str, ...],
    times: frozenset[str],
    number: int,
) -> dict[str, Any]:
    unknown = set(item) - columns
    if unknown:
        raise InvalidInput(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
    missing = [k for k in required if item.get(k) is None]
    if missing:
        raise InvalidInput(f"line {number}: missing {', '.join(missing)}")
    row = dict(item)
    for name in times & row.keys():
        try:
            row[name] = parse_time(row[name], field=name)
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc.message}") from None
    return row


def _insert(conn: SQLConnection, table: str, row: dict[str, Any], number: int) -> bool:
    for name, value in row.items():  # what the database could not take, said as bad input
        if not (value is None or isinstance(value, str | int | float)):
            raise InvalidInput(f"line {number}: {name} must be text, a number or null")
        if isinstance(value, str) and (problem := not_text(value)) is not None:
            raise InvalidInput(f"line {number}: {name} holds {problem}")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise InvalidInput(f"line {number}: {name} is out of range")
    names = list(row)
    cursor = conn.execute(
        conn.dialect.insert_ignoring(
            table, ", ".join(names), f"VALUES ({', '.join(conn.dialect.param(n) for n in names)})"
        ),
        row,
    )
    return cursor.rowcount == 1
