"""Record desktop (os) trajectories: `python -m collectors.desktop --displays N --episodes M --out DIR`.

The trajectories' domain is `os`, the AgentWorldBench name, which sandboxes.domains finds for the
package `desktop`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.desktop import options

EXAMPLES = """examples:
  # 2 local desktops (Xvfb + openbox + AT-SPI in bubblewrap), 20 explorer episodes over the
  # embedded calculator, editor and terminal tasks
  python -m collectors.desktop --displays 2 --episodes 20 --out data/os

  # the tasks' own actions (type 7+6 and Enter, save a file, ...) instead of the explorer
  python -m collectors.desktop --policy scripted --episodes 19 --out data/os-scripted

  # a remote Linux desktop over SSH: the host key must be in --known-hosts (unknown keys are refused
  # unless --accept-unknown-host, which records the key it sees)
  python -m collectors.desktop --ssh agent@10.0.0.5 --identity ~/.ssh/id_ed25519 \\
      --known-hosts ~/.ssh/known_hosts --episodes 50 --out data/os-remote

  # QEMU virtual machines booted from the project's own image (build it once with
  # `sudo infra/desktop-vm/build.sh`); KVM where /dev/kvm opens, software emulation otherwise
  python -m collectors.desktop --vm --displays 1 --episodes 5 --out data/os-vm

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.desktop --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --displays 4 --out data/os-llm

  # a world model in place of the desktop (no Xvfb, AT-SPI or VM needed): recorded as simulated
  python -m collectors.desktop --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/os-sim

Each task names the applications its reset starts in metadata.apps (calculator, editor, terminal).
Observations are the accessibility tree as text with a PNG screenshot attached; actions are
structured computer actions or pyautogui code, run inside the desktop's own display, never this
host's. Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
