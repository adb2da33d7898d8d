"""Record SWE trajectories: `python -m collectors.swe --sandboxes N --episodes M --out DIR`;
`python -m collectors.swe prepare ...` downloads and builds the repositories (see its --help);
`--swebench FILE` runs SWE-bench instances of local repositories, `--export-swebench OUT` writes the
embedded tasks as such instances."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.swe import options, prepare

EXAMPLES = """examples:
  # 2 sandboxes, 10 explorer episodes on the embedded suite (24 PyPI projects x 2 seeded bugs);
  # repositories are downloaded and mutated on first use into $AGENTWORLD_CACHE_DIR/swe
  python -m collectors.swe --sandboxes 2 --episodes 10 --out data/swe

  # every task once with the scripted fix (run the tests, revert the bug, rerun): all succeed
  python -m collectors.swe --policy scripted --episodes 48 --out data/swe-scripted

  # prepare every repository ahead of time (what `make setup` runs), or check the whole suite
  python -m collectors.swe prepare
  python -m collectors.swe prepare --all --check

  # your own tasks: {"id", "instruction", "metadata": {"repo", "version", "seed", "test_command"}}
  # or {"metadata": {"template": "/path/to/a/git/repository", "test_command": [...]}}
  python -m collectors.swe --tasks my_tasks.jsonl --out data/swe-mine

  # SWE-bench instances of repositories on this machine (DIR/owner__name, or `repo` a path); the
  # scripted policy applies each gold patch (the oracle): every reward should be 1
  python -m collectors.swe --swebench instances.jsonl --swebench-repos DIR --policy scripted \\
      --out data/swe-bench

  # the embedded tasks as SWE-bench instances, their repositories as mirrors in out/swe-bench-repos
  python -m collectors.swe --export-swebench out/swe-bench.jsonl

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.swe --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --sandboxes 4 --out data/swe-llm

  # a world model in place of the repository and its tools (nothing prepared): recorded as simulated
  python -m collectors.swe --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 10 --out data/swe-sim

bash runs under bwrap (default when it works) or docker, without network; --backend local runs
it on this machine and only when asked. Rerunning the same command resumes: committed episodes are
skipped. One collector per --out. After each episode the task's verifier runs in the same sandbox:
the failing tests must pass and the passing ones still pass (outcome.reward 1.0, else 0.0).
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["prepare"]:
        return prepare.main(argv[1:])
    if any(arg == "--export-swebench" or arg.startswith("--export-swebench=") for arg in argv):
        return options.export_main(argv)
    return cli.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
