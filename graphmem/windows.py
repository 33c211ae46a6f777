"""Windows of turns: consecutive facts of an episode searched together, their score lent to the
facts they hold.

An answer in a conversation is often spread over turns: a question's words over a question
and its reply, or over a remark and the next. Each fact written to an episode ends a window of
up to :data:`WINDOW_TURNS` facts (itself and the facts before it there, forgotten ones left
out), whose text is its facts' texts together. Search (with ``episode_links``, the default):

1. ranks the windows by keywords (the store's keyword index of windows), and by vector: the
   mean of its facts' cosines with the query, for the windows holding a vector candidate;
2. keeps a window only if all its facts are visible in the search's time scope, so text a
   forgotten, superseded or not yet known fact held lends nothing;
3. fuses the two lists (keyword weight :data:`WINDOW_FTS_WEIGHT`) and lends each fact
   :data:`WINDOW_LEND` times the best candidate's relevance times the best relevance of a window
   holding it, so a fact that a window finds joins the candidates.

Windows need no embedding: a window's vector score comes from its facts'. They are cut when
facts are written, cut again for the episodes a purge touches (no window keeps an erased text)
or an import brings, and for every episode by ``graphmem backfill-windows``.

On LoCoMo, tuned on conversations 0-4 and checked on 5-9, windows with the entity boost lift
every category on both halves (bench/REPORT.md, "Windows of turns").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from . import ranking
from .storage.interface import Filters

if TYPE_CHECKING:
    from .storage.interface import Record, Store
    from .temporal import TimeScope

#: Facts a window holds at most: the fact it ends on and those before it in the episode.
WINDOW_TURNS: Final = 4
#: Share of the best candidate's relevance a window of relevance 1 lends each fact it holds.
WINDOW_LEND: Final = 0.5
#: Weight of the windows' keyword list against their vector list when fused.
WINDOW_FTS_WEIGHT: Final = 0.6
#: Windows ranked per list, at most.
WINDOW_DEPTH: Final = 200
#: Episodes a backfill cuts per transaction.
BACKFILL_EPISODES: Final = 100


@dataclass(frozen=True, slots=True)
class Window:
    end_id: str  # the fact it ends on, which keys it
    fact_ids: tuple[str, ...]  # in the episode's order
    text: str


def cut(order: Sequence[tuple[str, str]], *, first: int) -> list[Window]:
    """The windows ending on each fact of ``order`` (an episode's ``(id, text)``, in order) from
    position ``first`` on; a fact with none before it ends no window (it is its own)."""
    out = []
    for end in range(first, len(order)):
        held = order[max(0, end - WINDOW_TURNS + 1) : end + 1]
        if len(held) > 1:
            out.append(Window(held[-1][0], tuple(i for i, _ in held), " ".join(t for _, t in held)))
    return out


def lend(
    store: Store,
    query: str,
    relevance: Mapping[str, float],
    rows: dict[str, Record],
    vec: Mapping[str, float],
    cosines: Callable[[list[str]], dict[str, float]] | None,
    scope: TimeScope,
    filters: Filters,
    *,
    keywords: bool,
) -> dict[str, float]:
    """``relevance`` with what windows lend (see the module's steps); the facts a window brings
    in join ``rows`` (their ranking columns), when they pass ``filters``.

    ``vec`` holds the vector leg's cosines, ``cosines`` gives the query's cosine with other
    facts (None: the vector leg did not run); ``keywords`` is whether the keyword leg ran.
    """
    fts = store.window_matches(query, WINDOW_DEPTH) if keywords else {}
    held = store.windows_of(fts.keys(), list(vec) if cosines is not None else [])
    by_vector: dict[int, float] = {}
    if cosines is not None and vec:
        near = dict(vec)
        vector_held = [w for w, ids in held.items() if any(i in vec for i in ids)]
        missing = list({i for w in vector_held for i in held[w] if i not in near})
        near.update(cosines(missing) if missing else {})
        for w in vector_held:
            known = [near[i] for i in held[w] if i in near]
            by_vector[w] = sum(known) / len(known)
        by_vector = dict(sorted(by_vector.items(), key=lambda x: -x[1])[:WINDOW_DEPTH])
    used = fts.keys() | by_vector.keys()
    if not used or not relevance:
        return dict(relevance)
    ids = list({i for w in used for i in held[w]})
    visible = {r["id"]: r for r in store.candidates(ids, scope, _unfiltered(filters))}
    kept = {w for w in used if all(i in visible for i in held[w])}
    window_relevance = ranking.fuse(
        {str(w): s for w, s in fts.items() if w in kept},
        {str(w): s for w, s in by_vector.items() if w in kept},
        WINDOW_FTS_WEIGHT,
    )
    lent: dict[str, float] = {}
    for key, value in window_relevance.items():
        for fact_id in held[int(key)] if value > 0 else ():
            lent[fact_id] = max(lent.get(fact_id, 0.0), value)
    if filters != _unfiltered(filters):
        passing = {
            r["id"] for r in store.candidates([i for i in lent if i not in rows], scope, filters)
        }
        lent = {i: v for i, v in lent.items() if i in rows or i in passing}
    for fact_id in lent:
        rows.setdefault(fact_id, visible[fact_id])
    top = max(relevance.values())
    out = dict(relevance)
    for fact_id, value in lent.items():
        out[fact_id] = out.get(fact_id, 0.0) + WINDOW_LEND * top * value
    return out


def _unfiltered(filters: Filters) -> Filters:
    """The time rule of ``filters`` alone (superseded versions counted as they say)."""
    return Filters(include_superseded=filters.include_superseded)
