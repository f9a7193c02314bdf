# The two commands of the README: `make demo` and `make test`. Everything else is a building block.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
LAGGARD := $(VENV)/bin/laggard
STAMP := $(VENV)/.installed
KAFKA_LIB := .laggard/kafka-lib
KAFKA_POM := broker/pom.xml
YARN_LIB := .laggard/yarn-lib
YARN_POM := yarn/pom.xml
# `make test` runs its own broker on free ports in its own data directory, beside any broker already running.
TEST_DATA_DIR := .laggard/test-broker
TRACES ?= ../shared/traces

.PHONY: venv demo test unit integration operations lint manifests typecheck kafka-jars yarn-jars kafka-up kafka-down bench lock clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

kafka-jars: $(KAFKA_LIB)/.fetched

$(KAFKA_LIB)/.fetched: $(KAFKA_POM)
	rm -rf $(KAFKA_LIB) && mkdir -p $(KAFKA_LIB)
	mvn -B -q -f $(KAFKA_POM) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
	    -DincludeScope=runtime -DoutputDirectory=$(abspath $(KAFKA_LIB))
	touch $@

# A real YARN ResourceManager and NodeManagers for the operations tier (yarn/YarnLocal.java runs them).
yarn-jars: $(YARN_LIB)/.fetched

$(YARN_LIB)/.fetched: $(YARN_POM)
	rm -rf $(YARN_LIB) && mkdir -p $(YARN_LIB)
	mvn -B -q -f $(YARN_POM) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
	    -DincludeScope=runtime -DoutputDirectory=$(abspath $(YARN_LIB))
	touch $@

demo: venv
	$(LAGGARD) demo

kafka-up: venv kafka-jars
	$(LAGGARD) kafka start

kafka-down: venv
	$(LAGGARD) kafka stop

lint: venv manifests
	$(VENV)/bin/ruff check --no-cache laggard streams producers adapters tests
	$(VENV)/bin/mypy streams

# The deployment files against the real schemas, offline: kubernetes-validate ships the Kubernetes API schemas,
# check-jsonschema ships the compose-spec schema (kustomization.yaml has no published schema; a unit test checks
# that the files it names exist).
manifests: venv
	$(VENV)/bin/kubernetes-validate --strict --quiet $(filter-out k8s/kustomization.yaml,$(wildcard k8s/*.yaml k8s/demo/*.yaml))
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml

unit: venv
	LAGGARD_TRACES_DIR=$(TRACES) $(VENV)/bin/pytest -q tests/unit streams producers adapters laggard

# Starts a broker on free ports, runs the integration tier against it, and stops it whatever happened.
integration: venv kafka-jars
	@set -euo pipefail; \
	ports=$$($(PY) -m laggard.kafka_local free-ports 2); \
	port=$${ports% *}; cport=$${ports#* }; \
	$(LAGGARD) kafka start --port $$port --controller-port $$cport --data-dir $(TEST_DATA_DIR); \
	trap '$(LAGGARD) kafka stop --port '"$$port"' --data-dir $(TEST_DATA_DIR)' EXIT; \
	LAGGARD_BOOTSTRAP_SERVERS=127.0.0.1:$$port LAGGARD_TRACES_DIR=$(TRACES) LAGGARD_REQUIRE_BROKER=1 \
	    $(VENV)/bin/pytest -q -p no:cacheprovider -o addopts="-ra --strict-markers --import-mode=importlib" --durations=8 \
	    --ignore=tests/integration/operations tests/integration

# The heavy operational tier (README "Operating laggard"): each test starts and restarts brokers of its own.
operations: venv kafka-jars yarn-jars
	LAGGARD_TRACES_DIR=$(TRACES) $(VENV)/bin/pytest -q -p no:cacheprovider \
	    -o addopts="-ra --strict-markers --import-mode=importlib" --durations=8 tests/integration/operations

test: lint unit integration operations

bench: venv kafka-jars
	LAGGARD_TRACES_DIR=$(TRACES) $(LAGGARD) bench

# Re-pin every package after a change to pyproject.toml's dependencies.
lock:
	rm -rf .lock-venv && python3 -m venv .lock-venv && .lock-venv/bin/pip install -q --upgrade pip
	.lock-venv/bin/pip install -q -e '.[dev]'
	( head -3 requirements.lock; .lock-venv/bin/pip freeze --exclude-editable | grep -v '^laggard' ) > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

clean:
	rm -rf $(VENV) .laggard laggard-demo
