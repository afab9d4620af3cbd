# `make demo`: set up .venv and optimize the model shipped in examples/models.
# `make test`: set up .venv and run the test suite.
# Both install the exact versions CI tested (constraints.txt, also for the build backend);
# `make test-latest` installs the newest versions pyproject.toml allows into .venv-latest and
# runs the same suite, so drift shows up before users see it. `scripts/lock.sh` re-locks.
SHELL := /bin/bash
VENV := .venv
LATEST := .venv-latest
export PIP_CONSTRAINT := $(abspath constraints.txt)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

SHARED ?= ../shared
CORPUS ?= .cache/corpus

.PHONY: demo test test-latest test-corpus mutate lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@PYTHON=$$(scripts/find-python.sh) && echo "using $$PYTHON" && \
	  ( [ -x $(PY) ] || "$$PYTHON" -m venv $(VENV) )
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: venv
	@mkdir -p out
	$(VENV)/bin/rewrite optimize examples/models/tiny_bert_block.onnx out/tiny_bert_block.opt.onnx \
	  --report out/report.json

# Two workers (pytest-xdist): the suite fits in ~6 minutes on a 2-core machine; each worker
# shares the session's proof cache (tests/conftest.py).
test: venv
	$(VENV)/bin/pytest -q -m "not slow" -n 2 --durations=15

# Newest allowed versions, no cache, a venv of its own; prints what differs from the lock.
test-latest:
	rm -rf $(LATEST)
	@PYTHON=$$(scripts/find-python.sh) && echo "using $$PYTHON" && "$$PYTHON" -m venv $(LATEST)
	env -u PIP_CONSTRAINT $(LATEST)/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
	env -u PIP_CONSTRAINT $(LATEST)/bin/python -m pip install --quiet --no-cache-dir --upgrade \
	  -e '.[dev]'
	@echo "versions that differ from constraints.txt:"
	@join -t= <(grep -v '^#' constraints.txt | sed 's/==/=/' | tr A-Z a-z | sort -t= -k1,1) \
	  <($(LATEST)/bin/python -m pip freeze --all --exclude-editable | sed 's/==/=/' \
	  | tr A-Z a-z | sort -t= -k1,1) | awk -F= '$$2 != $$3 {print "  " $$1 ": locked " $$2 \
	  ", latest " $$3; n++} END {if (!n) print "  none"}'
	$(LATEST)/bin/pytest -q -m "not slow" -n 2 -p no:cacheprovider

# Materializes ../shared/corpus once into $(CORPUS) (~1.7 GB) and runs the slow corpus tests.
test-corpus: venv $(CORPUS)/.done
	REWRITE_CORPUS=$(CORPUS) $(VENV)/bin/pytest -q -m slow -n 2 --durations=10

$(CORPUS)/.done:
	@test -d $(SHARED)/corpus || { echo "no corpus at $(SHARED)/corpus (set SHARED=...)"; exit 1; }
	mkdir -p $(CORPUS)
	$(PY) $(SHARED)/corpus/materialize.py $(SHARED)/corpus $(CORPUS)
	@touch $@

# Mutation testing (mutmut, one worker; hours on 2 cores): do the tests catch a changed line of
# the prover, the differential check, the rename into place, the extraction validator, the MIP
# and the pipeline's verify wiring? Configured in pyproject.toml [tool.mutmut]; results and the
# survivors' dispositions in BENCHMARKS.md ("Mutation testing"). `make mutate MUTANTS=...`
# runs a subset (mutmut globs, e.g. 'rewrite.publish.*').
MUTANTS ?= 'rewrite.verify.prove.*' 'rewrite.verify.differential.*' 'rewrite.verify.compare.*' \
  'rewrite.publish.*' \
  'rewrite.extract.check.*' 'rewrite.extract.mip.*' \
  'rewrite.acceptance.x_checked__mutmut_*' 'rewrite.acceptance.x_differential_check__mutmut_*'

mutate: $(VENV)/.installed-mutate
	$(VENV)/bin/mutmut run --max-children 1 $(MUTANTS)
	$(VENV)/bin/mutmut results

$(VENV)/.installed-mutate: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,mutate]'
	@touch $@

lint: venv
	$(VENV)/bin/ruff check rewrite rulesets tests bench examples
	$(VENV)/bin/ruff format --check rewrite rulesets tests bench examples

clean:
	rm -rf $(VENV) $(LATEST) out .pytest_cache
