"""Graph-aware search: links lend evidence and bring neighbours.

1. **Evidence along episodes** (the default: ``graph_depth`` 0, ``episode_links`` on): a
   candidate next to one of the best candidates of its episode gains part of that one's
   relevance (:func:`lend_along_episodes`); no fact joins that the search did not find.
2. **Evidence along every link** (``graph_depth`` > 0): linked candidates lend each other
   relevance (:func:`lend_evidence`).
3. **Neighbours** (``graph_depth`` k > 0): the facts up to k links from the final hits join the
   results, each scored below the fact that reached it (:func:`neighbours`).

Neighbours lift multi-hop paths (bench/REPORT.md, "Multi-hop: PathQuestion") but lose LoCoMo's
multi-hop and open-domain questions, hence the default (bench/REPORT.md, "Sessions as episodes").
Similarity links (:data:`EVIDENCE_SKIPS`) and SUPERSEDES links are never followed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from .limits import FAN_OUT
from .models import LinkOrigin
from .ranking import min_max

if TYPE_CHECKING:
    from .storage.interface import GraphReads, Record
    from .temporal import TimeScope

#: Share of a linked candidate's relevance (times link strength) lent to a fact.
EVIDENCE_WEIGHT: Final = 0.5
#: Share of the reaching fact's score a neighbour gains, per link (times its strength).
HOP_FACTOR: Final = 0.8
#: Link origins that lend no evidence, and that neighbours are not found through. Similarity
#: links repeat what the vector leg already scored: on LoCoMo, following them besides the turn
#: links lowered recall_frac@10 from 0.742 to 0.705 (bench/REPORT.md, "Turns linked by the
#: bench, and similarity links").
EVIDENCE_SKIPS: tuple[str, ...] = (LinkOrigin.AUTO_SIMILARITY,)
NEIGHBOUR_SKIPS: tuple[str, ...] = (LinkOrigin.AUTO_SIMILARITY,)
#: By default the best candidates alone lend along episode links: this many, of the highest
#: relevance among those sharing an episode. On LoCoMo (bench/REPORT.md, "Sessions as
#: episodes") 10 and 20 gave the same recall, both a little above every candidate lending (and
#: 50), and reading the links of a few candidates costs a fraction of reading those among all
#: of them.
EPISODE_LENDERS: Final = 10
#: Every origin but the episode chain's: what evidence along episode links alone leaves out.
NOT_EPISODE: Final = tuple(o.value for o in LinkOrigin if o != LinkOrigin.EPISODE)
#: Extra share of the reaching score for the neighbour closest to the query among those found at
#: the same level (scaled from 0 for the farthest): of a hit's many neighbours that match
#: nothing in the query, the one nearest in meaning inherits most. PathQuestion 3H (MiniLM,
#: first 1,500 questions) 0.726 -> 0.755.
CLOSENESS_BONUS: Final = 0.3
#: A neighbour's score stays below this share of the score of the fact that reached it.
MAX_SHARE: Final = 0.95


def skipping(origins: tuple[str, ...], episode_links: bool) -> tuple[str, ...]:
    """``origins``, and the episode chain's too when ``episode_links`` is off."""
    return origins if episode_links else (*origins, LinkOrigin.EPISODE.value)


def lend_along_episodes(
    store: GraphReads, relevance: Mapping[str, float], rows: Mapping[str, Record], scope: TimeScope
) -> dict[str, float]:
    """:func:`lend_evidence` over the episode links alone, among the candidates (``rows``, with
    their ``episode_id``) that share an episode with another candidate (none: no read), the
    EPISODE_LENDERS best of them lending.

    Search's default. On LoCoMo sessions stored as episodes, tuned on one half and checked on
    the other, it lifts recall_frac@10 on both halves (single-hop and adversarial questions
    most, no category losing more than 0.01; bench/REPORT.md, "Sessions as episodes").
    """
    members: dict[str, list[str]] = {}
    for fact_id in relevance:
        episode = rows[fact_id]["episode_id"]
        if episode is not None:
            members.setdefault(episode, []).append(fact_id)
    linked = [i for ids in members.values() if len(ids) > 1 for i in ids]
    if not linked:
        return dict(relevance)
    lenders = sorted(linked, key=lambda i: (-relevance[i], i))[:EPISODE_LENDERS]
    return lend_evidence(store, relevance, scope, NOT_EPISODE, among=linked, lenders=lenders)


