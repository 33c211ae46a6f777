"""API keys: bearer tokens that give access to named namespaces.

A key reads ``gm_<id>_<secret>``. Only the sha256 of the secret is stored: in a key file beside
the namespaces of a data directory (:class:`graphmem.storage.sqlite.keys.KeyFile`), or in a
PostgreSQL store, which every replica shares
(:class:`graphmem.storage.postgres.keys.PostgresKeyStore`). A presented key is found by its public id
and its secret compared in constant time. Every check reads the store, so a key revoked by
``graphmem revoke-key`` in another process (or on another replica) stops working at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

from ..errors import InvalidInput, NotFound
from ..ids import check_namespace

PREFIX: Final = "gm"
_KEY: Final = re.compile(r"^gm_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """What a key grants: its namespaces (the first is its default), whether it may write, and
    whether it may read its namespaces' administrative records (the erasure records)."""

    id: str
    namespaces: tuple[str, ...]
    read_only: bool
    label: str | None
    created_at: float
    revoked_at: float | None
    admin: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespaces": list(self.namespaces),
            "read_only": self.read_only,
            "label": self.label,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "admin": self.admin,
        }


class KeyStore:
    """The API keys of a server, made, checked and revoked here whichever engine keeps them:
    ``graphmem.storage.open_keys(settings)`` opens the data directory's key file (``KeyFile``)
    or, with a PostgreSQL store, its keys table (``PostgresKeyStore``)."""

    #: The keys' table, and a parameter given by position, as the engine's driver spells them.
    _table = "api_keys"
    _arg = "?"

    def any_active(self) -> bool:
        """Whether at least one unrevoked key exists (then every request needs one)."""
        with self._connect() as conn:
            row = conn.execute(f"SELECT 1 FROM {self._table} WHERE revoked_at IS NULL").fetchone()
        return row is not None

    def known_any_active(self) -> bool | None:
        """``any_active`` when it is known without reading the store, else None."""
        return None

    def create(
        self,
        namespaces: Iterable[str],
        *,
        read_only: bool = False,
        label: str | None = None,
        admin: bool = False,
    ) -> tuple[str, ApiKey]:
        """A new key for ``namespaces``: returns the token (shown once, never stored) and its record."""
        names = tuple(dict.fromkeys(namespaces))
        if not names:
            raise InvalidInput("a key needs at least one namespace", field="namespace")
        for name in names:
            check_namespace(name)
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        record = ApiKey(key_id, names, read_only, label, time.time(), None, admin)
        with self._connect() as conn:
            conn.execute(
                f"INSERT INTO {self._table} (id, secret_hash, namespaces, read_only, label,"
                " created_at,"
                f" admin) VALUES ({self._arg}, {self._arg}, {self._arg}, {self._arg}, {self._arg},"
                f" {self._arg}, {self._arg})",
                [
                    key_id,
                    _digest(secret),
                    json.dumps(names),
                    int(read_only),
                    label,
                    record.created_at,
                    int(admin),
                ],
            )
        return f"{PREFIX}_{key_id}_{secret}", record

    def authenticate(self, token: str) -> ApiKey | None:
        """The live key ``token`` stands for, or None (malformed, unknown, wrong secret, revoked)."""
        match = _KEY.match(token.strip())
        if match is None or not self._exists():
            return None
        key_id, secret = match.groups()
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT * FROM {self._table} WHERE id = {self._arg}", [key_id]
            ).fetchone()
        if row is None or not hmac.compare_digest(row["secret_hash"], _digest(secret)):
            return None
        key = _record(row)
        return None if key.revoked_at is not None else key

    def is_active(self, key_id: str) -> bool:
        """Whether the key with this id exists and is not revoked (read afresh each call)."""
        if not self._exists():
            return False
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT 1 FROM {self._table} WHERE id = {self._arg} AND revoked_at IS NULL",
                [key_id],
            ).fetchone()
        return row is not None

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by id; requests with it fail from now on. NotFound for an unknown id."""
        with self._connect() as conn:
            conn.execute(
                f"UPDATE {self._table} SET revoked_at = {self._arg} WHERE id = {self._arg} AND"
                " revoked_at IS NULL",
                [time.time(), key_id],
            )
            row = conn.execute(
                f"SELECT * FROM {self._table} WHERE id = {self._arg}", [key_id]
            ).fetchone()
        if row is None:
            raise NotFound(f"no API key with id {key_id!r}")
        return _record(row)

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        if not self._exists():
            return []
        with self._connect() as conn:
            return [
                _record(r) for r in conn.execute(f"SELECT * FROM {self._table} ORDER BY created_at")
            ]

    def close(self) -> None:
        """Release what the store holds open (its connections)."""

    def _exists(self) -> bool:
        """Whether any key was ever made (else there is nothing to read)."""
        return True

    def _connect(self) -> AbstractContextManager[Any]:
        """A connection in one transaction (committed when the block ends): ``execute(sql,
        params)`` with ``_arg`` placeholders on the table ``_table``, rows readable by column
        name."""
        raise NotImplementedError


def _digest(secret: str) -> str:
    # The secret is 256 random bits, so a plain hash (no salt, no stretching) cannot be guessed.
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _record(row: Any) -> ApiKey:
    return ApiKey(
        id=row["id"],
        namespaces=tuple(json.loads(row["namespaces"])),
        read_only=bool(row["read_only"]),
        label=row["label"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        admin=bool(row["admin"]),
    )
