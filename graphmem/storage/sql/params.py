"""Lists of ids as one SQL parameter, however many there are (read with ``Dialect.in_list``)."""

from __future__ import annotations

import json
from collections.abc import Iterable


def id_list(values: Iterable[object]) -> str:
    """Values (ids, seqs, names) as one SQL parameter, read back with
    :meth:`graphmem.storage.sql.dialect.Dialect.in_list` (or ``list_table``): one statement
    whatever their number, never near SQLite's limit on variables. Every list of ids passed to
    SQL goes this way."""
    listed = list(values)
    return IdList(json.dumps(listed), listed)


class IdList(str):
    """An id list as one SQL parameter: JSON text for SQLite's ``json_each``, the values kept
    for PostgreSQL, which takes them as an array
    (:class:`graphmem.storage.postgres.dialect.PostgresDialect`)."""

    values: list[object]

    def __new__(cls, text: str, values: list[object]) -> IdList:
        made = super().__new__(cls, text)
        made.values = values
        return made
