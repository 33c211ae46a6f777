"""Checkpoints: an agent's working state saved before a risky step, and the newest one restored.

1. A checkpoint is a fact of entity ``system`` and key ``checkpoint:<milliseconds>``, importance
   0.9, decay class ``checkpoint`` (it expires like one, docs/concepts.md), source ``checkpoint``.
2. Its text says what was intended, for a reader and for search; its ``context`` holds the whole
   checkpoint as JSON — the intent, the state (any JSON value), the expected outcome and the
   working files — so a restore gives back exactly what was saved.
3. Restoring reads the newest unexpired checkpoint that is live now; a fact stored by other means
   under such a key, which holds no checkpoint, is passed over.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .errors import InvalidInput
from .limits import MAX_CHECKPOINT_FILES, MAX_FIELD_LENGTH, MAX_NOTE_LENGTH
from .models import Fact

#: The entity, key prefix, importance, decay class and source of every checkpoint fact.
ENTITY: Final = "system"
KEY_PREFIX: Final = "checkpoint:"
IMPORTANCE: Final = 0.9
DECAY_CLASS: Final = "checkpoint"
SOURCE: Final = "checkpoint"
#: Checkpoint facts read, newest first, to find one that holds a checkpoint.
RESTORE_CANDIDATES: Final = 10

_FIELDS: Final = frozenset({"intent", "state", "expected_outcome", "working_files"})


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A saved working state: what was intended, the state, what should come of it, the files
    being worked on, and the fact that holds it."""

    intent: str
    state: Any
    expected_outcome: str | None
    working_files: tuple[str, ...]
    fact: Fact

    def to_dict(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "state": self.state,
            "expected_outcome": self.expected_outcome,
            "working_files": list(self.working_files),
            "fact": self.fact.to_dict(),
        }


def fact_input(
    intent: str,
    state: Any,
    expected_outcome: str | None,
    working_files: Sequence[str],
    now: float,
) -> dict[str, Any]:
    """The fact a checkpoint is saved as, at ``now`` (epoch seconds); InvalidInput naming the
    argument when one is not what a checkpoint holds."""
    intent = _text(intent, "intent")
    if expected_outcome is not None:
        expected_outcome = _text(expected_outcome, "expected_outcome")
    if isinstance(working_files, str) or not isinstance(working_files, Sequence):
        raise InvalidInput("must be a list of paths", field="working_files")
    if len(working_files) > MAX_CHECKPOINT_FILES:
        raise InvalidInput(f"at most {MAX_CHECKPOINT_FILES} working files", field="working_files")
    files = tuple(_text(path, "working_files") for path in working_files)
    try:
        payload = json.dumps(
            {
                "intent": intent,
                "state": state,
                "expected_outcome": expected_outcome,
                "working_files": list(files),
            },
            allow_nan=False,
            sort_keys=True,
        )
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"not JSON: {exc}", field="state") from exc
    if len(payload) > MAX_NOTE_LENGTH:
        raise InvalidInput(
            f"the checkpoint is {len(payload)} characters as JSON; at most {MAX_NOTE_LENGTH}",
            field="state",
        )
    text = f"Checkpoint: {intent}"
    if expected_outcome is not None:
        text += f" (expected: {expected_outcome})"
    return {
        "text": text,
        "entity": ENTITY,
        "key": f"{KEY_PREFIX}{math.floor(now * 1000)}",
        "importance": IMPORTANCE,
        "decay_class": DECAY_CLASS,
        "source": SOURCE,
        "context": payload,
        "classify": False,
        "autolink": False,
        "entity_links": False,
        "dedup": False,
    }


def from_fact(fact: Fact) -> Checkpoint | None:
    """The checkpoint ``fact`` holds, or None when its context is not one."""
    try:
        payload = json.loads(fact.context or "")
    except ValueError:
        return None
    if not isinstance(payload, dict) or set(payload) != _FIELDS:
        return None
    intent, outcome, files = (payload[k] for k in ("intent", "expected_outcome", "working_files"))
    if (
        not isinstance(intent, str)
        or not (outcome is None or isinstance(outcome, str))
        or not isinstance(files, list)
        or not all(isinstance(f, str) for f in files)
    ):
        return None
    return Checkpoint(intent, payload["state"], outcome, tuple(files), fact)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("must be non-empty text", field=field)
    if len(value) > MAX_FIELD_LENGTH:
        raise InvalidInput(f"longer than {MAX_FIELD_LENGTH} characters", field=field)
    return value.strip()
