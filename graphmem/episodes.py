"""Episodes: the units facts come from — a conversation session, a document.

An episode is recorded once (id, kind, source, time, metadata) when a write first names it. Each
fact written with it carries its ``episode_id``; a fact keeps the episode it was first written
with (a duplicate written later with another episode stays where it is). Consecutive facts of an
episode are linked: each new fact RELATED_TO the fact before it in the episode (origin
``episode``, strength 1), so graph-aware search can let neighbouring turns lend each other
evidence without the caller making links.

Functions of a connection, like :mod:`graphmem.graph`; the write path calls them through the
storage interface's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .errors import InvalidInput
from .graph import check_metadata
from .jsonform import JSONForm
from .limits import MAX_FIELD_LENGTH
from .models import LinkOrigin
from .temporal import parse_time

#: What an episode can be. Conversations are what ``capture`` and ``store_many`` usually record.
EPISODE_KINDS: Final = ("conversation", "document", "other")


#: The kind of an episode named by its id alone.
DEFAULT_KIND: Final = "conversation"


@dataclass(frozen=True, slots=True)
class Episode(JSONForm):
    """A unit facts came from: when memory learnt of it (``recorded_at``) and the time it
    happened or was written (``time``; default: when it was recorded)."""

    id: str
    kind: str
    source: str | None
    time: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    recorded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class EpisodeInput:
    """An episode as a write names it: the id, and the attributes given (None: not given)."""

    id: str
    kind: str | None = None
    source: str | None = None
    time: float | None = None
    metadata: dict[str, Any] | None = None

    @classmethod
    def parse(cls, value: str | Mapping[str, Any]) -> EpisodeInput:
        """An episode id, or a mapping with ``id`` and optionally ``kind``, ``source``,
        ``time`` and ``metadata``. InvalidInput (field ``episode``) for anything else."""
        if isinstance(value, str):
            return cls(_check_id(value))
        if not isinstance(value, Mapping):
            raise InvalidInput(
                "episode must be an id or an object with id, kind, source, time, metadata",
                field="episode",
            )
        unknown = set(value) - {"id", "kind", "source", "time", "metadata"}
        if unknown:
            raise InvalidInput(f"unknown episode fields: {sorted(unknown)}", field="episode")
        kind = value.get("kind")
        if kind is not None and kind not in EPISODE_KINDS:
            raise InvalidInput(
                f"unknown episode kind {kind!r}; use one of {', '.join(EPISODE_KINDS)}",
                field="episode.kind",
            )
        source = value.get("source")
        if source is not None and (not isinstance(source, str) or len(source) > MAX_FIELD_LENGTH):
            raise InvalidInput(
                f"episode source must be text of at most {MAX_FIELD_LENGTH} characters",
                field="episode.source",
            )
        return cls(
            _check_id(value.get("id")),
            kind,
            source or None,
            parse_time(value.get("time"), field="episode.time"),
            _as_stored(check_metadata(value.get("metadata"), "episode.metadata")),
        )


#: The origin of the links between consecutive facts of an episode, and their strength.
ORIGIN: Final = LinkOrigin.EPISODE


STRENGTH: Final = 1.0


def _check_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_LENGTH:
        raise InvalidInput(
            f"an episode id is non-empty text of at most {MAX_FIELD_LENGTH} characters",
            field="episode",
        )
    if any(not c.isprintable() for c in value):
        raise InvalidInput("an episode id must be printable text", field="episode")
    return value.strip()


def _as_stored(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata as it reads back from the store (JSON round trip), to compare with it."""
    return None if metadata is None else dict(json.loads(json.dumps(metadata, sort_keys=True)))
