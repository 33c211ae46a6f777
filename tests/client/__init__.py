"""``graphmem.Client`` and ``AsyncClient`` against a live service: its verbs, its bounds against
a hostile service, and the client guide's examples run as written."""
