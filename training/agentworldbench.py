"""python -m training.agentworldbench infer|judge|score: AgentWorldBench-format JSONL, ours or the public one.

Every record is read at its `turn_idx`, as the public evaluation reads it (schemas.render.record_context):
the earlier turns are the history, the current action is `current_prompt` (or `prompt[turn_idx-1]`), the
reference is `response[turn_idx-1]`, and later turns in the lists never reach the model or the judge.

infer  asks the world model each record's chat (record_messages) and stores the raw reply, the content
       the public evaluator extracts from it (parse_prediction) and whether it came tagged; a model
       trained on delta targets (training.targets) answers with an edit script, stored rebuilt into
       the full observation (a script that does not apply is a format failure, `format_error` says why);
judge  scores that content against the reference on the five dimensions, the judge seeing the same
       context the model saw;
score  prints per-domain scores the benchmark's way ((x-1)/4*100 per dimension, averaged over the
       samples the judge could score) with the count of failed ones, beside a strict score (a failed
       sample counts as the lowest), the macro mean over domains and the share of tagged replies.
infer and judge append one line per id as soon as it is done and skip ids already in --out, so a
killed run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from sandboxes.domains import find_domain
from schemas.edit_script import TARGET_FORMS
from schemas.render import (
    parse_prediction,
    record_messages,
    record_previous_observation,
    reference_observation,
)
from training.backends import make_backend
from training.backends.base import GenerationConfig, WorldModelBackend, ending_at_answer
from training.bench_records import BenchError, read_jsonl, read_records
from training.rewards.judge import (
    DIMENSIONS,
    JUDGE_CONFIG,
    MAX_CHARS,
    PROJECT_PROMPT,
    judge,
    sample_score,
    summarise,
)
from training.rewards.public_judge import CONFIG as PUBLIC_CONFIG
from training.rewards.public_judge import JudgePromptError, check_prompts, prompt_label, read_prediction
from training.targets import model_target, rebuild

EXAMPLES = """examples:
  python -m training.agentworldbench infer --data 'out/corpus/agentworldbench/*_test.jsonl' \\
      --model http://127.0.0.1:8000/v1 --out preds.jsonl --concurrency 16
  python -m training.agentworldbench judge --data 'out/corpus/agentworldbench/*_test.jsonl' \\
      --predictions preds.jsonl --judge-url http://127.0.0.1:8001/v1 --out judged.jsonl
  python -m training.agentworldbench score --judged judged.jsonl --json scores.json
Rerunning infer or judge with the same --out only does the ids that are not there yet."""


def task_domain(task: str) -> str:
    """Our domain of a record's `task`, an AgentWorldBench task name found through the domain registry
    (`"lwm/os"` reads as `os`, as the public evaluation reads it); a task of no domain stays as it is."""
    spec = find_domain(task.rsplit("/", 1)[-1])
    return spec.name if spec else task


def read_predictions(path: Path) -> dict[str, dict]:
    """infer's rows by id, each with the `prediction` text to judge and its `tagged` flag."""
    rows = read_jsonl(path)
    stale = [i for i, r in rows.items() if not isinstance(r.get("prediction"), str) or "tagged" not in r]
    if stale:
        raise BenchError(
            f"{path}: ids {stale[:3]} have no `prediction` text or `tagged` flag (written by an older "
            "infer); rerun `infer` into a new --out"
        )
    return rows


def run_resumable(
    todo: list[dict],
    work: Callable[[dict], dict | None],
    out: Path,
    concurrency: int,
    desc: str,
    progress: bool,
) -> int:
    """Run `work` over `todo` concurrently, appending each result line as it finishes (None: nothing,
    so that a rerun does that item again). Returns how many lines were written."""
    written = 0
    lock = threading.Lock()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as f, ThreadPoolExecutor(max(1, concurrency)) as pool:
        futures = [pool.submit(work, item) for item in todo]
        for future in tqdm(as_completed(futures), total=len(futures), desc=desc, disable=not progress):
            row = future.result()
            if row is None:
                continue
            with lock:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                f.flush()
                written += 1
    return written


