# The README's commands. Every target creates the virtualenv and installs what it needs first.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: serve test test-engines lint soak bench bench-quick bench-peers bench-ann vendor clean cluster cluster-stop

# --no-compile: the few modules a run imports are compiled as it imports them (about 3 s), not
# every module of every dependency at install time (about 18 s).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The service on the embedded default: SQLite + LanceDB in ./data, the local embedder,
# http://127.0.0.1:8420/graphql (settings: GRAPHMEM_* variables or ./graphmem.toml).
serve: $(STAMP)
	$(VENV)/bin/graphmem serve

# The scale-out topology on loopback (docs/scale-out.md): PostgreSQL, an S3-compatible server,
# three `graphmem serve` replicas and haproxy on http://127.0.0.1:8430 (CLUSTER_PORT), running in
# the background until `make cluster-stop`, which stops exactly those processes. Needs Debian's
# postgresql and haproxy packages. CLUSTER_EMBEDDER=hash starts faster than the local model.
# CLUSTER_STANDBY=sync (or async) adds a streaming standby of PostgreSQL (docs/scale-out.md#losing-the-primary).
CLUSTER_PORT     ?= 8430
CLUSTER_EMBEDDER ?= local
CLUSTER_STANDBY  ?= none
cluster: $(STAMP)
	@mkdir -p .cluster
	@setsid $(PY) -m devtools.cluster up --port $(CLUSTER_PORT) --embedder $(CLUSTER_EMBEDDER) \
		--standby $(CLUSTER_STANDBY) \
		> .cluster/cluster.log 2>&1 < /dev/null &
	@$(PY) -m devtools.cluster wait

cluster-stop: $(STAMP)
	@$(PY) -m devtools.cluster down

# The suites whose Memory and service fixtures run again on the scale-out engines: a PostgreSQL
# store (--store postgresql: Debian's postgresql package, started by the tests) and vectors on
# an S3-compatible store (--vectors s3: moto on loopback); skipped, saying why, without them.
# Their modules are marked `engines`; `make test` runs those marked `quick_engines` (the time
# rule and windows of turns) on both engines together, within its ten minutes;
# `make test-engines` runs all of them on every combination (about 13 minutes), and CI
# (.ci/run) runs both.
# The Memory suites marked `client_api` also run over `graphmem.Client` against a live service
# (--api client: the same tests, the same answers; tests marked in_process say why they
# cannot). `make test` runs those marked `quick_client_api`, `make test-engines` all.
# A -m given here replaces pyproject's, so each selection keeps its exclusions.
EXCLUDED := not slow and not thirdparty
# The suites run in two worker processes (pytest-xdist), a test file to a worker: each worker
# has its own session servers (PostgreSQL, moto, the stubs) on free loopback ports. On 2 cores
# that takes `make test`'s first run from about ten minutes to about seven; WORKERS=0 runs it
# in one process (a failing test's output then comes in order).
WORKERS ?= 2
PARALLEL := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)

# The live scale-out topology (PostgreSQL, moto, three replicas, haproxy: about 70 s) and the
# object store outage under load and hanging (about 80 s) and the loss of its primary (a standby
# promoted under load, then the maintenance runner on it, tests/system/test_failover.py: about
# 100 s) run in `make test-engines`, which keeps `make test` within its ten minutes.
TOPOLOGY_TESTS := tests/system/test_cluster.py tests/system/test_object_store_outage.py \
	tests/system/test_failover.py

test: $(STAMP)
	$(PY) -m pytest $(PARALLEL) $(addprefix --ignore=,$(TOPOLOGY_TESTS))
	$(PY) -m pytest $(PARALLEL) --store postgresql --vectors s3 -m "quick_engines and $(EXCLUDED)"
	$(PY) -m pytest $(PARALLEL) --api client -m "quick_client_api and $(EXCLUDED)"

test-engines: $(STAMP)
	$(PY) -m pytest -m thirdparty tests/thirdparty
	$(PY) -m pytest $(TOPOLOGY_TESTS)
	$(PY) -m pytest --api client -m "client_api and $(EXCLUDED)"
	$(PY) -m pytest --store postgresql --vectors s3 -m "engines and $(EXCLUDED)"
	$(PY) -m pytest --store postgresql -m "engines and $(EXCLUDED)"
	$(PY) -m pytest --vectors s3 -m "engines and $(EXCLUDED)"

