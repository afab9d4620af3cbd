# `make demo`: set up .venv and optimize the model shipped in examples/models.
# `make test`: set up .venv and run the test suite.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

SHARED ?= ../shared
CORPUS ?= .cache/corpus

.PHONY: demo test test-corpus lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@PYTHON=$$(scripts/find-python.sh) && echo "using $$PYTHON" && \
	  ( [ -x $(PY) ] || "$$PYTHON" -m venv $(VENV) )
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: venv
	@mkdir -p out
	$(VENV)/bin/rewrite optimize examples/models/tiny_bert_block.onnx out/tiny_bert_block.opt.onnx \
	  --report out/report.json

test: venv
	$(VENV)/bin/pytest -q -m "not slow"

# Materializes ../shared/corpus once into $(CORPUS) (~1.7 GB) and runs the slow corpus tests.
test-corpus: venv $(CORPUS)/.done
	REWRITE_CORPUS=$(CORPUS) $(VENV)/bin/pytest -q -m slow

$(CORPUS)/.done:
	@test -d $(SHARED)/corpus || { echo "no corpus at $(SHARED)/corpus (set SHARED=...)"; exit 1; }
	mkdir -p $(CORPUS)
	$(PY) $(SHARED)/corpus/materialize.py $(SHARED)/corpus $(CORPUS)
	@touch $@

lint: venv
	$(VENV)/bin/ruff check rewrite rulesets tests bench examples
	$(VENV)/bin/ruff format --check rewrite rulesets tests bench examples

clean:
	rm -rf $(VENV) out .pytest_cache
