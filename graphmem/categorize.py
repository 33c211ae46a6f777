"""Auto-classify: facts left in category ``other`` relabelled by the chat model, and categories
discovered when enough of them share a label.

1. Up to ``MAX_PER_RUN`` live facts of category ``other`` (in the order recorded, from where the
   previous run stopped; no checkpoints) are sent in batches of ``BATCH``, one request each
   (:data:`PROMPT`), named ``E1``, ``E2``…
   with the categories they may be given: the built-in ones a write may choose (preference,
   fact, decision, entity) and those discovered in the namespace.
2. The answer gives each fact a category, or ``other`` with a short label of its own:
   ``{"labels": [{"fact": "E1", "category": "preference"}, {"fact": "E2", "category": "other",
   "label": "travel"}]}``. A fact given a listed category is relabelled; an entry naming no
   listed fact or an unknown category is ignored.
3. Discovery: when at least ``DISCOVER_MIN_OTHER`` of the facts read remain ``other``, each label
   the model gave at least ``DISCOVER_MIN_FACTS`` of them (a lower-case word, not a category
   already) becomes a category of the namespace — recorded in its registry (the store's meta
   ``categories``; readable as ``Memory.categories``, GraphQL ``categories``) — and those facts
   take it. A namespace discovers at most ``MAX_DISCOVERED`` categories.
4. Everything the run changes is written in one transaction. A category is a label, changed in
   place (as a pin is): a read at an earlier ``known_at`` shows the category the fact has now.

A failed, late or malformed answer changes nothing of its batch and is reported; the other
batches still apply. Offline (``classifier`` other than ``llm``) the job changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from .jsonform import JSONForm, json_fields
from .llm import ChatClient, ask_list
from .models import Fact
from .tagging import CATEGORY_MEANINGS, CATEGORY_NAME
from .temporal import to_datetime

if TYPE_CHECKING:
    from .storage.interface import Store

#: Facts of category ``other`` one run reads at most.
MAX_PER_RUN: Final = 500
#: Facts one request carries.
BATCH: Final = 50
#: Facts of the run that must remain ``other`` before labels are looked at.
DISCOVER_MIN_OTHER: Final = 15
#: Facts a label must be given to become a category.
DISCOVER_MIN_FACTS: Final = 10
#: Categories a namespace may discover.
MAX_DISCOVERED: Final = 50
#: The store meta key of where the next run starts.
CURSOR_KEY: Final = "classify"
#: The store meta key of the namespace's discovered categories.
REGISTRY_KEY: Final = "categories"
#: The built-in categories the model may give (pattern and rule are reflection's).
ASSIGNABLE: Final = ("preference", "fact", "decision", "entity")

PROMPT: Final = """\
You keep the long-term memory of an AI agent. The facts below were stored without a category. \
Give each the category that fits it best, from the categories listed with their meanings. When \
none fits, give "other" and a label of your own: one short lower-case English noun for what the \
fact is about (e.g. "travel", "health", "billing"), the same label for facts about the same thing.
Answer with one JSON object and nothing else:
{"labels": [{"fact": <the fact's name, e.g. "E1">, "category": <a listed category or "other">, \
"label": <your label, only with "other">}]}
Give one entry for every fact."""


@dataclass(frozen=True, slots=True)
class CategoryInfo:
    """A category a fact may have: its name, what it holds, and when it was discovered (None for
    the built-in ones)."""

    name: str
    description: str
    discovered_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        found = self.discovered_at
        return json_fields(self, discovered_at=None if found is None else found.isoformat())


@dataclass
class ClassifyReport(JSONForm):
    """What an auto-classify run changed: facts relabelled by category, the categories it
    discovered, the chat requests made, and why an answer was not used."""

    relabelled: dict[str, int] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)
    requests: int = 0
    error: str | None = None


def discovered(store: Store) -> dict[str, dict[str, Any]]:
    """The namespace's discovered categories: name → {"at": epoch seconds, "label": the
    description}."""
    return dict((store.meta(REGISTRY_KEY) or {}).get("discovered", {}))


def categories(store: Store) -> list[CategoryInfo]:
    """The built-in categories, then those discovered, in the order they were."""
    found = sorted(discovered(store).items(), key=lambda item: item[1]["at"])
    return [CategoryInfo(name, meaning) for name, meaning in CATEGORY_MEANINGS.items()] + [
        CategoryInfo(name, entry["label"], to_datetime(entry["at"])) for name, entry in found
    ]


def relabel(store: Store, chat: ChatClient, facts: Sequence[Fact]) -> ClassifyReport:
    """Ask for the categories of ``facts`` (all of category ``other``) and write the answer:
    relabelled facts, discovered categories (see the module's steps)."""
    report = ClassifyReport()
    registry = discovered(store)
    allowed = {*ASSIGNABLE, *registry}
    menu = {name: CATEGORY_MEANINGS.get(name) or registry[name]["label"] for name in allowed}
    changes: dict[str, str] = {}
    labels: dict[str, list[str]] = {}
    for start in range(0, len(facts), BATCH):
        batch = facts[start : start + BATCH]
        named = {f"E{n}": f for n, f in enumerate(batch, 1)}
        question = {
            "categories": [{"name": k, "holds": v} for k, v in sorted(menu.items())],
            "facts": [{"name": k, "text": f.text} for k, f in named.items()],
        }
        for entry in ask_list(chat, PROMPT, question, "labels", report):
            name = entry.get("fact") if isinstance(entry, dict) else None
            fact = named.get(name) if isinstance(name, str) else None
            if fact is None or fact.id in changes:
                continue
            category = entry.get("category")
            category = category.strip().lower() if isinstance(category, str) else ""
            if category in allowed:
                changes[fact.id] = category
            elif category == "other" and isinstance(label := entry.get("label"), str):
                label = label.strip().lower()
                if CATEGORY_NAME.fullmatch(label) and label not in CATEGORY_MEANINGS:
                    labels.setdefault(label, []).append(fact.id)
    remaining = len(facts) - len(changes)
    new: dict[str, dict[str, Any]] = {}
    if remaining >= DISCOVER_MIN_OTHER:
        for label, ids in sorted(labels.items(), key=lambda item: (-len(item[1]), item[0])):
            if len(registry) + len(new) >= MAX_DISCOVERED:
                break
            if len(ids) >= DISCOVER_MIN_FACTS:
                new[label] = {"at": store.now(), "label": f"discovered: facts about {label}"}
                changes.update(dict.fromkeys(ids, label))
    if changes:
        with store.transaction() as tx:
            tx.set_categories(sorted(changes.items()))
            if new:
                tx.set_meta(REGISTRY_KEY, {"discovered": {**registry, **new}})
    for category in changes.values():
        report.relabelled[category] = report.relabelled.get(category, 0) + 1
    report.discovered = sorted(new)
    return report


def unknown(categories: Sequence[str | None], registry: Mapping[str, Any]) -> list[str]:
    """The categories of a write that are neither built in nor discovered in the namespace."""
    return sorted({c for c in categories if c and c not in CATEGORY_MEANINGS and c not in registry})