# The reliability scenarios at length against a real server (docs/operations.md#reliability):
# 20 SIGKILLs in the middle of bulk ingests, then 2 minutes of 16 writers and 16 readers.
# About 8 minutes; prints the figures as JSON and exits 1 on any lost, duplicated or half write.
# Then the live scale-out topology's scenarios with 2 minutes of load
# (tests/system/test_cluster.py, about 7 minutes), the object store down for 30 s then slow for
# 30 s under load, then hanging (tests/system/test_object_store_outage.py, about 3 minutes), the
# primary lost and a standby promoted with a minute of load before and after, synchronous then
# asynchronous (tests/system/test_failover.py, about 6 minutes), the bitemporal model check
# (tests/core/test_time_model.py) with 1,000 histories (about 7 minutes), and 2,000 generated
# hostile documents per generator (tests/system/test_reliability_hostile.py, about 5 minutes).
# About 35 minutes in all.
soak: $(STAMP)
	$(PY) -m tests.system.soak --kills 20 --seconds 120
	CLUSTER_SOAK_SECONDS=120 $(PY) -m pytest -q -s -p no:cacheprovider tests/system/test_cluster.py
	OBJECT_STORE_OUTAGE_SECONDS=30 $(PY) -m pytest -q -s -p no:cacheprovider \
		tests/system/test_object_store_outage.py
	CLUSTER_SOAK_SECONDS=60 $(PY) -m pytest -q -s -p no:cacheprovider tests/system/test_failover.py
	MODEL_EXAMPLES=1000 $(PY) -m pytest -q -p no:cacheprovider tests/core/test_time_model.py
	FUZZ_EXAMPLES=2000 $(PY) -m pytest -q -p no:cacheprovider tests/system/test_reliability_hostile.py

# mypy reads the service as graphmem.server, its one name, from this link (pyproject.toml, mypy_path).
TYPING_LINK := $(VENV)/typing/graphmem/server
$(TYPING_LINK): $(STAMP)
	mkdir -p $(dir $@)
	ln -sfn ../../../resolvers $@

lint: $(STAMP) $(TYPING_LINK)
	$(VENV)/bin/ruff check graphmem resolvers tests bench devtools
	$(VENV)/bin/ruff format --check graphmem resolvers tests bench devtools
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture

bench: $(STAMP)
	$(PY) -m bench.locomo
	$(PY) -m bench.locomo --link-turns --weights 0.6 --evidence-weights 0 0.5
	$(PY) -m bench.recall
	$(PY) -m bench.situatedqa
	$(PY) -m bench.pathquestion
	$(PY) -m bench.autolink
	$(PY) -m bench.secrets
	$(PY) -m bench.notes
	$(PY) -m bench.graph
	$(PY) -m bench.speed
	$(PY) -m bench.http
	$(PY) -m bench.writes
	$(PY) -m bench.processes
	$(PY) -m bench.scale

bench-quick: $(STAMP)
	$(PY) -m bench.locomo --samples 2
	$(PY) -m bench.recall --samples 2 --no-variants
	$(PY) -m bench.situatedqa --limit 300
	$(PY) -m bench.pathquestion --embedder hash --limit 300
	$(PY) -m bench.graph --facts 10000 --links 50000
	$(PY) -m bench.speed --sizes 10000
	$(PY) -m bench.http --facts 5000 --links 20000 --embedder hash
	$(PY) -m bench.writes --seconds 5
	$(PY) -m bench.processes --rounds 10
	$(PY) -m bench.scale --facts 20000 --segment 10000

# graphmem against its peers (mem0, LanceDB hybrid, SQLite FTS5, networkx) on the same data and
# vectors: bench/peers.py. The peers live in .venv-peers, never in graphmem's own virtualenv.
# About 35 minutes on 2 cores (27 once the vectors are kept in bench/out/peers-cache);
# `make bench-peers PEERS_ARGS=--quick` is a smoke run of about a minute.
PEERS_VENV  := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_ARGS  ?=

$(PEERS_STAMP): bench/peers-requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --disable-pip-version-check -r bench/peers-requirements.txt
	touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(PY) -m bench.peers $(PEERS_ARGS)

# The in-memory approximate tier (faiss's inverted lists) against exact search (bench/ann.py,
# bench/REPORT.md "Vector search in memory"). A few minutes at the default 100k and 300k vectors
# once bench.scale's local vectors are in bench/out; ANN_ARGS="--facts 100000" for one size.
ANN_ARGS ?=

bench-ann: $(STAMP)
	$(PY) -m bench.ann $(ANN_ARGS)

# The explorer's graph library (Cytoscape.js), vendored as its built ES module, and GraphiQL's
# files (resolvers/static/graphiql.html, served at /graphql): React's and ReactDOM's UMD builds,
# GraphiQL's bundle and styles, its explorer plugin, at the versions strawberry's own GraphiQL
# page asks unpkg.com for. All from the npm registry; `npm pack` checks the registry's integrity
# hash, recorded in NOTICE. Needs npm, and only to update: bump a version, run `make vendor`,
# commit resolvers/static/vendor. Tests check the pages load them and nothing from elsewhere.
CYTOSCAPE         := 3.34.4
REACT             := 18.2.0
GRAPHIQL          := 3.8.3
GRAPHIQL_EXPLORER := 1.0.2
VENDOR            := resolvers/static/vendor
NPM_PACKAGES      := cytoscape@$(CYTOSCAPE) react@$(REACT) react-dom@$(REACT) graphiql@$(GRAPHIQL) \
	@graphiql/plugin-explorer@$(GRAPHIQL_EXPLORER)

