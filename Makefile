# poweraware.k8s developer entry points. See README.md and docs/development.md.
#   make lab     bring up the local lab cluster (the main job)
#   make test    everything CI runs: lint, sanity, unit, integration
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV      ?= .venv
BIN       := $(VENV)/bin
DEPS      := $(VENV)/.deps-installed
SYSDEPS   := .cache/.system-deps-installed
COLL_LINK := .cache/collections/ansible_collections/poweraware/k8s
SHARED_DATA ?= $(abspath ../shared/data)
export SHARED_DATA
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

PYTEST_ARGS ?=

.PHONY: help venv collection system-deps test lint sanity unit oldest unit-oldest sanity-oldest integration bench \
  live-bench scale-bench pod-power-bench lifecycle sample-inventory clean

help:
	@echo "make lab        start the local lab cluster (builds binaries once, cached)"
	@echo "make lab-down   stop the lab and remove its state (make lab-status: processes, health, nodes)"
	@echo "make test       run lint, sanity, unit and integration tests (what CI runs)"
	@echo "make lint | sanity | unit | integration | bench"
	@echo "make oldest     the unit and sanity tiers on the oldest ansible-core supported (requirements-oldest.txt)"
	@echo "make live-bench the live placement replay on a lab of 8 workers (about an hour; docs/placement-benchmark.md)"
	@echo "make pod-power-bench  pod power's latencies on the running lab (200 pods, agent restarts; docs/pod-power.md)"
	@echo "make scale-bench site.yml's cost per node and per object on labs of 4 to 32 hosts (docs/site.md)"
	@echo "make lifecycle  on a fresh lab: upgrade from the previous release, uninstall; converge, uninstall (docs/site.md)"
	@echo "make sample-inventory  write inventory/sample's role files from the roles' argument specs"

# --- set-up -------------------------------------------------------------------------------
$(BIN)/python:
	@python=$$(scripts/find-python.sh) && echo "creating $(VENV) with $$python" && "$$python" -m venv $(VENV)

# uv installs the pinned requirements into the venv in about 25 s where pip takes over 3 minutes
# (the ansible package alone is tens of thousands of files); bytecode is compiled at install, as
# pip does, so no playbook run compiles ansible again (CI sets PYTHONDONTWRITEBYTECODE).
$(DEPS): $(BIN)/python requirements.txt requirements-dev.txt
	$(BIN)/pip install --quiet uv==0.13.9
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -r requirements.txt -r requirements-dev.txt
	@touch $@

$(COLL_LINK):
	@mkdir -p $(dir $@)
	@ln -sfn ../../../.. $@

# The collection is found by Ansible through ansible.cfg (collections_path = .cache/collections).
collection: $(COLL_LINK)

venv: $(DEPS) collection

# The oldest ansible-core meta/runtime.yml accepts, with the `ansible` release built for it (and so
# its kubernetes.core and community.crypto): the unit and sanity tiers run on it too (make oldest).
# Everything else is requirements.txt and requirements-dev.txt, as in .venv.
OLDEST_VENV := .venv-oldest
OLDEST_BIN  := $(OLDEST_VENV)/bin
OLDEST_DEPS := $(OLDEST_VENV)/.deps-installed

$(OLDEST_BIN)/python:
	@python=$$(scripts/find-python.sh) && echo "creating $(OLDEST_VENV) with $$python" && "$$python" -m venv $(OLDEST_VENV)

$(OLDEST_DEPS): $(OLDEST_BIN)/python $(DEPS) requirements.txt requirements-dev.txt requirements-oldest.txt
	$(BIN)/uv pip install --python $(OLDEST_BIN)/python --quiet --compile-bytecode \
	  -r requirements.txt -r requirements-dev.txt --override requirements-oldest.txt
	@touch $@

$(SYSDEPS): system-packages.txt
	scripts/install-system-deps.sh
	@mkdir -p $(dir $@) && touch $@

system-deps: $(SYSDEPS)

# --- checks -------------------------------------------------------------------------------
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/yamllint --strict .
	$(BIN)/python scripts/check_role_specs.py
	$(BIN)/ansible-lint --profile production
	$(BIN)/antsibull-changelog lint

sanity: venv system-deps
	$(BIN)/python scripts/ansible_test_pip_bootstrap.py .cache/pip-bootstrap
	$(BIN)/python scripts/stage_collection.py .cache/sanity
	cd .cache/sanity/ansible_collections/poweraware/k8s && \
	  $(CURDIR)/$(BIN)/ansible-test sanity --venv --python 3.12 --color no

