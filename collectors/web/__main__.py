"""Record web trajectories: `python -m collectors.web --browsers N --episodes M --out DIR`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.web import options

EXAMPLES = """examples:
  # 2 browsers, 20 explorer episodes on the embedded shop and docs sites
  python -m collectors.web --browsers 2 --episodes 20 --out data/web

  # your own sites: one start URL per line; each may reach only its own origin unless allowed
  python -m collectors.web --start-urls urls.txt --allow-origin https://cdn.example.com \\
      --episodes 50 --out data/web-real

  # with a screenshot attached to every observation (large)
  python -m collectors.web --screenshots --episodes 5 --out data/web-shots

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.web --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --browsers 4 --out data/web-llm

  # a world model in place of the browser (no Chromium needed): recorded as simulated
  python -m collectors.web --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/web-sim

Browsers reach only each task's allowed origins (request interception); the embedded sites are
served on 127.0.0.1 by this process and reached as http://shop.agentworld.test/ and
http://docs.agentworld.test/. Rerunning the same command resumes: committed episodes are skipped.
SIGINT/SIGTERM stop cleanly. One collector per --out. A run whose every episode ended in an error
(every start URL unreachable, say) exits with code 1.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