vendor:
	rm -rf build/npm && mkdir -p build/npm $(VENDOR)
	cd build/npm && for spec in $(NPM_PACKAGES); do \
	  dir=$$(echo "$${spec%@*}" | tr -d @ | tr / -) && mkdir $$dir && \
	  (cd $$dir && npm pack --silent $$spec >/dev/null && tar xzf *.tgz) || exit 1; done
	rm -f $(VENDOR)/*
	cp build/npm/cytoscape/package/dist/cytoscape.esm.min.mjs $(VENDOR)/cytoscape-$(CYTOSCAPE).esm.min.mjs
	cp build/npm/cytoscape/package/LICENSE $(VENDOR)/cytoscape.LICENSE.txt
	cp build/npm/react/package/umd/react.production.min.js $(VENDOR)/react-$(REACT).production.min.js
	cp build/npm/react/package/LICENSE $(VENDOR)/react.LICENSE.txt
	cp build/npm/react-dom/package/umd/react-dom.production.min.js $(VENDOR)/react-dom-$(REACT).production.min.js
	cp build/npm/react-dom/package/LICENSE $(VENDOR)/react-dom.LICENSE.txt
	cp build/npm/graphiql/package/graphiql.min.js $(VENDOR)/graphiql-$(GRAPHIQL).min.js
	cp build/npm/graphiql/package/graphiql.min.css $(VENDOR)/graphiql-$(GRAPHIQL).min.css
	cp build/npm/graphiql/package/LICENSE $(VENDOR)/graphiql.LICENSE.txt
	cp build/npm/graphiql-plugin-explorer/package/dist/index.umd.js $(VENDOR)/graphiql-plugin-explorer-$(GRAPHIQL_EXPLORER).umd.js
	cp build/npm/graphiql-plugin-explorer/package/dist/style.css $(VENDOR)/graphiql-plugin-explorer-$(GRAPHIQL_EXPLORER).css
	sed -i -E 's/cytoscape-[0-9.]+\.esm\.min\.mjs/cytoscape-$(CYTOSCAPE).esm.min.mjs/' resolvers/static/graph.js
	sed -i -E -e 's/react-[0-9.]+\.production/react-$(REACT).production/' \
	  -e 's/react-dom-[0-9.]+\.production/react-dom-$(REACT).production/' \
	  -e 's/graphiql-[0-9.]+\.min\./graphiql-$(GRAPHIQL).min./' \
	  -e 's/graphiql-plugin-explorer-[0-9.]+\./graphiql-plugin-explorer-$(GRAPHIQL_EXPLORER)./' \
	  resolvers/static/graphiql.html
	cd build/npm && integrity() { npm view --silent "$$1" dist.integrity; } && { \
	  printf '%s is %s of the npm package %s\n(%s), npm integrity %s\n' \
	    cytoscape-$(CYTOSCAPE).esm.min.mjs dist/cytoscape.esm.min.mjs cytoscape@$(CYTOSCAPE) \
	    "Cytoscape.js, MIT licence: cytoscape.LICENSE.txt" "$$(integrity cytoscape@$(CYTOSCAPE))" && \
	  printf '%s is %s of the npm package %s\n(%s), npm integrity %s\n' \
	    react-$(REACT).production.min.js umd/react.production.min.js react@$(REACT) \
	    "React, MIT licence: react.LICENSE.txt" "$$(integrity react@$(REACT))" && \
	  printf '%s is %s of the npm package %s\n(%s), npm integrity %s\n' \
	    react-dom-$(REACT).production.min.js umd/react-dom.production.min.js react-dom@$(REACT) \
	    "ReactDOM, MIT licence: react-dom.LICENSE.txt" "$$(integrity react-dom@$(REACT))" && \
	  printf '%s are %s of the npm package %s\n(%s), npm integrity %s\n' \
	    "graphiql-$(GRAPHIQL).min.js and .min.css" "graphiql.min.js and graphiql.min.css" \
	    graphiql@$(GRAPHIQL) "GraphiQL, MIT licence: graphiql.LICENSE.txt" \
	    "$$(integrity graphiql@$(GRAPHIQL))" && \
	  printf '%s are %s of the npm package %s\n(%s), npm integrity %s\n' \
	    "graphiql-plugin-explorer-$(GRAPHIQL_EXPLORER).umd.js and .css" \
	    "dist/index.umd.js and dist/style.css" @graphiql/plugin-explorer@$(GRAPHIQL_EXPLORER) \
	    "GraphiQL's explorer plugin, MIT licence by its package.json; the package ships no licence file: graphiql.LICENSE.txt, of the same repository, is its text" \
	    "$$(integrity @graphiql/plugin-explorer@$(GRAPHIQL_EXPLORER))"; \
	} > ../../$(VENDOR)/NOTICE

clean:
	rm -rf $(VENV) build *.egg-info test-artefacts
