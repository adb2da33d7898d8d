"""python -m training.fidelity: measure a world model against the real sandbox, turn by turn."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

from sandboxes.domains import domain_spec
from schemas import read_trajectories
from schemas.records import Trajectory
from schemas.storage import dataset_files
from training.backends import make_backend
from training.backends.base import WorldModelBackend
from training.bases import BASE_FILE
from training.export.to_gguf import recorded_base as gguf_base
from training.fidelity.cache import CachedBackend, ReplyCache
from training.fidelity.closed_loop import closed_loop
from training.fidelity.comparison import comparison_table, rate_table, summary_lines
from training.fidelity.decoding import add_decoding_args, decoding_config
from training.fidelity.held_out import held_out_ids
from training.fidelity.likelihood import LikelihoodPass, likelihood_lines, likelihood_table
from training.fidelity.metrics import aggregate
from training.fidelity.noise_floor import NoiseFloor, build_noise_floor, default_workers
from training.fidelity.replay import REPLAYABLE_DOMAINS, ReplayStore, replay_counts, run_replays
from training.fidelity.report import MODEL_SERIES, NO_GENERATION, build_report, headline_table
from training.fidelity.report_html import write_all
from training.fidelity.teacher_forced import EvalSettings, judge_rows, repeat_previous, teacher_forced
from training.models import SHAPES, resolve_checkpoint
from training.rewards.public_judge import JudgePromptError

EXAMPLES = """examples:
  # a checkpoint on this machine, the demo's recorded trajectories, 2 real replays each; the base it
  # was fine-tuned from (its base.json) is compared with it
  python -m training.fidelity --real out/demo/raw --model out/demo/model --out out/demo/fidelity
  # a fine-tuned model against its base and a second run, with 95% intervals for each difference
  python -m training.fidelity --real data/heldout --model runs/sft --base smollm2-135m-instruct \\
      --compare lora=runs/sft-lora --replays 0 --out rep-compare
  # a model served by vLLM (or any OpenAI-compatible server), with an LLM judge, no closed loop
  python -m training.fidelity --real data/terminal --model http://127.0.0.1:8000/v1 --model-name sft \\
      --base http://127.0.0.1:8002/v1 --judge-url http://127.0.0.1:8001/v1 --no-closed-loop --out rep
  # MCP and SWE recordings: replays start fresh servers / workspaces; JSON results compared by structure
  python -m training.fidelity --real data/mcp --model http://127.0.0.1:8000/v1 --replays 2 --out rep-mcp
  # a quick look: 3 trajectories, 4 turns each, docker sandboxes for the noise floor, no base
  python -m training.fidelity --real data/terminal --model qwen3-tiny --limit-trajectories 3 \\
      --max-turns 4 --backend docker --base none --out /tmp/fid