def infer(
    records: list[dict],
    backend: WorldModelBackend,
    out: Path,
    *,
    config: GenerationConfig,
    concurrency: int = 16,
    progress: bool = True,
    target: str | None = None,
) -> dict:
    """Predict every record not yet in `out`. A failed request is not written: a rerun retries it.
    `target`: the model's answer form (default: what its checkpoint records, see training.targets)."""
    target = target or model_target(backend)
    done = read_jsonl(out)
    todo = [r for r in records if str(r["id"]) not in done]
    failures: list[str] = []

    def work(record: dict) -> dict | None:
        row = {"id": record["id"], "task": record["task"], "turn_idx": record["turn_idx"]}
        try:
            reply = backend.complete(record_messages(record), config)
        except Exception as exc:  # reported, not fatal: the other ids go on
            failures.append(f"{record['id']}: {type(exc).__name__}: {exc}")
            return None
        # What the public evaluator reads in the reply is what gets judged; `tagged` keeps the format.
        prediction = parse_prediction(reply)
        content, error = rebuild(
            record_previous_observation(record), prediction.content, task_domain(record["task"]), target
        )
        return {
            **row,
            "reply": reply,
            "prediction": content,
            "tagged": prediction.tagged,
            "format_failure": not prediction.tagged or bool(error),
            **({"target": target} if target != "full" else {}),
            **({"format_error": error} if error else {}),
        }

    written = run_resumable(todo, work, out, concurrency, "infer", progress)
    return {
        "records": len(records),
        "already_done": len(done),
        "new": written,
        "request_failures": failures,
    }


def _refuse_mixed_prompts(done: dict[str, dict], prompts_dir: Path | None, out: Path) -> None:
    """BenchError when `done` holds judgements made with another judge prompt than this run's."""

    def label(task: str) -> str:
        if prompts_dir is None:
            return PROJECT_PROMPT
        try:
            return prompt_label(prompts_dir, task)
        except JudgePromptError:
            return "(no prompt for this task)"

    labels: dict[str, str] = {}
    for key, row in done.items():
        task = row["task"]
        labels.setdefault(task, label(task))
        if row.get("prompt", PROJECT_PROMPT) != labels[task]:
            raise BenchError(
                f"{out}: id {key!r} was judged with the judge prompt {row.get('prompt', PROJECT_PROMPT)!r}, "
                f"this run uses {labels[task]!r}; scores from different prompts do not compare, so judge "
                "into a new --out"
            )


def judge_predictions(
    records: list[dict],
    predictions: dict[str, dict],
    backend: WorldModelBackend,
    out: Path,
    *,
    concurrency: int = 16,
    max_chars: int | None = None,
    config: GenerationConfig | None = None,
    progress: bool = True,
    prompts_dir: Path | None = None,
) -> dict:
    """Judge each predicted id not yet in `out`; unreadable judge replies are recorded as failures.

    The judge sees the record's own context, `record_messages(record)`: the system prompt with the
    initial state and the turns before turn_idx, indexed as the model's prompt was, never later ones.
    With `prompts_dir` it judges the public way (rewards/judge.py); `out` must not hold judgements made
    with another prompt, since their scores would not compare."""
    done = read_jsonl(out)
    todo = [r for r in records if str(r["id"]) in predictions and str(r["id"]) not in done]
    try:
        if prompts_dir is not None:
            check_prompts(prompts_dir, {r["task"] for r in todo})
    except JudgePromptError as exc:
        raise BenchError(str(exc)) from None
    if todo:
        _refuse_mixed_prompts(done, prompts_dir, out)

    def work(record: dict) -> dict:
        predicted = predictions[str(record["id"])]
        prediction = predicted["prediction"]
        if prompts_dir is not None and "reply" in predicted and "target" not in predicted:
            # The public evaluation reads the raw reply its own way, and does not judge an empty one
            # (an edit script's reply is not an observation: its rebuilt prediction is judged instead).
            prediction = read_prediction(predicted["reply"]) if predicted["reply"].strip() else None
        result = judge(
            backend,
            domain=record["task"],
            context=record_messages(record),
            reference=reference_observation(record),
            prediction=prediction,
            max_chars=max_chars,
            config=config,
            prompts_dir=prompts_dir,
        )
        row = {"id": record["id"], "task": record["task"], **result.as_dict()}
        failure = predicted.get("format_failure", not predicted["tagged"])
        return {**row, "tagged": predicted["tagged"], "format_failure": failure}

    run_resumable(todo, work, out, concurrency, "judge", progress)
    rows = read_jsonl(out)
    return {
        "judged": len(rows),
        "judge_failures": sum(1 for r in rows.values() if r["scores"] is None),
        "unpredicted": sum(1 for r in records if str(r["id"]) not in predictions),
    }


