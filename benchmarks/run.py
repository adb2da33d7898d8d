"""`make bench`: run the benchmarks and write benchmarks/results/<name>.json and .md.

Time figures are ratios against baselines measured in the same run (our machines are noisy).
Usage: python -m benchmarks.run [terminal|fleet|variety|corpus ...]   (default: all)
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable

from benchmarks.report import entry, render

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def _terminal() -> dict:
    from benchmarks import terminal_latency

    return {
        "step": terminal_latency.step_latency(),
        "reset_docker": terminal_latency.reset_latency("docker"),
        "reset_bwrap": terminal_latency.reset_latency("bwrap"),
    }


def _corpus() -> dict:
    from benchmarks import corpus_throughput

    return corpus_throughput.corpus_benchmark(int(os.environ.get("CORPUS_BENCH_N", "20000")))


def _demo_fidelity() -> dict:
    """The honest fidelity numbers of the model `make demo` trained (run `make demo` first)."""
    path = os.path.join(os.environ.get("DEMO_OUT", "out/demo"), "fidelity", "report.json")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: run `make demo` first")
    with open(path) as f:
        report = json.load(f)
    return {
        "source": path,
        "meta": report["meta"],
        "noise_floor": report["noise_floor"],
        "systems": report["systems"],
    }


BENCHES: dict[str, Callable[[], dict]] = {
    "terminal": _terminal,
    "fleet": entry("benchmarks.fleet:fleet_scaling"),
    "variety": entry("benchmarks.fleet:variety"),
    "corpus": _corpus,
    "redaction": entry("benchmarks.redaction:redaction_benchmark"),
    "training": entry("benchmarks.training_throughput:run"),
    "simulator": entry("benchmarks.simulator_latency:simulator_vs_real_latency"),
    "fidelity_concurrency": entry("benchmarks.fidelity_concurrency:fidelity_throughput"),
    "demo_fidelity": _demo_fidelity,
    "web": entry("benchmarks.web_latency:web_latency"),
    "web_fleet": entry("benchmarks.web_fleet:web_fleet"),
    "search": entry("benchmarks.search_latency:search_latency"),
    "swe_latency": entry("benchmarks.swe_latency:swe_latency"),
    "mcp_latency": entry("benchmarks.mcp_latency:mcp_latency"),
    "desktop_ssh": entry("benchmarks.desktop_ssh:desktop_ssh"),
    "desktop_latency": entry("benchmarks.desktop_latency:desktop_latency"),
    "desktop_vm": entry("benchmarks.desktop_vm:desktop_vm"),
    "android_appium": entry("benchmarks.android_appium:android_appium"),
    "android_fleet": entry("benchmarks.android_fleet:android_fleet"),
    "collector_storage": entry("benchmarks.collector_storage:collector_storage"),
    "corpus_runners": entry("benchmarks.corpus_runners:corpus_runners"),
    "world_model": entry("benchmarks.world_model:run"),
    "synthesis_throughput": entry("benchmarks.synthesis_throughput:run"),
    "world_model_rl": entry("benchmarks.world_model_rl:run"),
    "sim_trained_agent": entry("benchmarks.sim_trained_agent:run"),
    "task_rewards": entry("benchmarks.task_rewards:run"),
    "openenv_serve": entry("benchmarks.openenv_serve:run"),
    "importers": entry("benchmarks.importers:run"),
    "decontamination": entry("benchmarks.decontamination:run"),
    "gguf_generation": entry("benchmarks.gguf_generation:run"),
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {list(BENCHES)}", file=sys.stderr)
        return 2
    os.makedirs(RESULTS, exist_ok=True)
    for name in names:
        print(f"== {name}", flush=True)
        t0 = time.time()
        result = BENCHES[name]()
        result["_meta"] = {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "duration_s": round(time.time() - t0, 1),
        }
        with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=2)
        md = render(name, result)
        with open(os.path.join(RESULTS, f"{name}.md"), "w") as f:
            f.write(md)
        print(md, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