A rerun with the same --out reuses cached replies and finished replays (safe after a kill).
Task level (the same policy on real and simulated sandboxes): python -m training.fidelity agents --help"""
RESERVED_NAMES = ("model", "base", "untrained", "repeat_previous", "real_vs_real")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.fidelity",
        description="Sim-vs-real fidelity: teacher-forced and closed-loop predictions scored against real "
        "trajectories, with the real-vs-real noise floor; the model's base, more models (--compare) and the "
        "repeat-previous baseline on the same turns, each difference with a paired bootstrap 95% interval; "
        "as HTML, Markdown and JSON.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--real", required=True, help="dataset of real trajectories (directory, file or glob)")
    p.add_argument(
        "--model",
        required=True,
        help="checkpoint dir, GGUF file (generated with llama.cpp; training.export gguf writes one), named "
        "shape (qwen3-tiny) or http(s) URL",
    )
    p.add_argument("--model-name", help="model name at an OpenAI-compatible URL (default: the first served)")
    p.add_argument("--out", required=True, type=Path, help="report directory (also holds the caches)")
    p.add_argument(
        "--replays", type=int, default=2, help="real replays per trajectory; 0 skips the noise floor"
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=("auto", *domain_spec("terminal").replay_backends),
        help="sandbox backend of terminal replays (auto: each trajectory's own, with its recorded image and "
        "limits); web, search, MCP and SWE replays run in a fresh browser, search sandbox, server or "
        "workspace like the recorded one",
    )
    p.add_argument(
        "--replay-attempts",
        type=int,
        default=3,
        help="fresh sandboxes a failing replay gets before it counts as failed",
    )
    p.add_argument(
        "--sandboxes", type=int, default=default_workers(), help="real sandboxes replaying at once"
    )
    p.add_argument("--concurrency", type=int, default=16, help="model requests in flight")
    p.add_argument(
        "--max-turns",
        type=int,
        help="generate for at most this many turns per trajectory (likelihood scores every turn); 0: no "
        "generation, the likelihood pass alone",
    )
    p.add_argument(
        "--limit-trajectories",
        type=int,
        help="use only the first N trajectories with steps of each domain (reading stops there); with "
        "--held-out, for generation only: likelihood scores every held-out trajectory",
    )
    p.add_argument(
        "--likelihood-trajectories",
        type=int,
        metavar="N",
        help="the likelihood pass scores every turn of only the first N trajectories of each domain "
        "(default: every trajectory it would score; a budget, said in the report)",
    )
    p.add_argument(
        "--held-out",
        metavar="CORPUS",
        help="score only the trajectories this corpus held out of training (its test split)",
    )
    p.add_argument(
        "--base",
        default="auto",
        help="the model --model was trained from, compared with it: a spec like --model's, 'none', or "
        "'auto' (the base a training run recorded in its base.json; else its architecture with random "
        "weights, named 'untrained')",
    )
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="one more model, a spec like --model's, scored teacher-forced on the same turns and named NAME "
        "in the report (repeatable)",
    )
    p.add_argument("--judge-url", help="OpenAI-compatible endpoint of an LLM judge (optional)")
    p.add_argument("--judge-model", help="model name at --judge-url (default: the first served)")
    p.add_argument(
        "--judge-prompts-dir",
        help="judge the public AgentWorldBench way with its prompts (DIR/<domain>/judge_system_prompt.txt, "
        "the public Qwen-AgentWorld repository's prompts/ folder); default: our own judge prompt",
    )
    p.add_argument("--no-closed-loop", action="store_true", help="skip the closed-loop evaluation")
    p.add_argument(
        "--no-likelihood",
        action="store_true",
        help="skip the likelihood of the real observations (every turn, every system with weights, "
        "forward passes only)",
    )
    p.add_argument("--max-new-tokens", type=int, default=1024)
    add_decoding_args(p)
    p.add_argument("--context-chars", type=int, default=32_000, help="prompt budget; oldest turns go first")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.replays < 0 or args.concurrency < 1 or args.replay_attempts < 1:
        p.error("--replays must be >= 0, --concurrency and --replay-attempts >= 1")
    if args.limit_trajectories is not None and args.limit_trajectories < 1:
        p.error("--limit-trajectories must be >= 1")
    args.compare = dict(parse_compare(p, args.compare))
    return args


def parse_compare(p: argparse.ArgumentParser, values: list[str]) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for value in values:
        name, _, spec = value.partition("=")
        if not NAME_RE.fullmatch(name) or not spec:
            p.error(f"--compare {value!r}: give NAME=SPEC, e.g. --compare lora=runs/sft-lora")
        if name in RESERVED_NAMES or name in seen:
            p.error(
                f"--compare {name}: the name is taken ({', '.join(RESERVED_NAMES)} and earlier --compare)"
            )
        seen.add(name)
        yield name, spec


def open_backend(spec: str, name: str | None) -> WorldModelBackend:
    opts = {"model": name} if name and spec.startswith(("http://", "https://")) else {}
    return make_backend(spec, **opts)


@dataclass
class Contender:
    """A model scored teacher-forced beside --model: the base or a --compare entry."""

    name: str
    role: str  # comparison.ROLES
    spec: str
    # The backend and, where it would describe itself like another one, its own cache description.
    open: Callable[[], tuple[WorldModelBackend, dict | None]]


def recorded_base(model: str) -> dict | None:
    """The base.json a training run writes into its checkpoints: {"base": SPEC, "resolved": DIR}."""
    if model.endswith(".gguf"):  # an exported checkpoint carries its base.json (training.export)
        return gguf_base(model)
    path = os.path.join(resolve_checkpoint(model), BASE_FILE)
    if not os.path.isfile(path):
        return None
    try:
        recorded = json.loads(Path(path).read_text())
        if not isinstance(recorded.get("base"), str):
            raise ValueError('no "base" string')
    except (ValueError, AttributeError) as exc:
        raise ValueError(f"{path} is unreadable ({exc}): fix it, or pass --base SPEC or --base none") from exc
    return {**recorded, "path": path}


def random_init(checkpoint: str) -> tuple[WorldModelBackend, dict]:
    from transformers import AutoConfig, AutoModelForCausalLM

    from training.backends.transformers_local import TransformersBackend
    from training.tokenizer import load_tokenizer

    config = AutoConfig.from_pretrained(checkpoint, local_files_only=True)
    backend = TransformersBackend(AutoModelForCausalLM.from_config(config), load_tokenizer(checkpoint))
    # The same architecture would describe itself as the checkpoint: keep the caches apart.
    return backend, {**backend.describe(), "model": checkpoint, "weights": "random-init"}


def base_contender(spec: str, model: str) -> tuple[Contender | None, dict]:
    """(the base, what the report says about it). 'auto' takes the base a training run recorded, else
    a checkpoint's architecture with random weights; a named shape is already untrained, and a URL or
    vllm: spec has neither a base.json nor an architecture to copy."""
    if spec == "none":
        return None, {"skipped": "disabled with --base none"}
    if spec != "auto":
        return Contender("base", "base", spec, lambda: (open_backend(spec, None), None)), {"spec": spec}
    recorded = recorded_base(model)
    if recorded is not None:
        resolved = recorded.get("resolved")
        use = resolved if isinstance(resolved, str) and os.path.exists(resolved) else recorded["base"]
        info = {"spec": use, "recorded_in": recorded["path"], "recorded": recorded["base"]}
        return Contender("base", "base", use, lambda: (open_backend(use, None), None)), info
    checkpoint = resolve_checkpoint(model)
    if os.path.isfile(os.path.join(checkpoint, "config.json")):
        info = {"spec": checkpoint, "weights": "random-init", "why": "the checkpoint records no base.json"}
        return Contender("untrained", "base", checkpoint, lambda: random_init(checkpoint)), info
    if model in SHAPES:
        return None, {
            "skipped": f"{model} is a named shape with random weights: it is its own untrained base"
        }
    return None, {"skipped": f"{model} is not a checkpoint directory with a base.json: pass --base SPEC"}


def contenders(args: argparse.Namespace) -> tuple[list[Contender], dict]:
    """The --compare models, then the base; and the report's description of the base."""
    found = [
        Contender(name, "compare", spec, lambda spec=spec: (open_backend(spec, None), None))
        for name, spec in args.compare.items()
    ]
    base, base_info = base_contender(args.base, args.model)
    return found + ([base] if base else []), base_info


NO_CEILING = (
    "no real-vs-real ceiling: {why}. Scores are against the recorded text alone, so volatile content "
    "(times, ids) counts as a mismatch and no score here says how close a real sandbox would come."
)


def noise_floor(args: argparse.Namespace, trajectories: list[Trajectory]) -> tuple[NoiseFloor, dict]:
    if args.replays == 0:
        return NoiseFloor(), {"skipped": NO_CEILING.format(why="--replays 0 skipped the real replays")}
    replayable = [t for t in trajectories if t.domain in REPLAYABLE_DOMAINS]
    if not replayable:
        why = f"no trajectory of a replayable domain {REPLAYABLE_DOMAINS}"
        return NoiseFloor(), {"skipped": NO_CEILING.format(why=why)}
    store = ReplayStore(args.out / "replays.jsonl")
    replays = run_replays(
        replayable,
        args.replays,
        store,
        backend=args.backend,
        max_turns=args.max_turns,
        workers=args.sandboxes,
        attempts=args.replay_attempts,
        progress=not args.no_progress,
    )
    floor = build_noise_floor(replayable, replays, args.max_turns)
    recorded = sorted({t.environment.backend for t in replayable})
    info = {
        "replays": args.replays,
        "backend": args.backend if args.backend != "auto" else "as recorded: " + ", ".join(recorded),
        "attempts": args.replay_attempts,
        "counts": replay_counts(replays),
        "summary": floor.summary(),
        "real_vs_real": aggregate(floor.real_vs_real) if floor.real_vs_real else None,
    }
    if not floor.real_vs_real:
        info["skipped"] = NO_CEILING.format(why="every replay failed (see counts.errors)")
    return floor, info


def with_steps(
    path: str, per_domain: int | None = None, only: set[str] | None = None
) -> Iterator[Trajectory]:
    """Trajectories with at least one step (and an id in `only`, if given), read lazily, file by file;
    with `per_domain`, the first that many of each domain, so a mixed dataset is compared across all
    its domains. A domain's remaining files (`domain=<name>/` partitions) are not opened once it has
    enough, and a file is read no further than its first trajectory of a domain that has enough."""
    taken: Counter[str] = Counter()

    def wanted(domain: str) -> bool:
        return per_domain is None or taken[domain] < per_domain

    for file in dataset_files(path):
        partition = re.search(r"domain=([^/]+)/", file)
        if partition and not wanted(partition.group(1)):
            continue
        read = takewhile(lambda t: wanted(t.domain), read_trajectories(file))
        kept = (t for t in read if t.steps and (only is None or t.trajectory_id in only))
        yield from first_per_domain(kept, per_domain, taken)


def first_per_domain(
    trajectories: Iterable[Trajectory], n: int | None, taken: Counter[str] | None = None
) -> Iterator[Trajectory]:
    """The first `n` trajectories of each domain (every one with None), in their order; `taken` counts
    those yielded per domain, shared by a caller that caps several sources together (with_steps' files)."""
    taken = Counter() if taken is None else taken
    for t in trajectories:
        if n is None or taken[t.domain] < n:
            taken[t.domain] += 1
            yield t


def likelihood_pass(
    args: argparse.Namespace, generated: list[Trajectory], only: set[str] | None
) -> LikelihoodPass | None:
    """Every turn (--max-turns bounds generation only) of the generated trajectories, or with
    --held-out of every held-out trajectory, which --limit-trajectories does not bound: a held-out
    set is finite and chosen, while without it the limit is the promise to read no further. A held-out
    trajectory that cannot be read leaves the likelihood to the generated ones, said in the report.
    None with --no-likelihood."""
    if args.no_likelihood:
        return None
    cap = args.likelihood_trajectories
    chosen, note = generated, None
    if only is not None and args.limit_trajectories:
        try:
            chosen = list(with_steps(args.real, cap, only))
        except Exception as exc:
            note = (
                f"likelihood covers the generated trajectories only: reading the held-out ones failed: {exc}"
            )
            print(f"warning: {note}", file=sys.stderr)
    if cap is not None:
        chosen = list(first_per_domain(chosen, cap))
        budget = f"likelihood covers the first {cap} trajectories of each domain (--likelihood-trajectories)"
        note = f"{note}; {budget}" if note else budget
    out = args.out / "likelihood.jsonl"
    return LikelihoodPass(chosen, args.context_chars, out, progress=not args.no_progress, note=note)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["agents"]:  # the task-level comparison, a command of its own
        from training.fidelity.agents import main as agents_main

        return agents_main(argv[1:])
    args = parse_args(argv)
    started = time.monotonic()
    try:
        only = held_out_ids(args.held_out) if args.held_out else None
    except FileNotFoundError as exc:
        print(f"error: --held-out: {exc}", file=sys.stderr)
        return 2
    try:
        trajectories = list(with_steps(args.real, args.limit_trajectories, only))
    except Exception as exc:
        print(
            f"error: cannot read --real {args.real}: {exc}\n  pass a dataset written by a collector "
            "(e.g. python -m collectors.terminal --out DIR)",
            file=sys.stderr,
        )
        return 2
    if not trajectories:
        held = f" held out by {args.held_out}" if args.held_out else ""
        print(f"error: no trajectory with steps{held} in {args.real}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    settings = EvalSettings(
        config=decoding_config(args),
        context_chars=args.context_chars,
        concurrency=args.concurrency,
        max_turns=args.max_turns,
        progress=not args.no_progress,
    )
    try:
        others, base_info = contenders(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    likelihood = likelihood_pass(args, trajectories, only)
    floor, noise = noise_floor(args, trajectories)
    cache = ReplyCache(args.out / "predictions.jsonl")
    try:
        model = CachedBackend(open_backend(args.model, args.model_name), cache)
    except Exception as exc:
        print(
            f"error: cannot open --model {args.model}: {exc}\n  give a checkpoint directory, a named "
            "shape such as qwen3-tiny, or the URL of a running OpenAI-compatible server",
            file=sys.stderr,
        )
        return 2
    rows = {"model/teacher_forced": teacher_forced(model, trajectories, floor, settings)}
    if not args.no_closed_loop:
        rows["model/closed_loop"] = closed_loop(model, trajectories, floor, settings)
    if likelihood:
        likelihood.score("model", "model", model.backend, model.describe())
    model.close()  # before the next model loads: one model's weights in memory at a time
    rows["repeat_previous/teacher_forced"] = repeat_previous(trajectories, floor, args.max_turns)
    counted, described, failed = [model], {}, {}
    for other in others:
        try:
            backend, describe = other.open()
        except Exception as exc:  # the others are still compared, and the model's replies are cached
            failed[other.name] = f"cannot open {other.spec}: {type(exc).__name__}: {exc}"
            print(f"error: {other.name}: {failed[other.name]}; it is left out of the report", file=sys.stderr)
            continue
        cached = CachedBackend(backend, cache, describe=describe)
        rows[f"{other.name}/teacher_forced"] = teacher_forced(
            cached, trajectories, floor, settings, other.name
        )
        if likelihood:
            likelihood.score(other.name, other.role, backend, cached.describe())
        cached.close()
        counted.append(cached)
        described[other.name] = {"spec": other.spec, **cached.describe()}
    rows["real_vs_real"] = floor.real_vs_real
    if args.judge_url:
        judge_backend = CachedBackend(open_backend(args.judge_url, args.judge_model), cache)
        try:
            judge_rows(
                judge_backend,
                rows["model/teacher_forced"],
                trajectories,
                settings,
                prompts_dir=args.judge_prompts_dir,
            )
        except JudgePromptError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    base = next((c for c in others if c.role == "base"), None)
    meta = {
        "real": args.real,
        "trajectories": len(trajectories),
        "turns": len(rows["model/teacher_forced"]),
        "model": model.describe(),
        "base": {"name": base.name, **base_info, **described.get(base.name, {})} if base else base_info,
        "compare": {n: d for n, d in described.items() if base is None or n != base.name},
        "failed_systems": failed,
        "generation": vars(settings.config) | {"context_chars": args.context_chars},
        "requests": sum(b.requests for b in counted),
        "cache_hits": sum(b.hits for b in counted),
        "request_errors": sum(1 for rs in rows.values() for r in rs if r.get("error")),
        "seconds": round(time.monotonic() - started, 1),
    }
    roles = {"model": "model", "repeat_previous": "baseline"} | {c.name: c.role for c in others}
    report = build_report(rows, meta, noise, roles, likelihood.section() if likelihood else None)
    with (args.out / "turns.jsonl").open("w") as f:
        for name, system_rows in rows.items():
            for row in system_rows:
                f.write(json.dumps({"series": name, **row}) + "\n")
    paths = write_all(report, args.out, compared_turns(rows, trajectories))
    cache.close()
    if likelihood:
        likelihood.close()
    _print_summary(report, paths)
    return 1 if failed else 0


def compared_turns(rows: dict[str, list[dict]], trajectories: list[Trajectory]) -> list[dict]:
    """The model's scored turns with the action and the recorded observation, for the turn browser."""
    steps = {(t.trajectory_id, k): s for t in trajectories for k, s in enumerate(t.steps, 1)}
    out = []
    for name in MODEL_SERIES:
        for row in rows.get(name, []):
            step = steps[(row["trajectory_id"], row["turn_idx"])]
            out.append({**row, "action": step.action.text, "real": step.observation.text})
    return out


def _print_summary(report: dict, paths: dict[str, Path]) -> None:
    meta = report["meta"]
    print(
        f"\n{meta['trajectories']} trajectories, {meta['turns']} turns, {meta['requests']} model requests "
        f"({meta['cache_hits']} from cache), {meta['request_errors']} request errors, {meta['seconds']} s"
    )
    if report["systems"]:
        header, body = headline_table(report)
        print("edit similarity per domain (share of the real-vs-real ceiling):")
        for name, *values in zip(header, *body, strict=True):
            print(f"  {name:32} " + "  ".join(f"{v:>16}" for v in values))
    else:
        print(NO_GENERATION)
    for note in report["notes"]:
        print(f"note: {note}")
    if "judge" in report:
        j = report["judge"]["overall"]
        score = "-" if j["score"] is None else f"{j['score']:.1f}"
        print(f"judge score {score} over {j['samples']} turns ({j['judge_failures']} judge failures)")
    if "comparison" in report:
        print("comparison, teacher-forced, main metric per domain (95% paired bootstrap CI, * excludes 0):")
        for header, body in (comparison_table(report["comparison"]), rate_table(report["comparison"])):
            _print_table(header, body)
        for line in summary_lines(report["comparison"]):
            print(f"  {line}")
    if "likelihood" in report:
        section = report["likelihood"]
        print(
            f"likelihood of the real observations, {section['turns']} turns of {section['trajectories']} "
            f"trajectories in {section['seconds']} s (bits per byte, 95% paired bootstrap CI, * excludes 0):"
        )
        _print_table(*likelihood_table(section))
        for line in likelihood_lines(section):
            print(f"  {line}")
    print(f"report: {paths['html']}  ({paths['md'].name}, {paths['json'].name})")


def _print_table(header: list[str], body: list[list[str]]) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(header, *body, strict=True)]
    for line in (header, *body):
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
