# Mutation testing (docs/development.md): mutmut over plugins/module_utils and plugins/filter.
# Not part of `make test`: it is CPU heavy. MUTATION_FILES narrows it (file stems or path ends, e.g.
# `make mutation MUTATION_FILES="cpulist placement/power_model"`); MUTATION_ARGS passes options to the
# runner (--max-children N, --fresh to forget earlier results for those files).
.PHONY: mutation mutation-report

MUTATION_FILES ?=
MUTATION_ARGS  ?= --max-children 1

mutation: venv
	nice -n 19 $(BIN)/python scripts/mutation.py run $(MUTATION_FILES) $(MUTATION_ARGS)
	$(BIN)/python scripts/mutation.py report $(MUTATION_FILES)

mutation-report: venv
	$(BIN)/python scripts/mutation.py report --survivors $(MUTATION_FILES)

# The repository's shape (lines per area, largest files and functions, module_utils imports by family)
# for the working tree or REV: `make structure-report REV=v0.1.0`.
.PHONY: structure-report
REV ?=
structure-report: venv
	$(BIN)/python scripts/structure_report.py $(if $(REV),--rev $(REV))