def lend_evidence(
    store: GraphReads,
    relevance: Mapping[str, float],
    scope: TimeScope,
    skip_origins: tuple[str, ...],
    *,
    among: list[str] | None = None,
    lenders: list[str] | None = None,
) -> dict[str, float]:
    """Each candidate's relevance plus the best evidence a linked candidate lends it, over the
    links of every origin but ``skip_origins``, among the candidates ``among`` (all of them),
    from the ``lenders`` among them (all of them): ``relevance + EVIDENCE_WEIGHT *
    max(strength * neighbour relevance)``.

    On conversations, where an answer is often spread over adjacent turns, lending lifts
    recall beyond listing the neighbours alone (recall_frac@10 0.757 against 0.731;
    bench/REPORT.md, "Turns linked by the bench, and similarity links").
    """
    ids = list(relevance) if among is None else among
    rows = store.link_pairs(ids, scope, skip_origins=skip_origins, touching=lenders)
    lending = None if lenders is None else set(lenders)
    lent: dict[str, float] = {}
    for source, target, strength in rows:
        for a, b in ((source, target), (target, source)):
            if lending is None or b in lending:
                lent[a] = max(lent.get(a, 0.0), strength * relevance[b])
    return {i: r + EVIDENCE_WEIGHT * lent.get(i, 0.0) for i, r in relevance.items()}


def neighbours(
    store: GraphReads,
    hits: list[tuple[str, float]],
    depth: int,
    scope: TimeScope,
    admit: Callable[[list[str]], set[str]],
    own: Mapping[str, float],
    closeness: Callable[[list[str]], dict[str, float]] | None = None,
    *,
    skip_origins: tuple[str, ...] | None = None,
) -> dict[str, tuple[float, int, str]]:
    """Facts up to ``depth`` links from the hits (``(id, score)``) that a link scores higher
    than the search did, hits included: id -> (score, depth, via).

    ``own`` holds the search scores of the candidates. ``admit`` keeps the ids that pass the
    search's filters and time scope; the others are neither returned nor walked through.
    ``closeness`` gives the query's cosine with facts (missing ones count as farthest).
    Links of the origins ``skip_origins`` (default NEIGHBOUR_SKIPS) are not followed.

    A link offers a fact its own search score (0 if the legs did not find it) plus
    ``HOP_FACTOR * strength`` times the score of the fact it comes from (up to CLOSENESS_BONUS
    more for the neighbours of that level nearest the query in meaning), capped at MAX_SHARE
    of that score. Every fact takes the best offer that beats the score it has, a direct hit
    included: a hit linked to a stronger hit rises to just below it, and a fact first reached
    from a weak hit still gets the score a stronger path offers one level later. So a path's
    facts stay close below its first fact instead of ranking by whichever hit reached them
    first (PathQuestion 3H, graph_depth 2: 0.741 -> 0.801, bench/REPORT.md, "Multi-hop:
    PathQuestion"). A fact always scores below the fact that reached it, hence below the
    direct hit its path starts from, so it never pushes out a direct hit that outscored that
    one.
    """
    skipped = NEIGHBOUR_SKIPS if skip_origins is None else skip_origins
    walk = store.walk(scope, skip_origins=skipped)
    score = dict(hits)
    found: dict[str, tuple[float, int, str]] = {}
    frontier = [i for i, _ in hits]
    for level in range(1, depth + 1):
        steps = [s for s in walk.level(frontier) if s.rank <= FAN_OUT]
        near = min_max(closeness([s.step for s in steps]) if closeness and steps else {}, equal=0.0)
        offers: dict[str, tuple[float, str]] = {}
        for s in steps:
            reaching = score[s.via]
            share = HOP_FACTOR + CLOSENESS_BONUS * near.get(s.step, 0.0)
            offered = min(
                own.get(s.step, 0.0) + reaching * share * s.strength, reaching * MAX_SHARE
            )
            best = offers[s.step][0] if s.step in offers else score.get(s.step, -1.0)
            if offered > best:
                offers[s.step] = (offered, s.via)
        new = [i for i in offers if i not in score]
        admitted = admit(new) if new else set()
        frontier = []
        for fact_id, (value, via) in offers.items():
            if fact_id in score or fact_id in admitted:
                score[fact_id] = value
                found[fact_id] = (value, level, via)
                frontier.append(fact_id)
        if not frontier:
            break
    return found
