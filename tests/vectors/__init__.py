"""The vector engines beneath ``Memory``: the in-memory mirror and its exact and partitioned
search, vector indexes on an S3-compatible store, and the embedders."""
