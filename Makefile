# The two Quick start commands (see README.md): `make demo` and `make test`.
# Each sets up what it needs first (the demo: the virtualenv only); `.ci/run` calls `make test`.

.PHONY: setup setup-demo demo test lint unit clean models

setup:
	@scripts/setup.sh

# the demo needs only the virtualenv: no Debian packages, no Helm
setup-demo:
	@scripts/setup.sh demo

demo: setup-demo
	.venv/bin/atsss demo --plots build/demo

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The slowest tests are listed at the end of every run: the suite is kept under 20 minutes.
# Two workers (CI's two cores; TEST_WORKERS=0 runs in one process); most of the long tests wait
# on servers and timers. The tests that change the host's network (namespaces, veth pairs) are
# one group on one worker (--dist loadgroup), so that no two change it at once. A test that
# hangs fails after pytest's `timeout` (pyproject.toml) and takes its worker with it; no new
# worker is started, because loadgroup would give it the same test again.
# One OpenMP thread a process: the workers already fill the cores. scikit-learn's boosting runs
# a thread per core; two trainings side by side, each with two threads, took 472 s a test
# where one training on one thread takes 29 s.
TEST_WORKERS ?= 2
unit: setup
	OMP_NUM_THREADS=1 .venv/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart 0 \
		--durations=25

test: lint unit

# Reproduce the shipped models. They learn from the training scenarios (models/scenarios/, never
# scored by `bench loop`) and, for nr, the real 5G traces; the shipped scenarios are scored as
# data the models never saw (the card's out_of_distribution).
TRAIN_DATA := build/train/train-site.parquet build/train/train-walks.parquet \
	build/train/train-site-held.parquet
HOLDOUT := paper-static paper-static-lowlatency paper-dynamic paper-interruption lifi-blockage \
	many-cpes raca-static raca-driving raca-driving-b
# the traces the raca-* scenarios replay are kept out of the NR model's training
RACA := ../shared/datasets/raca5g-download
RACA_REPLAYED := $(RACA)/static/B_2020.02.13_13.57.29.csv $(RACA)/driving/B_2019.12.16_14.23.32.csv \
	$(RACA)/driving/B_2020.01.16_09.56.56.csv
RACA_TRAIN := $(filter-out $(RACA_REPLAYED),$(wildcard $(RACA)/static/*.csv $(RACA)/driving/*.csv))
HOLDOUT_DATA := $(addprefix build/holdout/,$(addsuffix .parquet,$(HOLDOUT)))

build/train/train-site-held.parquet: setup
	@mkdir -p build/train
	sed 's/^seed: 101/seed: 303/; s/^name: train-site/name: train-site-held/' \
		models/scenarios/train-site.yaml > build/train/train-site-held.yaml
	.venv/bin/atsss e2sim dataset --scenario build/train/train-site-held.yaml --utilisation 0.4 \
		--duration 45 --own-cells --out $@

build/train/%.parquet: setup
	@mkdir -p build/train
	.venv/bin/atsss e2sim dataset --scenario models/scenarios/$*.yaml --own-cells --out $@

build/holdout/paper-static-lowlatency.parquet: setup
	@mkdir -p build/holdout
	.venv/bin/atsss e2sim dataset --scenario paper-static-lowlatency --nr-pattern 1ms --own-cells --out $@

build/holdout/many-cpes.parquet: setup
	@mkdir -p build/holdout
	.venv/bin/atsss e2sim dataset --scenario many-cpes --duration 20 --own-cells --out $@

build/holdout/%.parquet: setup
	@mkdir -p build/holdout
	.venv/bin/atsss e2sim dataset --scenario $* --own-cells --out $@

models: setup $(TRAIN_DATA) $(HOLDOUT_DATA)
	.venv/bin/atsss train --access nr $(addprefix --data ,$(RACA_TRAIN)) \
		$(addprefix --data ,$(TRAIN_DATA)) $(addprefix --holdout ,$(HOLDOUT_DATA)) --out models/shipped
	.venv/bin/atsss train --access wifi $(addprefix --data ,$(TRAIN_DATA)) \
		$(addprefix --holdout ,$(HOLDOUT_DATA)) --out models/shipped
	.venv/bin/atsss train --access lifi $(addprefix --data ,$(TRAIN_DATA)) \
		$(addprefix --holdout ,$(HOLDOUT_DATA)) --out models/shipped

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