def _row_stats(rows: list[dict]) -> dict:
    """One domain's (or all samples') numbers: the public script's mean over the samples the judge
    scored, per dimension and overall (training.rewards.judge.summarise), with the count of failed ones; the
    strict score, in which a failed sample counts as the lowest score (0); and the share of tagged
    replies, in percent."""
    ok = [r["percent"] for r in rows if r.get("scores")]
    totals = [sample_score(p) or 0.0 for p in ok]
    return {
        "samples": len(rows),
        "failed": len(rows) - len(ok),
        "format_validity": 100 * sum(not r["format_failure"] for r in rows) / len(rows),
        **summarise(ok),
        "strict": sum(totals) / len(rows),
    }


def _macro(domains: dict[str, dict]) -> dict:
    """The mean over domains of each domain's number (the public README's Overall); a domain whose
    samples all failed has no valid score and is left out of that mean only."""
    stats: dict = {
        "domains": len(domains),
        "samples": sum(s["samples"] for s in domains.values()),
        "failed": sum(s["failed"] for s in domains.values()),
    }
    for key in ("format_validity", *DIMENSIONS, "score", "strict"):
        values = [s[key] for s in domains.values() if s[key] is not None]
        stats[key] = sum(values) / len(values) if values else None
    return stats


def score(judged: dict[str, dict]) -> dict:
    """{"domains": {domain: stats}, "overall": stats of all samples, "macro": mean over domains}."""
    by_domain: dict[str, list[dict]] = {}
    for row in judged.values():
        by_domain.setdefault(row["task"], []).append(row)
    domains = {d: _row_stats(rows) for d, rows in sorted(by_domain.items())}
    return {"domains": domains, "overall": _row_stats(list(judged.values())), "macro": _macro(domains)}


_COLUMNS = ("samples", "failed", "format_validity", *DIMENSIONS, "score", "strict")
_LEGEND = """score: mean over the samples the judge scored (the public script); failed: samples it could not
score; strict: failed samples count as the lowest score; format%: replies with the tags (format_validity
in --json); overall: all samples together (what the public script prints as Overall); macro: mean over
domains (the public README's Overall)."""


def format_table(table: dict) -> str:
    header = ["domain", "samples", "failed", "format%", *DIMENSIONS, "score", "strict"]
    lines = ["  ".join(f"{h:>11}" for h in header)]
    rows = [*table["domains"].items(), ("overall", table["overall"]), ("macro", table["macro"])]
    for name, stats in rows:
        cells = [name]
        for column in _COLUMNS:
            value = stats[column]
            cells.append("-" if value is None else str(value) if isinstance(value, int) else f"{value:.1f}")
        lines.append("  ".join(f"{c:>11}" for c in cells))
    return "\n".join(lines) + "\n" + _LEGEND


