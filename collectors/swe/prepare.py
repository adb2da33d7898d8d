"""`python -m collectors.swe prepare`: download and build the repositories SWE tasks need, ahead of a
collection (`make setup` runs it), check the suite, or regenerate the embedded task file."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from collectors.swe.suite import build_task
from collectors.tasks import embedded_tasks
from sandboxes.swe.mutation import Mutation
from sandboxes.swe.mutation_tests import run_tests
from sandboxes.swe.repos import (
    RepoError,
    RepoSpec,
    default_cache_dir,
    embedded_suite,
    prepare_repo,
    spec_for,
    task_template,
)

EPILOG = """examples:
  # what `make setup` runs: every repository and mutated template of the embedded tasks
  python -m collectors.swe prepare

  # check the whole suite: download, unpack, run each project's own tests unmutated (no network)
  python -m collectors.swe prepare --all --check

  # regenerate the embedded task file: 2 seeds per repository (each seed runs the tests a few times)
  python -m collectors.swe prepare --all --seeds 2 --write-tasks collectors/swe/tasks.jsonl

  # rebuild a task file's lines from the mutations they record (same bugs on every machine), with
  # their verifiers' FAIL_TO_PASS / PASS_TO_PASS recomputed from two runs of each suite
  python -m collectors.swe prepare --rewrite collectors/swe/tasks.jsonl

The cache is $AGENTWORLD_CACHE_DIR/swe (else ~/.cache/agentworld/swe); entries are built once and
reused, so a rerun is quick. Exit status 1 when any repository failed.
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.swe prepare",
        description="Download and build SWE repositories: PyPI sdists -> git repositories -> mutations.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="repositories of the embedded suite")
    parser.add_argument("--all", action="store_true", help="every repository of the embedded suite")
    parser.add_argument("--cache-dir", metavar="DIR", help="cache (default: $AGENTWORLD_CACHE_DIR/swe)")
    parser.add_argument("--check", action="store_true", help="run each repository's tests unmutated")
    parser.add_argument("--seeds", type=int, default=0, metavar="N", help="also build seeds 0..N-1 of each")
    parser.add_argument("--jobs", "-j", type=int, default=4, metavar="N", help="repositories at a time (4)")
    parser.add_argument("--write-tasks", metavar="FILE", help="write the task lines of those seeds here")
    parser.add_argument(
        "--rewrite", metavar="FILE", help="rebuild FILE's task lines from the mutations they record"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.write_tasks and args.seeds < 1:
        parser.error("--write-tasks needs --seeds N (N >= 1)")
    return args


def _selected(args: argparse.Namespace) -> list[RepoSpec]:
    suite = embedded_suite()
    unknown = [name for name in args.names if name not in suite]
    if unknown:
        raise RepoError(f"not in the embedded suite: {', '.join(unknown)}; known: {', '.join(suite)}")
    if args.all:
        return list(suite.values())
    return [suite[name] for name in args.names]


def distinct_tasks(spec: RepoSpec, count: int, cache_dir: Path) -> list[dict]:
    """Tasks of seeds 0, 1, ... whose mutations differ (a project with few sites can give two
    seeds the same bug), `count` of them, trying at most 3 * count seeds."""
    found: dict[str, dict] = {}
    for seed in range(3 * count):
        line = build_task(spec, seed, cache_dir)
        found.setdefault(json.dumps(line["metadata"]["mutation"], sort_keys=True), line)
        if len(found) == count:
            break
    return list(found.values())


def _run_all(labels: list[str], work: Callable[[int], str], jobs: int) -> int:
    """Run work(i) for every item, `jobs` at a time, printing one line per finished item; the
    number that failed (RepoError)."""
    failed, done = 0, 0

    def timed(index: int) -> tuple[int, str, float]:
        started = time.monotonic()
        try:
            return index, "ok" + work(index), time.monotonic() - started
        except RepoError as exc:
            return index, f"FAILED: {exc}", time.monotonic() - started

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in as_completed([pool.submit(timed, index) for index in range(len(labels))]):
            index, status, seconds = future.result()
            done += 1
            failed += status.startswith("FAILED")
            print(f"[{done}/{len(labels)}] {labels[index]}: {status} ({seconds:.1f} s)", file=sys.stderr)
    return failed


def _embedded_templates(cache_dir: Path, jobs: int) -> int:
    """Build the template of every embedded task; the number that failed."""
    tasks = embedded_tasks("swe")

    def work(index: int) -> str:
        task_template(tasks[index].task.metadata, cache_dir)
        return ""

    failed = _run_all([spec.id for spec in tasks], work, jobs)
    print(f"prepared {len(tasks) - failed} of {len(tasks)} task repositories in {cache_dir}")
    return failed


def _repositories(specs: list[RepoSpec], args: argparse.Namespace, cache_dir: Path) -> int:
    lines: dict[int, list[dict]] = {}

    def work(index: int) -> str:
        spec, notes = specs[index], []
        repo = prepare_repo(spec, cache_dir)
        if args.check:
            run = run_tests(repo, spec.test_command, spec.test_timeout_s)
            if run.exit_status != 0:
                raise RepoError(f"its unmutated tests do not pass: {run.summary}")
            notes.append(f"tests pass in {run.duration_s:.1f} s")
        lines[index] = distinct_tasks(spec, args.seeds, cache_dir)
        notes += [
            f"seed {line['metadata']['seed']}: {line['metadata']['mutation']['description']}"
            for line in lines[index]
        ]
        return "".join(f"; {note}" for note in notes)

    failed = _run_all([spec.key for spec in specs], work, args.jobs)
    if args.write_tasks:
        # Seed-major order, suite order within a seed: the first episodes cover different repositories.
        ordered = sorted(
            (line["metadata"]["seed"], index, line) for index, found in lines.items() for line in found
        )
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for _, _, line in ordered)
        Path(args.write_tasks).write_text(text, encoding="utf-8")
        print(f"wrote {len(ordered)} tasks to {args.write_tasks}")
    print(f"{len(specs) - failed} of {len(specs)} repositories ready in {cache_dir}")
    return failed


def _rewrite(path: Path, cache_dir: Path, jobs: int) -> int:
    """Rebuild every line of the task file at `path` from the mutation it records, in its order;
    the number that failed (the file is left as it was then)."""
    old = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    new: dict[int, dict] = {}

    def work(index: int) -> str:
        metadata = old[index]["metadata"]
        spec = spec_for(metadata)
        new[index] = build_task(spec, metadata["seed"], cache_dir, Mutation(**metadata["mutation"]))
        verifier = new[index]["verifier"]
        return f"; {len(verifier['FAIL_TO_PASS'])} failing, {len(verifier['PASS_TO_PASS'])} passing"

    failed = _run_all([line["id"] for line in old], work, jobs)
    if not failed:
        text = "".join(json.dumps(new[index], ensure_ascii=False) + "\n" for index in range(len(old)))
        path.write_text(text, encoding="utf-8")
        print(f"rewrote {len(old)} tasks in {path}")
    return failed


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    if args.rewrite:
        return 1 if _rewrite(Path(args.rewrite), cache_dir, args.jobs) else 0
    try:
        specs = _selected(args)
    except RepoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = _repositories(specs, args, cache_dir) if specs else _embedded_templates(cache_dir, args.jobs)
    return 1 if failed else 0
