"""Windows of turns: consecutive facts of an episode searched together, their score lent to the
facts they hold.

An answer in a conversation is often spread over turns: a question's words over a question
and its reply, or over a remark and the next. Each fact written to an episode ends a window of
up to ``WINDOW_TURNS`` facts (itself and the facts before it there, forgotten ones left out),
whose text is its facts' texts together: the store cuts them (graphmem.storage.sql.windows,
which holds ``WINDOW_TURNS``). Search (with ``episode_links``, the default):

1. ranks the windows by keywords (the store's keyword index of windows), and by vector: the
   mean of its facts' cosines with the query, for the windows holding one of the
   :data:`WINDOW_HOLDERS` best vector candidates;
2. fuses the two lists (keyword weight :data:`WINDOW_FTS_WEIGHT`) and keeps the
   :data:`WINDOWS_LENDING` best windows whose facts are all visible in the search's time scope,
   so text a forgotten, superseded or not yet known fact held lends nothing;
3. lends each fact :data:`WINDOW_LEND` times the best candidate's relevance times the best
   relevance of a kept window holding it, so a fact that a window finds joins the candidates.

Windows need no embedding: a window's vector score comes from its facts'. They are cut when
facts are written, cut again for the episodes a purge touches (no window keeps an erased text)
or an import brings, and for every episode by ``graphmem backfill-windows``.

On LoCoMo, tuned on conversations 0-4 and checked on 5-9, windows with the entity boost lift
every category on both halves (bench/REPORT.md, "Windows of turns").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from . import ranking
from .storage.interface import Filters

if TYPE_CHECKING:
    from .storage.interface import KeywordReads, Record
    from .temporal import TimeScope

#: Share of the best candidate's relevance a window of relevance 1 lends each fact it holds.
WINDOW_LEND: Final = 0.5
#: Weight of the windows' keyword list against their vector list when fused.
WINDOW_FTS_WEIGHT: Final = 0.6
#: Windows ranked by keywords, at most.
WINDOW_DEPTH: Final = 200
#: The best vector candidates whose windows are ranked by vector (LoCoMo 0-4: 20, 50, 100 and
#: 200 within 0.004 of each other, 20 the best and the cheapest).
WINDOW_HOLDERS: Final = 20
#: The best windows (fused) that lend, at most.
WINDOWS_LENDING: Final = 50
#: Episodes a backfill cuts per transaction.
BACKFILL_EPISODES: Final = 100


def lend(
    store: KeywordReads,
    matched: Mapping[int, tuple[float, tuple[str, ...]]],
    relevance: Mapping[str, float],
    rows: dict[str, Record],
    vec: Mapping[str, float],
    cosines: Callable[[list[str]], dict[str, float]] | None,
    scope: TimeScope,
    filters: Filters,
) -> dict[str, float]:
    """``relevance`` with what windows lend (see the module's steps); the facts a window brings
    in join ``rows`` (their ranking columns), when they pass ``filters``.

    ``matched`` holds the windows' keyword matches (``Store.window_matches``: none if the
    keyword leg did not run), ``vec`` the vector leg's cosines, ``cosines`` gives the query's
    cosine with other facts (None: the vector leg did not run).
    """
    holders = sorted(vec, key=lambda i: -vec[i])[:WINDOW_HOLDERS] if cosines is not None else []
    held = store.windows_holding(holders) if holders else {}
    by_vector: dict[int, float] = {}
    if held and cosines is not None:
        near = {i: vec[i] for i in holders}
        missing = list({i for ids in held.values() for i in ids if i not in near})
        near.update(cosines(missing) if missing else {})
        for w, ids in held.items():
            known = [near[i] for i in ids if i in near]
            by_vector[w] = sum(known) / len(known)
    held.update((w, ids) for w, (_, ids) in matched.items())
    fused = ranking.fuse(
        {str(w): score for w, (score, _) in matched.items()},
        {str(w): s for w, s in by_vector.items()},
        WINDOW_FTS_WEIGHT,
    )
    best = sorted(((v, int(w)) for w, v in fused.items() if v > 0), reverse=True)[:WINDOWS_LENDING]
    if not best or not relevance:
        return dict(relevance)
    members = list({i for _, w in best for i in held[w]})
    # A window counts when its facts are visible, whatever the filters: they only choose
    # which of its facts join the results.
    time_rule = Filters(include_superseded=filters.include_superseded)
    visible = {r["id"]: r for r in store.candidates(members, scope, time_rule)}
    window_relevance = {w: v for v, w in best if all(i in visible for i in held[w])}
    lent: dict[str, float] = {}
    for window, value in window_relevance.items():
        for fact_id in held[window]:
            lent[fact_id] = max(lent.get(fact_id, 0.0), value)
    if filters != time_rule:
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
