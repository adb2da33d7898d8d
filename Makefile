# One command each for a newcomer on a fresh Debian 12 machine: `make demo`, `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= out/demo

.PHONY: setup demo test bench lint

setup:
	bash infra/setup-host.sh

demo: setup
	$(PY) -m collectors.terminal --sandboxes 4 --episodes 24 --max-steps 12 --out $(DEMO_OUT)/raw
	$(PY) -m schemas stats $(DEMO_OUT)/raw
	$(PY) -m beam_pipelines.build_corpus --input $(DEMO_OUT)/raw --output $(DEMO_OUT)/corpus \
		--seq-len 2048 --split-ratios 0.8,0.1,0.1

test: setup
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench: setup
	$(PY) -m benchmarks.run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
