# Mutation testing (docs/development.md): mutmut over plugins/module_utils and plugins/filter.
# Not part of `make test`: it is CPU heavy. MUTATION_FILES narrows it (module stems, e.g.
# `make mutation MUTATION_FILES="_cpulist _quantity"`); MUTATION_ARGS passes options to the
# runner (--max-children N, --fresh to forget earlier results for those files).
.PHONY: mutation mutation-report

MUTATION_FILES ?=
MUTATION_ARGS  ?= --max-children 1

mutation: venv
	nice -n 19 $(BIN)/python scripts/mutation.py run $(MUTATION_FILES) $(MUTATION_ARGS)
	$(BIN)/python scripts/mutation.py report $(MUTATION_FILES)

mutation-report: venv
	$(BIN)/python scripts/mutation.py report --survivors $(MUTATION_FILES)
