"""graphmem's tests, by the layer they exercise:

- ``core/``: the engine through ``Memory`` and its pure modules (writes, search, recall, the
  graph, capture, decay, settings, the registries, the core's CLI; time in ``test_time_*.py``);
- ``storage/``: the store engines (``test_conformance.py`` runs on every engine), migrations,
  the keyword ranking, the in-memory graph copy, backup;
- ``vectors/``: the vector engines: the in-memory mirror, indexes on S3, the embedders;
- ``server/``: the GraphQL, HTTP, MCP and explorer service of ``resolvers/``;
- ``client/``: ``graphmem.Client`` and ``AsyncClient`` against a live service;
- ``system/``: real processes, crashes, faults, hostile input and the scale-out topology
  (``test_reliability_*.py``; ``soak.py`` holds the long scenarios ``make soak`` runs);
- ``project/``: checks of the repository as a whole: generated docs, the layers' imports;
- ``support/``: the helpers the tests share (GraphQL and MCP clients, the OpenAI-compatible
  stub, a settable clock). ``conftest.py`` holds the fixtures every folder uses.

Modules are also marked by the engine matrix they join (pyproject lists the markers):
``engines`` suites run again on PostgreSQL and on vectors in S3, ``client_api`` suites over
``graphmem.Client``; ``quick_engines`` and ``quick_client_api`` are the few ``make test`` runs
that way too."""
