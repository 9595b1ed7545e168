# Two commands a newcomer needs:  `make demo`  and  `make test`.
PY      ?= $(shell command -v python3.11 || command -v python3)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install jars demo serve test lint bench clean

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

lint: $(STAMP)
	$(BIN)/ruff check cairn tests bench
	$(BIN)/ruff format --check cairn tests bench
	$(BIN)/mypy

bench: $(STAMP) jars
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) var neo4j/lib
