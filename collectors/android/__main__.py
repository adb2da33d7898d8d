"""Record Android trajectories: `python -m collectors.android --emulators N --avd NAME --out DIR`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.android import options

EXAMPLES = """examples:
  # what 64 emulators would need on this host (cores, memory, disk, ports, KVM); starts nothing
  python -m collectors.android --emulators 64 --avd pixel_7_api34 --dry-run --out data/android

  # 64 headless emulators of one AVD (booted read-only in staged batches, one Appium server per 8),
  # 640 explorer episodes over Settings, Contacts, Clock and the other stock apps
  python -m collectors.android --emulators 64 --avd pixel_7_api34 --episodes 640 --out data/android

  # an Appium server you run yourself (devices already attached to it)
  python -m collectors.android --emulators 2 --avd pixel_7_api34 --appium-url http://127.0.0.1:4723/ \\
      --episodes 20 --out data/android

  # no emulator: Appium's fake driver on the embedded app XML files (tests and demos)
  python -m collectors.android --fake-driver --emulators 2 --episodes 6 --out data/android-fake

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.android --emulators 8 --avd pixel_7_api34 --policy llm \\
      --llm-base-url http://localhost:8000/v1 --llm-model Qwen/Qwen3-8B --episodes 100 --out data/android-llm

  # a world model in place of the device (no emulator, SDK or Appium): the real-app tasks, simulated
  python -m collectors.android --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/android-sim

Emulators need KVM and the Android SDK (the emulator and platform-tools packages; ANDROID_SDK_ROOT or
--sdk). On a host without either the command prints the resource plan it would need and stops
(exit status 2). Appium comes from `python -m sandboxes.android install --uiautomator2`. Each episode
starts by clearing the task app's data (or reloading --snapshot). Observations are the compacted UI
tree with a PNG screenshot; actions are AndroidWorld's JSON. Rerunning the same command resumes:
committed episodes are skipped. One collector per --out.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
