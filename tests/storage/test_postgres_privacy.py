"""Privacy on the PostgreSQL store, with the conversation kept: capture keeps no message holding
a secret, and a purge takes turns, their windows and the facts drawn from them, leaving no row
of the namespace and no file of its directory (the vector index) holding what it erased.

PostgreSQL has no secure delete: what it erased may stay in its data files' free space and its
WAL until they are overwritten (docs/scale-out.md, "Erasure"); these tests read the rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from devtools.cluster import Postgres
from graphmem import Memory, Settings

from ..core.test_erasure import (
    ALIASED_NAMES,
    CHAT,
    SUMMARY_ANSWER,
    SUMMARY_NEEDLE,
    TURN_FILTERS,
    _hits,
    chat_settings,
    declare_aliased,
    turn_filter,
)
from ..core.test_sensitive import HIDDEN, KEPT, SAID, _said_needles
from ..support.clock import Clock
from ..support.openai_stub import OpenAIStub


@pytest.fixture
def namespace() -> str:
    """A namespace of the test's own, in the session's PostgreSQL database (the ``postgres``
    fixture skips, saying why, without PostgreSQL)."""
    return f"t{uuid.uuid4().hex}"


def open_memory(url: str, directory: Path, namespace: str, clock: Clock | None = None) -> Memory:
    settings = Settings(embedder="hash", store=url)
    return Memory.open(directory, namespace=namespace, settings=settings, clock=clock)


def _rows_holding(postgres: Postgres, namespace: str, needles: list[bytes]) -> list[str]:
    """The tables with a row of ``namespace`` (or of no namespace) holding any of ``needles``:
    a text (ignoring case, as the keyword index keeps it), or bytes as a bytea column shows
    them."""
    wanted = [n.decode().lower() for n in needles if n.isascii()]
    wanted += [n.hex() for n in needles if not n.isascii()]
    held = []
    with postgres.superuser(postgres.url.rsplit("/", 1)[-1]) as conn:  # beneath row security
        tables = conn.execute(
            "SELECT t.tablename, c.column_name IS NOT NULL FROM pg_tables t"
            " LEFT JOIN information_schema.columns c ON c.table_schema = t.schemaname"
            " AND c.table_name = t.tablename AND c.column_name = 'namespace'"
            " WHERE t.schemaname = 'public' ORDER BY 1"
        ).fetchall()
        for table, namespaced in tables:
            where = " WHERE t.namespace = %s" if namespaced else ""
            rows = conn.execute(
                f'SELECT t::text FROM "{table}" AS t{where}', [namespace] if namespaced else []
            ).fetchall()
            text = "\n".join(r[0] for r in rows).lower()
            if any(w in text for w in wanted):
                held.append(table)
    return held


def _vectors(mem: Memory, texts: list[str]) -> list[bytes]:
    return [np.asarray(v, dtype="<f4").tobytes() for v in mem.embedder.embed(texts)]


def test_no_message_holding_a_secret_is_kept_in_any_row_or_file(
    postgres: Postgres, postgres_url: str, namespace: str, tmp_path: Path
) -> None:
    messages = [*SAID, *HIDDEN]
    said: list[dict[str, Any]] = [
        {"role": ("user", "assistant")[n % 2], "content": text}
        for n, text in enumerate([*messages, *KEPT])
    ]
    with open_memory(postgres_url, tmp_path, namespace) as mem:
        results = mem.capture(said, episode="chat")
        assert [r.fact.text for r in results if r.fact is not None] == KEPT
        needles = _said_needles(mem, messages)
    assert _rows_holding(postgres, namespace, [KEPT[0].encode()]), "the positive control"
    assert _rows_holding(postgres, namespace, needles) == []
    assert _hits(tmp_path, needles) == []


@pytest.mark.parametrize("by", TURN_FILTERS)
def test_a_purge_takes_the_turn_its_windows_and_its_facts_leaving_no_row_holding_them(
    postgres: Postgres,
    postgres_url: str,
    namespace: str,
    tmp_path: Path,
    by: str,
    stub: OpenAIStub,
) -> None:
    settings = Settings(embedder="hash", store=postgres_url, **chat_settings(stub))
    with Memory.open(tmp_path, namespace=namespace, settings=settings) as mem:
        mem.store_many(
            [{"text": f"An ordinary fact number {n} about the trams"} for n in range(10)]
        )
        turn, fact, reply = (r.fact for r in mem.capture(CHAT, episode="zq-session"))
        assert turn and fact and reply and fact.entity == "Zanzibarquill"
        mem.alias("Quillzanna", of="Zanzibarquill")
        stub.reply_next(SUMMARY_ANSWER)
        assert mem.profile("Zanzibarquill", summary=True).summary is not None
        # The entity's name, its declared alias (the rows are read ignoring case) and what the
        # summary of its profile says.
        needles = [turn.text.encode(), fact.text.encode(), b"vrontim", b"quillowm"]
        needles += [b"zanzibarquill", b"quillzanna", SUMMARY_NEEDLE]
        needles += _vectors(mem, [turn.text, fact.text])
        assert _rows_holding(postgres, namespace, needles), "the positive control"
        assert _rows_holding(postgres, namespace, [b"quillzanna"]) == ["gm_entity_aliases"]
        assert _rows_holding(postgres, namespace, [SUMMARY_NEEDLE]) == ["gm_profile_summaries"]
        assert mem._store.window_matches("Quillowmere", 10)  # the turn is in a window
        filters = turn_filter(by, turn.id, fact.id)
        counted = mem.purge(**filters, dry_run=True)
        report = mem.purge(**filters)
        assert counted.to_dict() == {**report.to_dict(), "dry_run": True}
        whole = by == "episode"
        # The fact shares its turn's vector: one vector for the two.
        assert (report.facts, report.vectors, report.episodes) == (2 + whole, 1 + whole, whole)
        assert mem.get(turn.id) is None and mem.get(fact.id) is None
        assert (mem.get(reply.id) is None) == whole
        assert mem._store.window_matches("Quillowmere", 10) == {}
        assert [e.name for e in mem.entities()] == []
    assert _rows_holding(postgres, namespace, needles) == []
    assert _hits(tmp_path, needles) == []


def test_an_entity_purge_leaves_no_row_holding_any_name_or_alias_of_it(
    postgres: Postgres, postgres_url: str, namespace: str, tmp_path: Path, clock: Clock
) -> None:
    with open_memory(postgres_url, tmp_path, namespace, clock) as mem:
        texts = declare_aliased(mem, clock)
        needles = [*(t.encode() for t in texts), *ALIASED_NAMES, *_vectors(mem, texts)]
        # The alias's two declarations, the second naming the entity it is purged with.
        assert _rows_holding(postgres, namespace, [b"quillzanna"]) == ["gm_entity_aliases"]
        report = mem.purge(entity="Quillzanna")
        assert (report.facts, set(report.names)) == (3, {"Zanzibarquill", "Zanzi", "Quillzanna"})
        assert [e.name for e in mem.entities()] == ["Orla Brennan"]
    assert _rows_holding(postgres, namespace, needles) == []
    assert _rows_holding(postgres, namespace, [b"orla brennan"]), "the other entity is kept"
    assert _hits(tmp_path, needles) == []
