"""The trajectories a corpus held out of training: its test split, read from the AgentWorldBench files
the corpus pipeline writes per split (`CORPUS/agentworldbench/<domain>_test.jsonl`, one record per
turn, ids `<trajectory_id>:<turn>`). The split is by task id, so no test trajectory's task was trained."""

from __future__ import annotations

import json

import fsspec


def held_out_ids(corpus: str) -> set[str]:
    fs, root = fsspec.core.url_to_fs(corpus)
    files = fs.glob(f"{root.rstrip('/')}/agentworldbench/*_test.jsonl")
    if not files:
        raise FileNotFoundError(
            f"no agentworldbench/*_test.jsonl under {corpus}: pass a corpus written by "
            "beam_pipelines.build_corpus with a test split (--split-ratios with a third part above 0)"
        )
    ids = set()
    for path in files:
        for line in fs.cat_file(path).decode().splitlines():
            if line.strip():
                ids.add(json.loads(line)["id"].rsplit(":", 1)[0])
    return ids
