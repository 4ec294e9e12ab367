# Molecule scenarios (extensions/molecule, docs/site.md).
#   make molecule-lab    converge site.yml into the running lab (`make lab`), idempotence, verify
#   make molecule-kind   the kind scenario (needs Docker and kind; not run in CI here)
# `make integration` runs the lab scenario through tests/integration/test_site.py.
.PHONY: molecule-lab molecule-kind

molecule-lab: venv
	$(BIN)/molecule test -s lab

molecule-kind: venv
	$(BIN)/molecule test -s kind
