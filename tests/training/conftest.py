"""Token corpora for the training tests: a real one built by the corpus pipeline, and small
hand-written shards whose contents the tests know exactly.

The shards' schema is spelled out here rather than imported from `beam_pipelines`, so the loop tests
also run on a GPU machine without Apache Beam; `test_data` checks it equals the pipeline's ROW_SCHEMA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import build_corpus_in_process

SHARD_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("doc_lengths", pa.list_(pa.int32())),
        ("doc_ids", pa.list_(pa.string())),
        ("doc_echo", pa.list_(pa.bool_())),
    ]
)
ROOT = Path(__file__).resolve().parents[2]
TERMINAL_RUN = ROOT / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def write_rows(path: Path, rows: list[list[tuple[list[int], int, bool]]]) -> Path:
    """One shard; a row is a list of documents (ids, loss_start, echo), the loss covering ids[loss_start:]."""
    columns: dict[str, list] = {name: [] for name in SHARD_SCHEMA.names}
    for n, row in enumerate(rows):
        columns["input_ids"].append([t for ids, _, _ in row for t in ids])
        columns["loss_mask"].append([int(i >= start) for ids, start, _ in row for i in range(len(ids))])
        columns["doc_lengths"].append([len(ids) for ids, _, _ in row])
        columns["doc_ids"].append([f"row{n}-doc{k}" for k in range(len(row))])
        columns["doc_echo"].append([echo for _, _, echo in row])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=SHARD_SCHEMA), path)
    return path


def counting_corpus(root: Path, rows: int = 8, length: int = 32, validation_rows: int = 0) -> Path:
    """OUT/sft/<split>/: rows of two documents that count upwards from different starts (a pattern
    a tiny model memorises in a few steps), the prompt half of each untrained, every third one an
    echo. The validation rows repeat the first training rows: the overfitting test must see them fall."""
    for split, count in (("train", rows), ("validation", validation_rows)):
        data = []
        for r in range(count):
            docs = []
            for k, size in enumerate((length // 2 + 4, length // 2 - 4)):
                start = 1000 + 37 * (2 * r + k)
                docs.append((list(range(start, start + size)), size // 2, (2 * r + k) % 3 == 0))
            data.append(docs)
        if data:
            write_rows(root / "sft" / split / "terminal-00000-of-00001.parquet", data)
    return root


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    return counting_corpus(tmp_path / "corpus", validation_rows=2)


def build_corpus(out: Path, *args: str) -> Path:
    """The real corpus pipeline over the recorded terminal trajectories into `out`, with `args`, in
    this process (`build_corpus_in_process`)."""
    build_corpus_in_process("--input", str(TERMINAL_RUN), "--output", str(out), *args)
    return out


@pytest.fixture(scope="session")
def pipeline_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real corpus pipeline over the recorded terminal trajectories: CPT only, in short rows for
    fast CPU steps (the SFT samples of this fixture do not fit 256 tokens)."""
    out = tmp_path_factory.mktemp("pipeline") / "corpus"
    return build_corpus(out, "--seq-len", "256", "--split-ratios", "0.6,0.4,0", "--emit", "cpt")