def judge_config(prompts_dir: Path | None, max_new_tokens: int | None) -> GenerationConfig:
    """The judge's sampling: ours (greedy) or the public evaluation's, with the reply length asked."""
    config = PUBLIC_CONFIG if prompts_dir is not None else JUDGE_CONFIG
    return config if max_new_tokens is None else replace(config, max_new_tokens=max_new_tokens)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.agentworldbench",
        description=__doc__.split("\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("infer", help="query the world model for every record")
    i.add_argument("--data", nargs="+", required=True, help="AgentWorldBench JSONL files or globs")
    i.add_argument("--model", required=True, help="OpenAI-compatible URL, checkpoint dir or named shape")
    i.add_argument("--model-name", help="model name at the URL (default: the first served)")
    i.add_argument("--out", type=Path, required=True, help="predictions JSONL (appended, resumable)")
    i.add_argument("--max-new-tokens", type=int, default=2048)
    i.add_argument(
        "--target",
        choices=TARGET_FORMS,
        help="the answer form the model was trained on (default: what its checkpoint or GGUF file "
        "records, else full; give it for a delta model behind a URL)",
    )
    j = sub.add_parser("judge", help="score predictions with an LLM judge")
    j.add_argument("--data", nargs="+", required=True, help="the same AgentWorldBench JSONL files")
    j.add_argument("--predictions", type=Path, required=True, help="output of infer")
    j.add_argument("--judge-url", required=True, help="OpenAI-compatible endpoint of the judge")
    j.add_argument("--judge-model", help="model name at --judge-url (default: the first served)")
    j.add_argument("--out", type=Path, required=True, help="judgements JSONL (appended, resumable)")
    j.add_argument(
        "--prompts-dir",
        type=Path,
        help="the public Qwen-AgentWorld repository's prompts/ folder (DIR/<task>/judge_system_prompt.txt): "
        "judge the public evaluation's way, for scores comparable with published AgentWorldBench numbers "
        "(default: the project's own judge prompt)",
    )
    j.add_argument(
        "--max-chars",
        type=int,
        help=f"cut each text shown to the judge to this (default: {MAX_CHARS}; with --prompts-dir, no cut)",
    )
    j.add_argument(
        "--max-new-tokens",
        type=int,
        help=f"judge reply length (default: {JUDGE_CONFIG.max_new_tokens}; with --prompts-dir, "
        f"{PUBLIC_CONFIG.max_new_tokens}, sampled at temperature {PUBLIC_CONFIG.temperature})",
    )
    for sp in (i, j):
        sp.add_argument("--concurrency", type=int, default=16)
        sp.add_argument("--no-progress", action="store_true")
    s = sub.add_parser("score", help="print per-domain and overall scores")
    s.add_argument("--judged", type=Path, required=True, help="output of judge")
    s.add_argument("--json", type=Path, help="also write the scores here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "score":
            judged = read_jsonl(args.judged)
            if not judged:
                raise BenchError(f"{args.judged}: no judgements; run `judge` first")
            table = score(judged)
            print(format_table(table))
            print(json.dumps(table))
            if args.json:
                args.json.write_text(json.dumps(table, indent=2))
            return 0
        records = read_records(args.data)
        if args.command == "infer":
            opts = {"model": args.model_name} if args.model_name else {}
            backend = make_backend(args.model, **opts)
            summary = infer(
                records,
                backend,
                args.out,
                config=ending_at_answer(GenerationConfig(max_new_tokens=args.max_new_tokens)),
                concurrency=args.concurrency,
                progress=not args.no_progress,
                target=args.target,
            )
            backend.close()
            fails = summary["request_failures"]
            print(
                f"{summary['records']} records: {summary['already_done']} already done, {summary['new']} "
                f"predicted, {len(fails)} request failures (rerun to retry) -> {args.out}"
            )
            for line in fails[:5]:
                print(f"  {line}", file=sys.stderr)
            return 1 if fails else 0
        predictions = read_predictions(args.predictions)
        opts = {"model": args.judge_model} if args.judge_model else {}
        backend = make_backend(args.judge_url, **opts)
        summary = judge_predictions(
            records,
            predictions,
            backend,
            args.out,
            concurrency=args.concurrency,
            max_chars=args.max_chars,
            config=judge_config(args.prompts_dir, args.max_new_tokens),
            progress=not args.no_progress,
            prompts_dir=args.prompts_dir,
        )
        backend.close()
        print(
            f"{summary['judged']} judged ({summary['judge_failures']} judge failures), "
            f"{summary['unpredicted']} records without a prediction -> {args.out}"
        )
        return 0
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
