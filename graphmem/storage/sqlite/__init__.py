"""The embedded engine: one SQLite file per namespace (WAL, FTS5), and the key file."""
