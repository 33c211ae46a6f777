"""The store engines and what lies beneath ``Memory``: the conformance suite every engine
passes, SQLite and PostgreSQL specifics, the vector index, keyword ranking, the graph copy,
backup."""
