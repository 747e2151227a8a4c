# The two Quick start commands (see README.md): `make demo` and `make test`.
# Both set everything up first; `.ci/run` calls `make test`.

.PHONY: setup demo test lint unit clean models

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/atsss demo --plots build/demo

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

unit: setup
	.venv/bin/pytest

test: lint unit

# Reproduce the shipped models: nr from the real 5G traces, wifi and lifi from simulator data.
SIM_DATA := build/data/many-cpes.parquet build/data/paper-dynamic.parquet \
	build/data/lifi-blockage.parquet build/data/paper-interruption.parquet

build/data/many-cpes.parquet: setup
	@mkdir -p build/data
	.venv/bin/atsss e2sim dataset --scenario many-cpes --duration 20 --out $@

build/data/%.parquet: setup
	@mkdir -p build/data
	.venv/bin/atsss e2sim dataset --scenario $* --out $@

models: setup $(SIM_DATA)
	.venv/bin/atsss train --access nr --data ../shared/datasets/raca5g-download --out models/shipped
	.venv/bin/atsss train --access wifi $(addprefix --data ,$(SIM_DATA)) --out models/shipped
	.venv/bin/atsss train --access lifi $(addprefix --data ,$(SIM_DATA)) --out models/shipped

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
