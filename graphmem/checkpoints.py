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
from .jsonform import JSONForm
from .limits import MAX_CHECKPOINT_FILES, MAX_FIELD_LENGTH, MAX_NOTE_LENGTH
from .models import Fact, not_text

#: The entity, key prefix, importance, decay class and source of every checkpoint fact.
ENTITY: Final = "system"
KEY_PREFIX: Final = "checkpoint:"
IMPORTANCE: Final = 0.9
DECAY_CLASS: Final = "checkpoint"
SOURCE: Final = "checkpoint"
#: Checkpoint facts read, newest first, to find one that holds a checkpoint.
RESTORE_CANDIDATES: Final = 10
#: Levels of nesting a state may have.
MAX_STATE_DEPTH: Final = 64

_FIELDS: Final = frozenset({"intent", "state", "expected_outcome", "working_files"})


@dataclass(frozen=True, slots=True)
class Checkpoint(JSONForm):
    """A saved working state: what was intended, the state, what should come of it, the files
    being worked on, and the fact that holds it."""

    intent: str
    state: Any
    expected_outcome: str | None
    working_files: tuple[str, ...]
    fact: Fact


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
    _check_state(state, 0)
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
    """The checkpoint ``fact`` holds, or None when it is not one: its context is not a
    checkpoint's, or it would not expire as a checkpoint does."""
    if fact.decay_class != DECAY_CLASS:
        return None
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
    try:  # stored by other means under a checkpoint's key: only what a client can read back
        _check_state([intent, payload["state"], outcome, files], 0)
    except InvalidInput:
        return None
    return Checkpoint(intent, payload["state"], outcome, tuple(files), fact)


def _check_state(value: Any, depth: int) -> None:
    """InvalidInput unless ``value`` is JSON that every client can read back: text without NUL
    or a lone surrogate, integers of at most 64 bits, at most MAX_STATE_DEPTH levels."""
    if depth > MAX_STATE_DEPTH:
        raise InvalidInput(f"nested deeper than {MAX_STATE_DEPTH} levels", field="state")
    if isinstance(value, str):
        problem = not_text(value)
        if problem is not None:
            raise InvalidInput(f"contains {problem}", field="state")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(2**63) <= value < 2**64:
            raise InvalidInput("holds an integer beyond 64 bits", field="state")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput("holds a number that is not finite", field="state")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_state(key, depth + 1)
            _check_state(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_state(item, depth + 1)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("must be non-empty text", field=field)
    if (problem := not_text(value)) is not None:
        raise InvalidInput(f"contains {problem}", field=field)
    if len(value) > MAX_FIELD_LENGTH:
        raise InvalidInput(f"longer than {MAX_FIELD_LENGTH} characters", field=field)
    return value.strip()
