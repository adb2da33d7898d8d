"""Record MCP trajectories: `python -m collectors.mcp --servers FILE --workers N --episodes M --out DIR`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.mcp import options

EXAMPLES = """examples:
  # 2 workers, 20 explorer episodes over the embedded servers (time, git, fetch, filesystem, memory);
  # the first run installs them from PyPI and npm into $AGENTWORLD_CACHE_DIR/mcp-servers
  python -m collectors.mcp --workers 2 --episodes 20 --out data/mcp

  # only the git and memory servers, more deliberately wrong calls
  python -m collectors.mcp --server git --server memory --invalid-rate 0.3 --episodes 10 --out data/mcp-gm

  # your own servers: a JSON or TOML catalogue {"servers": {"name": {"command": [...], ...}}}
  #   [servers.weather]
  #   command = ["/opt/weather/bin/weather-mcp", "--units", "metric"]
  #   call_timeout_s = 20
  python -m collectors.mcp --servers my-servers.toml --episodes 50 --out data/mcp-mine

  # the tasks' own tool calls (metadata.server names the catalogue entry)
  python -m collectors.mcp --policy scripted --episodes 15 --out data/mcp-scripted

  # an LLM agent behind an OpenAI-compatible server; it is shown each server's tool definitions
  python -m collectors.mcp --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --workers 4 --out data/mcp-llm

  # a world model in place of the servers (nothing installed or started): recorded as simulated;
  # the tools it is shown are each task's metadata.tools (the explorer needs them: without, it stops)
  python -m collectors.mcp --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --policy scripted --episodes 15 --out data/mcp-sim

Each task names its server in metadata.server. The embedded tasks cover the embedded servers; a
catalogue server no task names gets one exploration task of its own. Before the fleet starts, each
server is started once and its tools are listed (what the explorer and the LLM agent call); a
server that does not start is reported, its episodes are recorded as errors with the reason, and
the other servers' episodes go on (the run fails only when no server starts).
Servers run in bubblewrap with no network unless their entry says `network = true`. The embedded
tasks name paths as the servers see them there (/home/agent/workdir); under --backend local the
explorer learns the real ones from the servers' answers, and scripted paths do not resolve.
Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
