"""The graph's public types and their validation: link types, a traversal's nodes, a path.

Links are directed and bi-temporal like facts: ``A -[DEPENDS_ON]-> B`` means A requires B; a link
has a validity start (``valid_from``), is recorded at a moment and can be retracted (unlink)
without being lost: reads known at an earlier time still see it. The SQL of links and walks is in
:mod:`graphmem.storage.sql.links` and :mod:`graphmem.storage.sql.traversal`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidInput
from .jsonform import JSONForm
from .limits import (
    MAX_DEPTH,
    MAX_METADATA_BYTES,
    MAX_NODES,
)
from .models import LINK_TYPES, Fact, Link, SearchInput, field_of

#: Followed when a traversal names no types: supersession is history, not a relationship.
DEFAULT_TYPES: Final = tuple(t for t in LINK_TYPES if t != "SUPERSEDES")


DIRECTIONS: Final = ("OUT", "IN", "BOTH")


#: Most facts one traversal returns when the caller does not say.
DEFAULT_MAX_NODES: Final = 200


class TraverseInput(BaseModel):
    """A traversal, as callers ask for it: what each argument means, its bounds and its default
    (``Memory.traverse`` checks them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ids: list[str] = Field(min_length=1, description="The ids of the facts to start from.")
    depth: int = Field(
        default=2, ge=0, le=MAX_DEPTH, description=f"Most links to follow (0 to {MAX_DEPTH})."
    )
    types: list[str] | None = Field(
        default=None,
        json_schema_extra={"items": {"type": "string", "enum": list(LINK_TYPES)}},
        description="Link types to follow. Default: all but SUPERSEDES; name SUPERSEDES to walk "
        "to earlier versions too.",
    )
    direction: str = Field(
        default="BOTH",
        json_schema_extra={"enum": list(DIRECTIONS)},
        description="OUT follows links from source to target (what a fact was caused by, is "
        "part of, depends on); IN the reverse; BOTH either way.",
    )
    as_of: float | None = field_of(SearchInput, "as_of")
    known_at: float | None = field_of(SearchInput, "known_at")
    max_nodes: int = Field(
        default=DEFAULT_MAX_NODES,
        ge=1,
        le=MAX_NODES,
        description=f"Most facts to return (1 to {MAX_NODES:,}); the walk stops there and says "
        "so (truncated).",
    )
    min_strength: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Follow only links at least this strong (0 to 1)."
    )


@dataclass(frozen=True, slots=True)
class Node(JSONForm):
    """A fact reached by a traversal: its shortest depth and the facts it was reached from."""

    fact: Fact
    depth: int
    parent_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Subgraph:
    """What a traversal found: each fact once, every visible link among them, and whether
    (and why) it stopped early: ``depth`` (more lay beyond), ``max_nodes``, ``fan_out``."""

    nodes: list[Node]
    edges: list[Link]
    truncated_by: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return bool(self.truncated_by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
            "truncated": self.truncated,
            "truncated_by": list(self.truncated_by),
        }


class Path(list[Fact]):
    """A shortest path: the list of its facts in order (as the contract's ``path`` returns),
    with ``links``, the link joining each fact to the next."""

    def __init__(self, facts: Iterable[Fact], links: Iterable[Link]) -> None:
        super().__init__(facts)
        self.links = list(links)

    @property
    def facts(self) -> list[Fact]:
        return list(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "facts": [f.to_dict() for f in self.facts],
            "links": [k.to_dict() for k in self.links],
        }


def check_types(
    types: Iterable[str] | str | None, *, default: Sequence[str] = DEFAULT_TYPES
) -> tuple[str, ...]:
    """Link types, upper-cased and validated; ``default`` when None."""
    if types is None:
        return tuple(default)
    if isinstance(types, str):
        types = [types]
    out = []
    for t in types:
        name = str(t).strip().upper()
        if name not in LINK_TYPES:
            raise InvalidInput(
                f"unknown link type {t!r}; use one of {', '.join(LINK_TYPES)}", field="types"
            )
        out.append(name)
    if not out:
        raise InvalidInput("types must name at least one link type", field="types")
    return tuple(dict.fromkeys(out))


def check_direction(direction: str) -> str:
    name = str(direction).strip().upper()
    if name not in DIRECTIONS:
        raise InvalidInput(
            f"unknown direction {direction!r}; use OUT, IN or BOTH", field="direction"
        )
    return name


def check_strength(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be a number from 0 to 1", field=name)
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInput(f"{name} must be from 0 to 1, got {value}", field=name)
    return float(value)


def _check_count(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}", field=name)
    return value


def _check_ids(ids: Iterable[str] | str, name: str = "ids") -> list[str]:
    if isinstance(ids, str):
        ids = [ids]
    out = list(dict.fromkeys(ids))
    if not out or not all(isinstance(i, str) and i for i in out):
        raise InvalidInput(f"{name} must be one or more fact ids", field=name)
    if len(out) > MAX_NODES:
        raise InvalidInput(f"at most {MAX_NODES} start ids", field=name)
    return out


_LINK_FIELDS = frozenset(
    {"source_id", "target_id", "type", "strength", "valid_from", "valid_until", "metadata"}
)


def _link_fields(i: int, item: object) -> dict[str, Any]:
    """The link's arguments from item ``i`` of ``link_many``'s list (InvalidInput naming the item
    if it is not an object with the link's fields)."""
    if not isinstance(item, Mapping):
        raise InvalidInput(f"link {i}: expected an object", field=f"links[{i}]")
    unknown = set(item) - _LINK_FIELDS
    if unknown or not {"source_id", "target_id", "type"} <= set(item):
        raise InvalidInput(
            f"link {i}: source_id, target_id and type are required; "
            f"unknown fields: {sorted(unknown)}",
            field=f"links[{i}]",
        )
    return {"strength": 1.0, **item}


def check_metadata(metadata: Any, field: str = "metadata") -> dict[str, Any] | None:
    """``metadata`` if it is None or a JSON object of at most MAX_METADATA_BYTES; InvalidInput
    (naming ``field``) otherwise. Links and episodes keep one."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    try:
        text = json.dumps(metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON: {exc}", field=field) from exc
    if len(text.encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"{field} larger than {MAX_METADATA_BYTES} bytes", field=field)
    return metadata


class LinkPosition(NamedTuple):
    """Where a link sits in a fact's links, strongest first: the keyset of ``links_page``."""

    strength: float
    seq: int
