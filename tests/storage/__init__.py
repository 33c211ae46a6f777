"""The store engines beneath ``Memory``: the conformance suite every engine passes, SQLite and
PostgreSQL specifics, keyword ranking, the graph copy, backup."""
