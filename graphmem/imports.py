"""What a line of an imported export may say: the engine's rules for its episodes, facts, links,
files and entity declarations, the same bounds a write through the API keeps.

The store reads the lines (:mod:`graphmem.storage.sql.transfer`: the header, the columns it
keeps, their times, what its database can hold) and hands each row to these rules before it
inserts it, as a prune hands it the soft-decay rule: the rules are the engine's, the store only
keeps what they allow. Each rule raises InvalidInput saying what is wrong; the store adds the
line's number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from . import documents
from .decay import DECAY_CLASSES
from .entities import DECLARATION_KINDS, check_name, entity_key
from .episodes import EPISODE_KINDS
from .errors import InvalidInput
from .limits import MAX_FIELD_LENGTH, MAX_METADATA_BYTES, MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from .models import LINK_ORIGINS, LINK_TYPES
from .storage.interface import Declaration
from .tagging import CATEGORIES

#: The longest each text field of a fact may be, as a write allows (graphmem.limits).
_FIELD_LIMITS: Final = {
    **dict.fromkeys(("entity", "key", "value", "source"), MAX_FIELD_LENGTH),
    **dict.fromkeys(("summary", "why", "context"), MAX_NOTE_LENGTH),
}


class ExportRules:
    """The rules an imported row keeps (:class:`graphmem.storage.interface.ImportRules`)."""

    def episode(self, row: dict[str, Any]) -> None:
        if row["kind"] not in EPISODE_KINDS:
            raise InvalidInput(f"unknown episode kind {row['kind']!r}")

    def fact(self, row: dict[str, Any]) -> None:
        if not isinstance(row["text"], str) or not 0 < len(row["text"]) <= MAX_TEXT_LENGTH:
            raise InvalidInput(f"text must be 1-{MAX_TEXT_LENGTH} characters")
        if row["category"] not in CATEGORIES:
            raise InvalidInput(f"unknown category {row['category']!r}")
        for name, limit in _FIELD_LIMITS.items():
            if isinstance(row.get(name), str) and len(row[name]) > limit:
                raise InvalidInput(f"{name} is longer than {limit:,} characters")
        if row["decay_class"] not in DECAY_CLASSES:
            raise InvalidInput(f"unknown decay class {row['decay_class']!r}")
        for name in ("importance", "confidence"):
            if not isinstance(row[name], int | float) or not 0 <= row[name] <= 1:
                raise InvalidInput(f"{name} must be a number from 0 to 1")
        if row.get("pinned_at") is not None and row.get("cold_at") is not None:
            raise InvalidInput("a fact is pinned or cold, not both")

    def link(self, row: dict[str, Any]) -> None:
        if row["type"] not in LINK_TYPES:
            raise InvalidInput(f"unknown link type {row['type']!r}")
        # Checked here: the store's own checks would make its insert skip the line unsaid.
        if row["origin"] not in LINK_ORIGINS:
            raise InvalidInput(f"unknown link origin {row['origin']!r}")
        strength = row["strength"]
        if (
            isinstance(strength, bool)
            or not isinstance(strength, int | float)
            or not 0 <= strength <= 1
        ):
            raise InvalidInput("strength must be a number from 0 to 1")
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InvalidInput("a link's metadata must be a JSON object")
        if len(json.dumps(metadata, sort_keys=True).encode()) > MAX_METADATA_BYTES:
            raise InvalidInput(f"metadata is over {MAX_METADATA_BYTES:,} bytes")

    def file(self, row: dict[str, Any]) -> None:
        if not documents.is_document_path(row["path"]):
            raise InvalidInput("a file's path must be an absolute markdown file path")

    def declarations(
        self, names: Sequence[str], held: Sequence[Declaration]
    ) -> Callable[[dict[str, Any]], bool]:
        """A declaration is kept when its kind is known, its name is one a caller could
        declare, its target is a name the facts carry (by key: "Melanie's" is "melanie"; the
        target becomes the name as this store keeps it), a split's target is its own name, it
        is not retracted before it was recorded, and no other declaration of its name is live
        (a name has one live declaration at a time, as ``Memory.alias`` keeps it)."""
        exact = set(names)
        carried: dict[str, str] = {}
        for name in names:
            carried.setdefault(entity_key(name), name)
        live = {entity_key(d[2]) for d in held if d[5] is None}
        known = {d[1:] for d in held}

        def check(row: dict[str, Any]) -> bool:
            kind, name, target = row["declaration_kind"], row["name"], row["target"]
            if kind not in DECLARATION_KINDS:
                raise InvalidInput(f"unknown declaration kind {kind!r}")
            check_name(name, "name")
            if not isinstance(target, str):
                raise InvalidInput("target must be text")
            stored = target if target in exact else carried.get(entity_key(target))
            if stored is None:
                raise InvalidInput(f"target {target!r} is no entity name a fact carries")
            if kind == "split" and entity_key(name) != entity_key(stored):
                raise InvalidInput("a split's target is the name it keeps on its own")
            recorded, retracted = row["recorded_at"], row.get("retracted_at")
            if retracted is not None and retracted < recorded:
                raise InvalidInput("retracted_at is before recorded_at")
            row["target"] = stored
            declared = (kind, name, stored, recorded, retracted)
            if declared in known:
                return False
            if retracted is None:
                if entity_key(name) in live:
                    raise InvalidInput(f"{name!r} has a live declaration already")
                live.add(entity_key(name))
            known.add(declared)
            return True

        return check


#: The rules every import keeps.
EXPORT_RULES: Final = ExportRules()
