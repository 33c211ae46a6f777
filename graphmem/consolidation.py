"""Consolidation: clusters of near-duplicate live facts merged into one fact that supersedes every
source, so paraphrases stop accumulating; history and reads at an earlier ``known_at`` still
show the sources.

1. Up to ``MAX_CONSIDERED`` live facts are read in the order recorded, from where the previous
   consolidation stopped (a cursor in the store's meta; it wraps around), so successive runs
   cover a namespace of any size at a bounded cost each.
2. A fact takes part unless it holds contact details, ids or numbers (a digit, ``@``, a URL:
   two phone numbers a digit apart are not paraphrases), is a checkpoint (entity ``system``),
   or is a pattern or rule (reflection keeps those apart itself).
3. Clusters are stars: taking the facts in order, a fact not yet clustered gathers its nearest
   live neighbours (by vector) within cosine ``similarity`` that take part, have not been
   clustered, and have the same entity and key (case-insensitive; both absent counts as the
   same) — up to ``MAX_CLUSTER`` facts. Every member is that close to the first.
4. Each cluster becomes one fact. With a chat model, one request per ``BATCH`` clusters writes
   the merged texts (:data:`MERGE_PROMPT`); a failed or malformed answer merges none of its
   batch, a cluster the answer leaves out stays as it is. Offline the text of the newest of the
   most confident sources is kept. The merged fact takes that source's entity, key, value,
   category and decay class, the highest importance and confidence of the sources, their tags,
   and the latest ``valid_from`` among them; it supersedes every source (SUPERSEDES links).

A dry run lists the clusters and changes nothing (it asks no model and moves no cursor).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .errors import Conflict, NotFound
from .jsonform import json_fields
from .limits import MAX_TAGS, MAX_TEXT_LENGTH
from .llm import ChatClient, ask_list
from .models import Fact, StoreResult
from .reflection import PATTERN, RULE

if TYPE_CHECKING:
    from .models import Vectors

#: Live facts one consolidation looks at, at most.
MAX_CONSIDERED: Final = 10_000
#: Facts in one cluster, at most.
MAX_CLUSTER: Final = 10
#: Clusters one merge request carries.
BATCH: Final = 20
#: The store meta key of the cursor.
CURSOR_KEY: Final = "consolidate"
#: Source of the merged facts.
SOURCE: Final = "consolidation"

#: Contact details, ids and numbers: facts holding one are never merged.
_LEFT_ALONE: Final = re.compile(r"\d|@|https?://|www\.", re.IGNORECASE)

MERGE_PROMPT: Final = """\
You keep the long-term memory of an AI agent. Each cluster below holds facts that say nearly the \
same thing. For each cluster, write one fact that says everything its facts say, without losing \
any detail and without adding anything; keep it as short as the longest of them allows.
Answer with one JSON object and nothing else:
{"merged": [{"cluster": <the cluster's number>, "text": <the merged fact>}]}"""


@dataclass
class ConsolidateReport:
    """The clusters found (lists of fact ids, the first the one the others are near), the facts
    that replaced them (none on a dry run) and how many sources they superseded, the chat
    requests made, and why an answer was not used."""

    clusters: list[list[str]] = field(default_factory=list)
    merged: list[Fact] = field(default_factory=list)
    #: Facts the merged facts superseded.
    superseded: int = 0
    requests: int = 0
    dry_run: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return json_fields(self, merged=[{"id": f.id, "text": f.text} for f in self.merged])


def takes_part(fact: Fact) -> bool:
    """Whether ``fact`` may be merged (see the module's step 2)."""
    return (
        fact.category not in (PATTERN, RULE)
        and (fact.entity or "").lower() != "system"
        and not _LEFT_ALONE.search(fact.text)
    )


def clusters(
    facts: Sequence[Fact],
    embed: Callable[[Sequence[str]], Vectors],
    neighbours: Callable[[Vectors], list[list[tuple[str, float]]]],
) -> list[list[Fact]]:
    """Star clusters of near-duplicates among ``facts`` (see the module's step 3);
    ``neighbours`` gives each vector's nearest live facts at or above the similarity."""
    eligible = [f for f in facts if takes_part(f)]
    if not eligible:
        return []
    by_id = {f.id: f for f in eligible}
    near = neighbours(embed([f.text for f in eligible]))
    taken: set[str] = set()
    out: list[list[Fact]] = []
    for fact, hits in zip(eligible, near, strict=True):
        if fact.id in taken:
            continue
        group = _group(fact)
        members = [fact]
        for other_id, _ in hits:
            other = by_id.get(other_id)
            if other is None or other.id in taken or other.id == fact.id:
                continue
            if _group(other) == group and len(members) < MAX_CLUSTER:
                members.append(other)
        if len(members) > 1:
            taken.update(m.id for m in members)
            out.append(members)
    return out


def merged_texts(
    chat: ChatClient | None, found: Sequence[Sequence[Fact]], report: ConsolidateReport
) -> list[str | None]:
    """The merged text of each cluster (None: leave it as it is): the model's, one request per
    BATCH clusters, or offline the newest most confident source's."""
    if chat is None:
        return [keeper(c).text for c in found]
    out: list[str | None] = []
    for start in range(0, len(found), BATCH):
        batch = found[start : start + BATCH]
        question = {
            "clusters": [{"cluster": n, "facts": [f.text for f in c]} for n, c in enumerate(batch)]
        }
        texts: list[str | None] = [None] * len(batch)
        for entry in ask_list(chat, MERGE_PROMPT, question, "merged", report):
            n = entry.get("cluster") if isinstance(entry, dict) else None
            text = entry.get("text") if isinstance(entry, dict) else None
            if (
                isinstance(n, int)
                and not isinstance(n, bool)
                and 0 <= n < len(batch)
                and isinstance(text, str)
                and text.strip()
                and len(text) <= MAX_TEXT_LENGTH
            ):
                texts[n] = " ".join(text.split())
        out.extend(texts)
    return out


def keeper(cluster: Sequence[Fact]) -> Fact:
    """The newest of the most confident sources: its text is kept offline, its fields always."""
    return max(cluster, key=lambda f: (f.confidence, f.recorded_at, f.id))


def merge(
    cluster: Sequence[Fact],
    text: str,
    write: Callable[[dict[str, Any], list[str]], StoreResult],
) -> Fact | None:
    """Write the fact replacing ``cluster``; None when a source changed meanwhile (no longer
    live): the cluster is left as it is."""
    kept = keeper(cluster)
    tags = sorted({t for f in cluster for t in f.tags})[:MAX_TAGS]
    item = {
        "text": text,
        "entity": kept.entity,
        "key": kept.key,
        "value": kept.value,
        "category": kept.category,
        "decay_class": kept.decay_class,
        "importance": max(f.importance for f in cluster),
        "confidence": max(f.confidence for f in cluster),
        "tags": tags,
        "source": SOURCE,
        "valid_from": max(f.valid_from for f in cluster).timestamp(),
        "supersedes": cluster[0].id,
        "classify": False,
        "dedup": False,
    }
    try:
        result = write(item, [f.id for f in cluster[1:]])
    except (Conflict, NotFound):
        return None
    return result.fact


def _group(fact: Fact) -> tuple[str, str]:
    return ((fact.entity or "").lower(), (fact.key or "").lower())
