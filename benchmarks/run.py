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

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def _terminal() -> dict:
    from benchmarks import terminal_latency

    return {
        "step": terminal_latency.step_latency(),
        "reset_docker": terminal_latency.reset_latency("docker"),
        "reset_bwrap": terminal_latency.reset_latency("bwrap"),
    }


def _fleet() -> dict:
    from benchmarks import fleet

    return fleet.fleet_scaling()


def _variety() -> dict:
    from benchmarks import fleet

    return fleet.variety()


def _corpus() -> dict:
    from benchmarks import corpus_throughput

    return corpus_throughput.corpus_benchmark(int(os.environ.get("CORPUS_BENCH_N", "20000")))


def _redaction() -> dict:
    from benchmarks import redaction

    return redaction.redaction_benchmark()


def _training() -> dict:
    from benchmarks import training_throughput

    return training_throughput.run()


def _simulator() -> dict:
    from benchmarks import simulator_latency

    return simulator_latency.simulator_vs_real_latency()


def _fidelity_concurrency() -> dict:
    from benchmarks import fidelity_concurrency

    return fidelity_concurrency.fidelity_throughput()


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


def _web() -> dict:
    from benchmarks import web_latency

    return web_latency.web_latency()


def _web_fleet() -> dict:
    from benchmarks import web_fleet

    return web_fleet.web_fleet()


def _search() -> dict:
    from benchmarks import search_latency

    return search_latency.search_latency()


def _swe() -> dict:
    from benchmarks import swe_latency

    return swe_latency.swe_latency()


def _mcp_latency() -> dict:
    from benchmarks import mcp_latency

    return mcp_latency.mcp_latency()


BENCHES: dict[str, Callable[[], dict]] = {
    "terminal": _terminal,
    "fleet": _fleet,
    "variety": _variety,
    "corpus": _corpus,
    "redaction": _redaction,
    "training": _training,
    "simulator": _simulator,
    "fidelity_concurrency": _fidelity_concurrency,
    "demo_fidelity": _demo_fidelity,
    "web": _web,
    "web_fleet": _web_fleet,
    "search": _search,
    "swe_latency": _swe,
    "mcp_latency": _mcp_latency,
    "desktop_ssh": lambda: __import__("benchmarks.desktop_ssh").desktop_ssh.desktop_ssh(),
    "desktop_latency": lambda: __import__("benchmarks.desktop_latency").desktop_latency.desktop_latency(),
    "desktop_vm": lambda: __import__("benchmarks.desktop_vm").desktop_vm.desktop_vm(),
    "android_appium": lambda: __import__("benchmarks.android_appium").android_appium.android_appium(),
    "android_fleet": lambda: __import__("benchmarks.android_fleet").android_fleet.android_fleet(),
    "collector_storage": lambda: __import__(
        "benchmarks.collector_storage", fromlist=["_"]
    ).collector_storage(),
    "corpus_runners": lambda: __import__("benchmarks.corpus_runners").corpus_runners.corpus_runners(),
    "world_model": lambda: __import__("benchmarks.world_model").world_model.run(),
    "synthesis_throughput": lambda: __import__("benchmarks.synthesis_throughput", fromlist=["_"]).run(),
    "world_model_rl": lambda: __import__("benchmarks.world_model_rl").world_model_rl.run(),
    "task_rewards": lambda: __import__("benchmarks.task_rewards").task_rewards.run(),
    "openenv_serve": lambda: __import__("benchmarks.openenv_serve").openenv_serve.run(),
    "importers": lambda: __import__("benchmarks.importers").importers.run(),
    "decontamination": lambda: __import__("benchmarks.decontamination").decontamination.run(),
    "gguf_generation": lambda: __import__("benchmarks.gguf_generation").gguf_generation.run(),
}


def _markdown(name: str, result: dict) -> str:
    from benchmarks.report import render

    return render(name, result)


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
        md = _markdown(name, result)
        with open(os.path.join(RESULTS, f"{name}.md"), "w") as f:
            f.write(md)
        print(md, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
