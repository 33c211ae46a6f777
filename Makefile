# The README's commands. Every target creates the virtualenv and installs what it needs first.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: serve test lint bench bench-quick clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The service on the embedded default: SQLite + LanceDB in ./data, the local embedder,
# http://127.0.0.1:8420/graphql (settings: GRAPHMEM_* variables or ./graphmem.toml).
serve: $(STAMP)
	$(VENV)/bin/graphmem serve

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check graphmem resolvers tests bench
	$(VENV)/bin/ruff format --check graphmem resolvers tests bench
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m bench.locomo
	$(PY) -m bench.locomo --link-turns --weights 0.6 --evidence-weights 0 0.5
	$(PY) -m bench.recall
	$(PY) -m bench.situatedqa
	$(PY) -m bench.pathquestion
	$(PY) -m bench.autolink
	$(PY) -m bench.graph
	$(PY) -m bench.speed
	$(PY) -m bench.http

bench-quick: $(STAMP)
	$(PY) -m bench.locomo --samples 2
	$(PY) -m bench.recall --samples 2 --no-variants
	$(PY) -m bench.situatedqa --limit 300
	$(PY) -m bench.pathquestion --embedder hash --limit 300
	$(PY) -m bench.graph --facts 10000 --links 50000
	$(PY) -m bench.speed --sizes 10000
	$(PY) -m bench.http --facts 5000 --links 20000 --embedder hash

clean:
	rm -rf $(VENV) build *.egg-info
