# The two commands a newcomer needs (see README.md):
#   make demo   run the main job (make demo TLS=1: mTLS on every port, python -m kraft.demo --tls;
#               make demo AUTHORIZER=1: mTLS and ACLs, python -m kraft.demo --tls --authorizer)
#   make test   run the whole test suite
# Each creates or refreshes the project-local virtual environment .venv first.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-long lint lock bench-storage java jars clean

# Installs are reproducible: every package at the exact version and hash of requirements.lock
# (made from pyproject.toml's ranges by `make lock`), installed by the uv that the lock names.
LOCK := requirements.lock
UV   := $(VENV)/bin/uv
UV_VERSION := $(shell sed -n 's/^uv==\([^ ]*\).*/\1/p' $(LOCK))

$(STAMP): $(LOCK) pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(UV) --version 2>/dev/null | grep -q " $(UV_VERSION)$$" || $(PY) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(UV) pip sync --quiet --python $(PY) --require-hashes $(LOCK)
	$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# Refresh the lock after changing a range in pyproject.toml (tests/test_lock.py checks it).
lock:
	@test -x $(UV) || { test -x $(PY) || $(PYTHON) -m venv $(VENV); $(PY) -m pip install --quiet "uv==$(UV_VERSION)"; }
	$(UV) pip compile pyproject.toml --all-extras --generate-hashes --python-version 3.11 \
	  --quiet --custom-compile-command "make lock" -o $(LOCK)
	$(PY) -m tests.lockcheck --stamp $(LOCK)

# PySpark needs Java 17+. Say so in one line; as root, install Debian's JRE ourselves.
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "java not found: installing Debian's openjdk-17-jre-headless"; \
	    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else \
	    echo "kraft: Java 17+ is required for PySpark; install it with: sudo apt-get install openjdk-17-jre-headless" >&2; exit 1; \
	  fi; }

# Apache Kafka and Spark's Kafka source, at the versions of kraft/peer/pom.xml, into
# ~/.cache/kraft/jars (or $KRAFT_JARS_DIR) once: Maven fetches them (as root, Debian's maven is
# installed if it is missing: it is what copies the jars and their dependencies).
jars: $(STAMP) java
	@command -v mvn >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "mvn not found: installing Debian's maven (it fetches Kafka's jars)"; \
	    apt-get update -qq && apt-get install -y -qq maven >/dev/null; \
	  fi; }
	$(PY) -m kraft.cli peer kafka fetch

demo: $(STAMP) java
	$(PY) -m kraft.demo $(if $(or $(TLS),$(AUTHORIZER)),--tls) $(if $(AUTHORIZER),--authorizer)
	@echo "The kraft command is $(VENV)/bin/kraft: run 'source $(VENV)/bin/activate' to have it on your PATH (README: A cluster from the command line)."

# jars: the suite runs Kafka's own tools and Spark's Kafka source against kraft (tests -m java).
test: $(STAMP) java jars
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not long"

# The runs that `make test` leaves out to stay under 15 minutes: nemesis runs on real processes.
test-long: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup -m long

bench-storage: $(STAMP)
	$(VENV)/bin/kraft bench storage

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis
