# The two Quick start commands (see README.md): `make demo` and `make test`.
# Both set everything up first; `.ci/run` calls `make test`.

.PHONY: setup demo test lint unit clean

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

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
