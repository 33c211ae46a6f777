"""Pruning: expired facts and turns deleted, ageing ones soft-decayed, faded ones deleted; and
the decay heuristics re-run over stored facts, turns left in their class (``backfill``). The
rules themselves (classes, TTLs, the soft-decay thresholds) are in :mod:`graphmem.decay`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from .decay import PRUNE_CONFIDENCE, SOFT_DECAY_AFTER, SOFT_DECAY_FACTOR, classify_decay, expiry
from .jsonform import JSONForm
from .models import is_turn
from .storage.interface import SoftDecay, Store

#: The soft-decay rule each prune hands the store.
SOFT_DECAY: Final = SoftDecay(
    after=SOFT_DECAY_AFTER, factor=SOFT_DECAY_FACTOR, floor=PRUNE_CONFIDENCE
)


@dataclass(frozen=True, slots=True)
class PruneReport(JSONForm):
    """What ``prune`` removed (or, with dry_run, would remove)."""

    expired: int
    decayed: int
    low_confidence: int
    dry_run: bool


def prune(
    store: Store, purge: Callable[[Sequence[str]], int], *, dry_run: bool, soft: bool
) -> PruneReport:
    """Hard-delete expired facts (unless ``soft``), then soft-decay ageing ones and delete the
    faded, each deletion through ``purge``; with ``dry_run``, only count."""
    now = store.now()
    expired = [] if soft else store.expired(now)
    if dry_run:
        decayed, faded = store.decay_forecast(now, SOFT_DECAY, soft=soft)
        return PruneReport(len(expired), decayed, faded, dry_run=True)
    purge(expired)
    with store.transaction() as tx:
        decayed = tx.soft_decay(SOFT_DECAY)
    faded_ids = store.faded(SOFT_DECAY)
    purge(faded_ids)
    return PruneReport(len(expired), decayed, len(faded_ids), dry_run=False)


def backfill(store: Store, *, dry_run: bool) -> dict[str, int]:
    """Re-run the decay heuristics on every fact but the turns; returns how many moved to each
    class. A turn keeps the class capture gave it (``turn_decay_class``): the heuristics read
    what a fact states, and a turn is what was said, kept as long as the conversation is."""
    changes: dict[str, list[tuple[str, float | None, str]]] = {}
    for row in store.decay_inputs():
        if is_turn(row["source"]):
            continue
        new = classify_decay(row["entity"], row["key"], row["value"], row["text"])
        if new != row["decay_class"]:
            confirmed = row["last_confirmed_at"]
            since = row["recorded_at"] if confirmed is None else confirmed
            changes.setdefault(new, []).append((new, expiry(new, since), row["id"]))
    if not dry_run:
        with store.transaction() as tx:
            for rows in changes.values():
                tx.set_decay_classes(rows)
    return {k: len(v) for k, v in sorted(changes.items())}
