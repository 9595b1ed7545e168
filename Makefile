# Two commands a newcomer needs:  `make demo`  and  `make test`.
PY      ?= $(shell command -v python3.11 || command -v python3)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install jars demo serve test test-unit fuzz lint bench web-vendor graphiql-vendor clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

jars: $(STAMP)
	$(BIN)/python -c "from cairn.runtime.neo4j_server import ensure_jars; from cairn.runtime.settings import get_settings; ensure_jars(get_settings())"

## Start the service with the demo data on the embedded local Neo4j (http://127.0.0.1:8000).
demo: $(STAMP)
	$(BIN)/cairn serve --demo

serve: $(STAMP)
	$(BIN)/cairn serve

## Run the whole test suite against a real Neo4j (started on test ports, stopped after).
test: $(STAMP) jars
	$(BIN)/pytest -q

## The tests that need no Neo4j (tests/unit): under a minute, no jars.
test-unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

## The leak properties (hidden ids, texts, fields) with 10,000 examples each; counts in bench/results/fuzz.md.
fuzz: $(STAMP) jars
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -p no:cacheprovider tests/e2e/test_policy_properties.py

lint: $(STAMP)
	$(BIN)/ruff check cairn tests bench
	$(BIN)/ruff format --check cairn tests bench
	$(BIN)/mypy

bench: $(STAMP) jars
	$(BIN)/python -m bench

CYTOSCAPE_VERSION := 3.34.4

## Refresh the vendored graph library in web/vendor/ from npm (the UI itself needs no build step).
web-vendor:
	tmp=$$(mktemp -d) && \
	  (cd $$tmp && npm pack --silent cytoscape@$(CYTOSCAPE_VERSION) >/dev/null && tar xzf cytoscape-$(CYTOSCAPE_VERSION).tgz) && \
	  cp $$tmp/package/dist/cytoscape.min.js web/vendor/cytoscape.min.js && \
	  cp $$tmp/package/LICENSE web/vendor/cytoscape.LICENSE && \
	  rm -rf $$tmp
	sha256sum web/vendor/cytoscape.min.js

GRAPHIQL_VERSION := 3.8.3
REACT_VERSION    := 18.3.1

## Refresh the vendored GraphiQL (and the React it runs on) in web/vendor/graphiql/ from npm.
graphiql-vendor:
	tmp=$$(mktemp -d) && \
	  (cd $$tmp && for p in graphiql@$(GRAPHIQL_VERSION) react@$(REACT_VERSION) react-dom@$(REACT_VERSION); do \
	     npm pack --silent $$p >/dev/null && mkdir -p $${p%@*} && tar xzf $${p%@*}-*.tgz -C $${p%@*}; done) && \
	  mkdir -p web/vendor/graphiql && \
	  cp $$tmp/graphiql/package/graphiql.min.js $$tmp/graphiql/package/graphiql.min.css web/vendor/graphiql/ && \
	  cp $$tmp/graphiql/package/LICENSE web/vendor/graphiql/graphiql.LICENSE && \
	  cp $$tmp/react/package/umd/react.production.min.js web/vendor/graphiql/ && \
	  cp $$tmp/react-dom/package/umd/react-dom.production.min.js web/vendor/graphiql/ && \
	  cp $$tmp/react/package/LICENSE web/vendor/graphiql/react.LICENSE && \
	  rm -rf $$tmp
	sha256sum web/vendor/graphiql/*.js web/vendor/graphiql/*.css

clean:
	rm -rf $(VENV) var neo4j/lib
