"""Record terminal trajectories: `python -m collectors.terminal --sandboxes N --episodes M --out DIR`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.terminal import options

EXAMPLES = """examples:
  # 4 isolated containers, 20 explorer episodes over the embedded task suite
  python -m collectors.terminal --sandboxes 4 --episodes 20 --out data/terminal

  # play the scripted solutions of your own tasks under bubblewrap
  python -m collectors.terminal --tasks my_tasks.jsonl --policy scripted --backend bwrap --out data/mine

  # replay a recorded dataset's actions in fresh sandboxes (sim-vs-real comparison)
  python -m collectors.terminal --policy replay --replay-from data/terminal --out data/replayed

  # Harbor task folders (Terminal-Bench 2's format): oracle-validated, then the policy, rewarded
  python -m collectors.terminal --harbor-tasks collectors/terminal/harbor_tasks --map-base-images \\
      --policy explorer --episodes 2 --out data/harbor

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.terminal --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --sandboxes 8 --out data/llm

  # a world model in place of the shell (no docker, bwrap or tmux needed): recorded as simulated
  python -m collectors.terminal --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/terminal-sim

  # real containers; an episode whose container dies goes on on the world model, marked turn by turn
  python -m collectors.terminal --fallback-simulator http://localhost:8000/v1 --episodes 20 --out data/t

Rerunning the same command resumes: committed episodes are skipped, the rest recorded.
SIGINT/SIGTERM stop cleanly (exit 130/143); in-flight episodes are kept with outcome "aborted",
episodes stopped before their first step stay pending, and no container or tmux server remains.
One collector per --out: a second one on the same directory exits with code 2 naming the first.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
