"""How MCP tool results read: a fact as one compact line (id, text, category, validity, the time
its text states), times and time scopes in words.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from graphmem import Entity, Fact
from graphmem.profiles import Attribute

#: What a store result's target_ids are, by action.
VERDICT_TARGETS: Final = {"UPDATE": "supersedes", "DELETE": "forgot", "NOOP": "already stored as"}


def fact_line(fact: Fact) -> str:
    """One fact on one line: id, text, what it states, category and validity."""
    about = f" [{fact.entity}.{fact.key}={fact.value}]" if fact.entity and fact.key else ""
    until = moment_text(fact.valid_until) if fact.valid_until else "now"
    notes = [fact.category, f"valid {moment_text(fact.valid_from)} → {until}"]
    if (stated := fact.stated_time) is not None:
        notes.append(f"says {stated.text!r}: {period_text(stated.start, stated.end)}")
    if fact.superseded_by:
        notes.append(f"superseded by {fact.superseded_by}")
    if fact.retracted_at:
        notes.append(f"forgotten {moment_text(fact.retracted_at)}")
    return f"{fact.id}  {' '.join(fact.text.split())}{about}  ({'; '.join(notes)})"


def entity_line(entity: Entity) -> str:
    """One entity on one line: its name, how many facts, its other names and its aliases."""
    others = [n for n in entity.names if n != entity.name]
    notes = [f"{entity.facts} {plural(entity.facts, 'fact')}"]
    if others:
        notes.append(f"also {', '.join(others)}")
    if entity.aliases:
        notes.append(f"aliases {', '.join(entity.aliases)}")
    return f"{entity.name}  ({'; '.join(notes)})"


def attribute_line(attribute: Attribute) -> str:
    """One key of a profile on one line: its values, each with when it holds from and the id of
    the fact saying it."""
    values = "; ".join(
        f"{v.value or ' '.join(v.fact.text.split())} (since {moment_text(v.valid_from)}, "
        f"{v.fact.id})"
        for v in attribute.values
    )
    return f"{attribute.key}: {values}"


def moment_text(moment: datetime) -> str:
    """ISO-8601 UTC to the second, or the bare date at midnight: fewer tokens for a model (the
    structured content keeps every digit)."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text.removesuffix("T00:00:00Z")


def period_text(start: datetime, end: datetime) -> str:
    """A period as few words as say it: one day ("2024-05-01"), else "start → end"."""
    if end - start == timedelta(days=1) and start.time() == datetime.min.time():
        return moment_text(start)
    return f"{moment_text(start)} → {moment_text(end)}"


def scope_text(as_of: str | float | None, known_at: str | float | None) -> str:
    parts = [
        "" if as_of is None else f"as of {as_of}",
        "" if known_at is None else f"known at {known_at}",
    ]
    return f" ({', '.join(p for p in parts if p)})" if any(parts) else ""


def plural(n: int, word: str, words: str | None = None) -> str:
    """``word`` for one, else ``words`` (default: ``word`` and an s)."""
    return word if n == 1 else words or word + "s"