# The unit and sanity tiers on the oldest ansible-core we support (requirements-oldest.txt).
oldest: unit-oldest sanity-oldest

# The unit tests that reach ansible-core or the ansible bundle's collections (--ansible-core-only,
# tests/conftest.py): the rest run the same code on the same Python in both tiers.
unit-oldest: $(OLDEST_DEPS) collection system-deps
	$(OLDEST_BIN)/python -m pytest tests/unit --ansible-core-only $(PYTEST_ARGS)

sanity-oldest: $(OLDEST_DEPS) collection system-deps
	$(OLDEST_BIN)/python scripts/ansible_test_pip_bootstrap.py .cache/pip-bootstrap
	$(OLDEST_BIN)/python scripts/stage_collection.py .cache/sanity-oldest
	cd .cache/sanity-oldest/ansible_collections/poweraware/k8s && \
	  $(CURDIR)/$(OLDEST_BIN)/ansible-test sanity --venv --python 3.12 --color no

# system-deps: the lab's node kernels need libfuse3 and the rules tests promtool (they fail, not skip,
# without them).
unit: venv system-deps
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

# The lab's tests and the standalone ones (own hosts, never the lab) in two pytests side by side.
integration: venv system-deps
	$(BIN)/python scripts/integration.py $(PYTEST_ARGS)

# lint, sanity and unit are independent and mostly single-threaded: side by side (each target's
# output printed whole when it ends), behind the integration tests: after the standalone tests, at
# the lowest CPU priority, once the lab tests' CPU-bound start is over (scripts/integration.py).
CHECKS = $(MAKE) --no-print-directory -j3 --output-sync=target lint sanity unit unit-oldest sanity-oldest
test: venv system-deps
	$(BIN)/python scripts/integration.py --checks "$(CHECKS)" $(PYTEST_ARGS)

# The offline benchmarks; the live replay needs a lab of its own shape (live-bench).
bench: venv
	@for b in $(sort $(filter-out benchmarks/live_placement.py benchmarks/site_scale.py benchmarks/pod_power_latency.py,$(wildcard benchmarks/[a-z]*.py))); do \
	  echo "== $$b"; $(BIN)/python $$b --data "$(SHARED_DATA)"; done

# A lab of eight workers of four server models (the running lab is replaced), site.yml, the replay.
live-bench: venv
	$(BIN)/python -m lab down
	$(BIN)/python -m lab up --workers 8 --server-types 4
	$(BIN)/python benchmarks/live_placement.py --data "$(SHARED_DATA)" --prepare

# Per-pod power profiles on the running lab (make lab): 200 pods one at a time, agent restarts (its
# --reboot hung after the reboot once: not yet in the target); latencies as in docs/pod-power.md.
pod-power-bench: venv
	$(BIN)/python benchmarks/pod_power_latency.py --pods 200 --restarts 10

# What site.yml costs per node and per object, on labs of 3, 7, 15 and 31 workers (the running lab is
# replaced; about 25 minutes; docs/site.md, "Cost by cluster size").
scale-bench: venv system-deps
	$(BIN)/python benchmarks/site_scale.py --data "$(SHARED_DATA)"

# The lifecycle tests on a fresh lab of their own (a running lab is taken down first; about 30 minutes;
# not in make test, for its time): the upgrade from the previous release's tag; then, on a fresh
# converge, each role's absent alone, the converge through an air-gapped site's mirror, and the
# uninstall, each compared with the lab before anything was deployed (docs/site.md, "Uninstall",
# "Upgrade" and "Air-gapped sites").
lifecycle: venv system-deps
	$(BIN)/python -m lab down
	$(BIN)/python -m lab build --previous
	$(BIN)/python -m pytest tests/integration -m lifecycle $(PYTEST_ARGS)

# The sample inventory's role files, from the roles' meta/argument_specs.yml (the unit tier fails
# when they are stale: tests/unit/docs/test_sample_inventory.py).
sample-inventory: venv
	$(BIN)/python scripts/sample_inventory.py

clean:
	rm -rf .cache/sanity .cache/sanity-oldest tests/output .pytest_cache .ruff_cache

# Capability-specific targets (lab, ...) live in mk/*.mk.
-include $(sort $(wildcard mk/*.mk))
