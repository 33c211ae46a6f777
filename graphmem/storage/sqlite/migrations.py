"""The SQLite schema, as forward-only migrations numbered by ``PRAGMA user_version``.

Never edit a released migration: append a new one. ``apply`` runs the missing ones, each in its
own transaction, and refuses a file written by a newer graphmem.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ...errors import StorageError
from ..sql.keyword_index import FTS_COLUMNS

#: The keyword index's tokenizer (graphmem.storage.sqlite.bm25 tokenizes with it too).
FTS_TOKENIZER: Final = "porter unicode61"


def _links_rebuilt(version: int, origins: str) -> str:
    """The links table rebuilt as migration ``version``: the same rows, seq, indexes and
    graph-log triggers, with the link origins ``origins`` allowed beside the first six."""
    return f"""
    CREATE TABLE links_v{version} (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        source_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN
            ('SUPERSEDES', 'CAUSED_BY', 'PART_OF', 'RELATED_TO', 'DEPENDS_ON')),
        strength REAL NOT NULL CHECK (strength >= 0 AND strength <= 1),
        origin TEXT NOT NULL CHECK (origin IN
            ('explicit', 'auto_similarity', 'auto_entity', 'supersession', 'import', 'episode',
             {origins})),
        recorded_at REAL NOT NULL,
        valid_from REAL NOT NULL,
        valid_until REAL,
        valid_until_recorded_at REAL,
        retracted_at REAL,
        metadata TEXT NOT NULL DEFAULT '{{}}'
    );
    INSERT INTO links_v{version} SELECT seq, id, source_id, target_id, type, strength, origin,
        recorded_at, valid_from, valid_until, valid_until_recorded_at, retracted_at, metadata
        FROM links;
    DROP TABLE links;
    ALTER TABLE links_v{version} RENAME TO links;
    CREATE UNIQUE INDEX links_one_live ON links(source_id, target_id, type)
        WHERE retracted_at IS NULL;
    CREATE INDEX links_source_strength ON links(source_id, strength DESC, target_id);
    CREATE INDEX links_target_strength ON links(target_id, strength DESC);
    CREATE TRIGGER links_graph_update AFTER UPDATE OF source_id, target_id, type, strength,
        origin, recorded_at, retracted_at, valid_from, valid_until, valid_until_recorded_at
        ON links BEGIN
        INSERT INTO graph_log (kind, row) VALUES (1, new.seq);
    END;
    CREATE TRIGGER links_graph_delete AFTER DELETE ON links BEGIN
        INSERT INTO graph_log (kind, row) VALUES (3, old.seq);
    END;
    """


MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: facts, FTS5, links, outbox, embedding cache, meta.
    f"""
    CREATE TABLE facts (
        seq INTEGER PRIMARY KEY,               -- stable rowid for FTS5 and keyset paging
        id TEXT NOT NULL UNIQUE,
        text TEXT NOT NULL,
        category TEXT NOT NULL,
        importance REAL NOT NULL,
        entity TEXT,
        key TEXT,
        value TEXT,
        source TEXT,
        tags TEXT NOT NULL DEFAULT '',
        summary TEXT,
        why TEXT,
        context TEXT,
        date_terms TEXT NOT NULL DEFAULT '',
        decay_class TEXT NOT NULL,
        expires_at REAL,
        confidence REAL NOT NULL DEFAULT 1.0,
        last_confirmed_at REAL,
        normalized_hash TEXT NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_accessed_at REAL,
        source_date REAL,
        valid_from REAL NOT NULL,
        valid_until REAL,
        valid_until_recorded_at REAL,
        recorded_at REAL NOT NULL,
        retracted_at REAL,
        superseded_by TEXT,
        supersedes_id TEXT,
        vector_of TEXT                         -- near-duplicate whose vector stands in for this one
    );
    CREATE INDEX facts_entity_key ON facts(lower(entity), lower(key));
    CREATE INDEX facts_normalized_hash ON facts(normalized_hash);
    CREATE INDEX facts_category ON facts(category);
    CREATE INDEX facts_source ON facts(source) WHERE source IS NOT NULL;
    CREATE INDEX facts_decay_class ON facts(decay_class);
    CREATE INDEX facts_expires_at ON facts(expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX facts_valid ON facts(valid_from, valid_until);
    CREATE INDEX facts_recorded_at ON facts(recorded_at);
    CREATE INDEX facts_retracted_at ON facts(retracted_at) WHERE retracted_at IS NOT NULL;
    CREATE INDEX facts_superseded_by ON facts(superseded_by) WHERE superseded_by IS NOT NULL;
    CREATE INDEX facts_supersedes_id ON facts(supersedes_id) WHERE supersedes_id IS NOT NULL;
    CREATE INDEX facts_vector_of ON facts(vector_of) WHERE vector_of IS NOT NULL;
    CREATE INDEX facts_last_accessed_at ON facts(last_accessed_at)
        WHERE last_accessed_at IS NOT NULL;

    CREATE VIRTUAL TABLE facts_fts USING fts5(
        {FTS_COLUMNS}, content='facts', content_rowid='seq', tokenize='{FTS_TOKENIZER}'
    );
    CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
        INSERT INTO facts_fts(rowid, {FTS_COLUMNS})
        VALUES (new.seq, new.text, new.category, new.entity, new.key, new.value, new.tags,
                new.context, new.date_terms);
    END;
    CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
        INSERT INTO facts_fts(facts_fts, rowid, {FTS_COLUMNS})
        VALUES ('delete', old.seq, old.text, old.category, old.entity, old.key, old.value,
                old.tags, old.context, old.date_terms);
    END;
    CREATE TRIGGER facts_fts_update
    AFTER UPDATE OF {FTS_COLUMNS} ON facts BEGIN
        INSERT INTO facts_fts(facts_fts, rowid, {FTS_COLUMNS})
        VALUES ('delete', old.seq, old.text, old.category, old.entity, old.key, old.value,
                old.tags, old.context, old.date_terms);
        INSERT INTO facts_fts(rowid, {FTS_COLUMNS})
        VALUES (new.seq, new.text, new.category, new.entity, new.key, new.value, new.tags,
                new.context, new.date_terms);
    END;

    CREATE TABLE links (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        source_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN
            ('SUPERSEDES', 'CAUSED_BY', 'PART_OF', 'RELATED_TO', 'DEPENDS_ON')),
        strength REAL NOT NULL CHECK (strength >= 0 AND strength <= 1),
        origin TEXT NOT NULL CHECK (origin IN
            ('explicit', 'auto_similarity', 'auto_entity', 'supersession', 'import')),
        recorded_at REAL NOT NULL,
        valid_from REAL NOT NULL,
        valid_until REAL,
        valid_until_recorded_at REAL,
        retracted_at REAL,
        metadata TEXT NOT NULL DEFAULT '{{}}'
    );
    CREATE INDEX links_source ON links(source_id, type);
    CREATE INDEX links_target ON links(target_id, type);
    CREATE UNIQUE INDEX links_one_live ON links(source_id, target_id, type)
        WHERE retracted_at IS NULL;

    -- One row per fact whose vector in LanceDB must be brought in line with SQLite.
    CREATE TABLE outbox (
        fact_id TEXT PRIMARY KEY,
        queued_at REAL NOT NULL
    );

    CREATE TABLE embedding_cache (
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,                  -- float32, little-endian
        created_at REAL NOT NULL,
        PRIMARY KEY (provider, model, text_hash)
    ) WITHOUT ROWID;

    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # 2: traversal reads each fact's links strongest first and stops after the fan-out cap, so
    # a hub costs no more than an ordinary fact; these replace the (fact, type) indexes.
    """
    CREATE INDEX links_source_strength ON links(source_id, strength DESC);
    CREATE INDEX links_target_strength ON links(target_id, strength DESC);
    DROP INDEX links_source;
    DROP INDEX links_target;
    """,
    # 3: the embedding cache becomes a rowid table with a unique index. As a WITHOUT ROWID table
    # keyed by a random hash, its ~1 KB rows landed on random pages: a batch of 1,000 new texts
    # dirtied ~3,000 pages (12 MB of WAL). Now the vectors append and only the small index
    # entries land at random.
    """
    CREATE TABLE embedding_cache_v2 (
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,                  -- float32, little-endian
        created_at REAL NOT NULL
    );
    INSERT INTO embedding_cache_v2 (provider, model, text_hash, dims, vector, created_at)
        SELECT provider, model, text_hash, dims, vector, created_at FROM embedding_cache;
    DROP TABLE embedding_cache;
    ALTER TABLE embedding_cache_v2 RENAME TO embedding_cache;
    CREATE UNIQUE INDEX embedding_cache_key ON embedding_cache(provider, model, text_hash);
    """,
    # 4: same-entity links find an entity's most recent live facts without reading them all.
    """
    CREATE INDEX facts_live_entity ON facts(lower(entity), seq)
        WHERE entity IS NOT NULL AND retracted_at IS NULL AND superseded_by IS NULL;
    """,
    # 5: the source index also holds the target, so the links among a set of facts are found
    # from the index alone (a hub's thousands of entries are scanned, not its rows read).
    """
    DROP INDEX links_source_strength;
    CREATE INDEX links_source_strength ON links(source_id, strength DESC, target_id);
    """,
    # 6: writers index their new facts in one statement (sql.keyword_index.indexing): through the
    # per-row trigger, FTS5 took about 85 ms more per 1,000 facts inserted.
    """
    DROP TRIGGER facts_fts_insert;
    """,
    # 7: a link made without valid_from holds from when both of its facts hold (the later of
    # their valid_from); explicit links made before defaulted to the moment of linking (their
    # recorded_at) and take the new default.
    """
    UPDATE links SET valid_from = max(
        (SELECT f.valid_from FROM facts f WHERE f.id = links.source_id),
        (SELECT f.valid_from FROM facts f WHERE f.id = links.target_id))
    WHERE origin = 'explicit' AND valid_from = recorded_at
        AND (valid_until IS NULL OR valid_until > max(
            (SELECT f.valid_from FROM facts f WHERE f.id = links.source_id),
            (SELECT f.valid_from FROM facts f WHERE f.id = links.target_id)));
    """,
    # 8: episodes, the units facts come from (a conversation session, a document); each fact
    # names its episode, and consecutive facts of an episode are linked (origin 'episode', a
    # new value: the links table is rebuilt with the same rows, seq and indexes).
    """
    CREATE TABLE episodes (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('conversation', 'document', 'other')),
        source TEXT,
        time REAL NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        recorded_at REAL NOT NULL
    );
    CREATE INDEX episodes_time ON episodes(time, seq);
    CREATE INDEX episodes_source ON episodes(source, time, seq) WHERE source IS NOT NULL;
    ALTER TABLE facts ADD COLUMN episode_id TEXT;
    CREATE INDEX facts_episode ON facts(episode_id, seq) WHERE episode_id IS NOT NULL;
    CREATE TABLE links_v8 (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        source_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN
            ('SUPERSEDES', 'CAUSED_BY', 'PART_OF', 'RELATED_TO', 'DEPENDS_ON')),
        strength REAL NOT NULL CHECK (strength >= 0 AND strength <= 1),
        origin TEXT NOT NULL CHECK (origin IN
            ('explicit', 'auto_similarity', 'auto_entity', 'supersession', 'import', 'episode')),
        recorded_at REAL NOT NULL,
        valid_from REAL NOT NULL,
        valid_until REAL,
        valid_until_recorded_at REAL,
        retracted_at REAL,
        metadata TEXT NOT NULL DEFAULT '{}'
    );
    INSERT INTO links_v8 SELECT seq, id, source_id, target_id, type, strength, origin,
        recorded_at, valid_from, valid_until, valid_until_recorded_at, retracted_at, metadata
        FROM links;
    DROP TABLE links;
    ALTER TABLE links_v8 RENAME TO links;
    CREATE UNIQUE INDEX links_one_live ON links(source_id, target_id, type)
        WHERE retracted_at IS NULL;
    CREATE INDEX links_source_strength ON links(source_id, strength DESC, target_id);
    CREATE INDEX links_target_strength ON links(target_id, strength DESC);
    """,
    # 9: the record each purge leaves (when, the filter as digests, how many of each kind).
    """
    CREATE TABLE erasures (
        seq INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        filter TEXT NOT NULL,
        facts INTEGER NOT NULL,
        links INTEGER NOT NULL,
        vectors INTEGER NOT NULL,
        episodes INTEGER NOT NULL
    );
    """,
    # 10: the markdown files synced as documents (graphmem.documents): what each was at its
    # last sync. A document is the episode whose id is the file's path.
    """
    CREATE TABLE files (
        path TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        mtime REAL NOT NULL,
        size INTEGER NOT NULL,
        chunks INTEGER NOT NULL,
        synced_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 11: the vector log: each write to the vector index, by fact id, in order (id '*': the
    # whole index was rebuilt), so that every process's in-memory copy of the index follows
    # the writes of the others (graphmem.vectors.index). Only the newest entries are kept.
    """
    CREATE TABLE vector_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        fact_id TEXT NOT NULL
    );
    """,
    # 12: an entity's facts in lookup's order (most confident, then newest effective date), so
    # that a lookup reads its ``limit`` rows, not every fact of the entity to sort them.
    """
    CREATE INDEX facts_entity_rank ON facts(
        lower(entity), confidence DESC, COALESCE(source_date, valid_from) DESC, seq DESC
    );
    """,
    # 13: the graph log: every change to a fact's or a link's visibility or ends after it was
    # written, and every deletion, in commit order (kind 0 fact changed, 1 link changed, 2 fact
    # deleted, 3 link deleted; row = its seq), so that every process's in-memory copy of the
    # graph (graphmem.storage.sql.graph_copy) follows all writes. New rows are read by seq. Only the newest
    # entries are kept.
    """
    CREATE TABLE graph_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind INTEGER NOT NULL,
        row INTEGER NOT NULL
    );
    CREATE TRIGGER facts_graph_update AFTER UPDATE OF id, recorded_at, retracted_at, valid_from,
        expires_at, valid_until, valid_until_recorded_at ON facts BEGIN
        INSERT INTO graph_log (kind, row) VALUES (0, new.seq);
    END;
    CREATE TRIGGER facts_graph_delete AFTER DELETE ON facts BEGIN
        INSERT INTO graph_log (kind, row) VALUES (2, old.seq);
    END;
    CREATE TRIGGER links_graph_update AFTER UPDATE OF source_id, target_id, type, strength,
        origin, recorded_at, retracted_at, valid_from, valid_until, valid_until_recorded_at
        ON links BEGIN
        INSERT INTO graph_log (kind, row) VALUES (1, new.seq);
    END;
    CREATE TRIGGER links_graph_delete AFTER DELETE ON links BEGIN
        INSERT INTO graph_log (kind, row) VALUES (3, old.seq);
    END;
    """,
    # 14: facts by their date for time words (graphmem.storage.sql.reads.DATED), so that the keyword
    # matches of a short period are found among that period's facts, not by reading every match.
    """
    CREATE INDEX facts_dated ON facts(COALESCE(source_date, valid_from));
    """,
    # 15: each vector log entry's row as the write left it (graphmem.vectors.index: ROW_DELETED,
    # ROW_STORED, ROW_LIVE), so that the other processes take its vector from the embedding
    # cache instead of reading it back from the table. NULL (entries written before, the
    # rebuilt and compacted marks): read back from the table.
    """
    ALTER TABLE vector_log ADD COLUMN state INTEGER;
    """,
    # 16: the change log: every change announced to subscribers (graphmem.models.Change), in
    # commit order, with the writer that made it (``origin``), so that a process hears of the
    # changes the others commit (Memory.changes_since, resolvers/events.py). Only the newest
    # entries are kept.
    """
    CREATE TABLE change_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        item TEXT NOT NULL,
        changed_at REAL NOT NULL,
        origin TEXT NOT NULL
    );
    """,
    # 17: a file record loaded by an import (1) names a path of another machine: it is not read
    # back until a sync on this machine finds the file (graphmem.documents).
    """
    ALTER TABLE files ADD COLUMN imported INTEGER NOT NULL DEFAULT 0;
    """,
    # 18: a fact's tier: pinned facts lead every recall block (graphmem.recall), a pin carried
    # to the version that supersedes the fact; cold facts stay out of recall unless asked.
    """
    ALTER TABLE facts ADD COLUMN pinned_at REAL;
    ALTER TABLE facts ADD COLUMN cold_at REAL;
    CREATE INDEX facts_pinned ON facts(pinned_at) WHERE pinned_at IS NOT NULL;
    """,
    # 19: the record of each scheduled maintenance run (graphmem.maintenance); a run is claimed
    # by inserting its row as 'running'. Only the newest records are kept.
    """
    CREATE TABLE maintenance_runs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
        changed TEXT NOT NULL,
        requests INTEGER NOT NULL,
        error TEXT
    );
    CREATE INDEX maintenance_runs_job ON maintenance_runs(job, status);
    """,
    # 20: links drawn by reflection and by the LLM classifier have origins of their own
    # ('reflection', 'classifier'): the links table is rebuilt with the same rows, seq, indexes
    # and graph-log triggers.
    _links_rebuilt(20, "'reflection', 'classifier'"),
    # 21: the time a fact's text states (graphmem.statedtime): the period its mentions cover and
    # their words; facts stored before get it from `graphmem backfill-stated-time`.
    """
    ALTER TABLE facts ADD COLUMN stated_start REAL;
    ALTER TABLE facts ADD COLUMN stated_end REAL;
    ALTER TABLE facts ADD COLUMN stated_text TEXT;
    CREATE INDEX facts_stated ON facts(stated_start, stated_end) WHERE stated_start IS NOT NULL;
    """,
    # 22: windows of turns (graphmem.windows): consecutive facts of an episode, keyword-indexed
    # together, each keyed by the fact it ends on; window_facts finds the windows of a fact.
    # Episodes stored before get theirs from `graphmem backfill-windows`.
    f"""
    CREATE TABLE windows (
        seq INTEGER PRIMARY KEY,               -- rowid for FTS5
        end_id TEXT NOT NULL UNIQUE,
        episode_id TEXT NOT NULL,
        fact_ids TEXT NOT NULL,                -- space-separated, in the episode's order
        text TEXT NOT NULL
    );
    CREATE INDEX windows_episode ON windows(episode_id);
    CREATE TABLE window_facts (
        fact_id TEXT NOT NULL,
        end_id TEXT NOT NULL,
        PRIMARY KEY (fact_id, end_id)
    ) WITHOUT ROWID;
    CREATE INDEX window_facts_end ON window_facts(end_id);
    CREATE VIRTUAL TABLE windows_fts USING fts5(
        text, content='windows', content_rowid='seq', tokenize='{FTS_TOKENIZER}'
    );
    CREATE TRIGGER windows_fts_insert AFTER INSERT ON windows BEGIN
        INSERT INTO windows_fts(rowid, text) VALUES (new.seq, new.text);
    END;
    CREATE TRIGGER windows_fts_delete AFTER DELETE ON windows BEGIN
        INSERT INTO windows_fts(windows_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    END;
    """,
    # 23: which file each sync read, 'device:inode': read-back opens that file only
    # (graphmem.documents). NULL for the records made before, until the next sync.
    """
    ALTER TABLE files ADD COLUMN inode TEXT;
    """,
    # 24: the PART_OF link from a fact capture drew to the turn it came from has an origin of
    # its own ('capture'): the links table is rebuilt as in 20.
    _links_rebuilt(24, "'reflection', 'classifier', 'capture'"),
    # 25: entities (graphmem.storage.sql.entities): the names the facts carry, counted from the
    # facts already stored, and the aliases, merges and splits declared on them, with
    # transaction time. AUTOINCREMENT: a position is never reused, so the newest tells a
    # reader's cache that the names changed.
    """
    CREATE TABLE entity_names (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        spelling TEXT NOT NULL,
        fact_count INTEGER NOT NULL,
        first_recorded_at REAL NOT NULL
    );
    INSERT INTO entity_names (name, spelling, fact_count, first_recorded_at)
        SELECT lower(entity), min(entity), count(*), min(recorded_at) FROM facts
        WHERE entity IS NOT NULL GROUP BY lower(entity);
    CREATE TABLE entity_aliases (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('alias', 'merge', 'split')),
        name TEXT NOT NULL,
        target TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        retracted_at REAL
    );
    CREATE INDEX entity_aliases_target ON entity_aliases(target);
    """,
    # 26: the summaries of entity profiles a chat model wrote (graphmem.storage.sql.profiles),
    # each under its entity and the signature of what the model was shown, and the facts it was
    # shown, so that a purge of any of them deletes it.
    """
    CREATE TABLE profile_summaries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        entity TEXT NOT NULL,
        signature TEXT NOT NULL,
        summary TEXT NOT NULL,
        cited TEXT NOT NULL,                   -- JSON list of fact ids
        created_at REAL NOT NULL,
        UNIQUE (entity, signature)
    );
    CREATE TABLE profile_summary_facts (
        fact_id TEXT NOT NULL,
        summary_seq INTEGER NOT NULL,
        PRIMARY KEY (fact_id, summary_seq)
    ) WITHOUT ROWID;
    CREATE INDEX profile_summary_facts_summary ON profile_summary_facts(summary_seq);
    """,
    # 27: what every read and write of the entities asks first (graphmem.storage.sql.entities.
    # signature) answered from indexes, not by scanning every name (17 ms at 100,000 names):
    # the newest time a name was first recorded, and how often names or declarations were
    # removed (what counting the names told; PostgreSQL counts them by a scan).
    """
    CREATE INDEX entity_names_first_recorded ON entity_names(first_recorded_at);
    CREATE TABLE entity_removals (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        removals INTEGER NOT NULL
    );
    """,
)

SCHEMA_VERSION: Final = len(MIGRATIONS)


def apply(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s database to SCHEMA_VERSION; returns how many migrations ran."""
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if current > SCHEMA_VERSION:
        raise StorageError(
            f"database schema version {current} is newer than this graphmem understands "
            f"({SCHEMA_VERSION}); upgrade graphmem"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION - current


def _statements(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())
    return out
