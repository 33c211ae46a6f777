"""What a line of an imported export may say: the engine's rules for its episodes, facts, links
and files, the same bounds a write through the API keeps.

The store reads the lines (:mod:`graphmem.storage.sql.transfer`: the header, the columns it
keeps, their times, what its database can hold) and hands each row to these rules before it
inserts it, as a prune hands it the soft-decay rule: the rules are the engine's, the store only
keeps what they allow. Each rule raises InvalidInput saying what is wrong; the store adds the
line's number.
"""

from __future__ import annotations

import json
from typing import Any, Final

from . import documents
from .decay import DECAY_CLASSES
from .episodes import EPISODE_KINDS
from .errors import InvalidInput
from .limits import MAX_FIELD_LENGTH, MAX_METADATA_BYTES, MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from .models import LINK_ORIGINS, LINK_TYPES
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


#: The rules every import keeps.
EXPORT_RULES: Final = ExportRules()
