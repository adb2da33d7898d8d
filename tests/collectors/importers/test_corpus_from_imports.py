"""Every format's sample, imported into one dataset, builds into a corpus on the real Beam pipeline."""

from __future__ import annotations

import importlib
import json
import socket
from pathlib import Path

import pytest

from beam_pipelines.build_corpus import main as build_corpus
from collectors.importers import FORMATS, load_importer
from collectors.importers.base import ImportContext
from collectors.importers.run import import_rows


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, dict[str, set[str]]]:
    """One dataset root holding every format's sample; format -> the domains its rows became."""
    root = tmp_path_factory.mktemp("imports")
    raw = root / "raw"
    domains: dict[str, set[str]] = {}
    for name in FORMATS:
        sample = importlib.import_module(f"tests.collectors.importers.test_{name}").write_sample
        (root / name).mkdir()
        source = sample(root / name)
        importer = load_importer(name)
        context = ImportContext(
            dataset=f"example/{name}", version="1", license="CC-BY-4.0", collector_version="test",
            host=socket.gethostname(),
        )  # fmt: skip
        summary = import_rows(importer, [str(source)], str(raw), context, progress=False)
        assert summary.imported >= 1, (name, summary.format_text())  # a sample may hold a bad row too
        domains[name] = set(summary.domains)
    return raw, domains


def test_every_format_builds_into_the_corpora(imported, tmp_path: Path):
    raw, domains = imported
    out = tmp_path / "corpus"
    args = ["--input", str(raw), "--output", str(out), "--split-ratios", "1,0,0", "--shards", "1"]
    args += ["--seq-len", "4096", "--direct_num_workers=1", "--direct_running_mode=in_memory"]
    assert build_corpus(args) == 0

    report = json.loads((out / "report.json").read_text())
    sources = report["stages"]["sources"]
    for name in FORMATS:
        assert sources.get(f"dataset.example/{name}", 0) >= 1, f"{name}: no trajectory passed validation"
    rejected = out / "dead_letter" / "validate.jsonl"
    assert not rejected.exists() or not rejected.read_text().strip(), rejected.read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    documents: dict[tuple[str, str], int] = {}
    for entry in manifest["files"]:
        domain = entry["domain"] or Path(entry["path"]).name.split("-")[0]  # rl files name it only
        key = (entry["corpus"], domain)
        documents[key] = documents.get(key, 0) + entry.get("documents", 0)
    for domain in set().union(*domains.values()):
        for corpus in ("sft", "cpt", "rl"):
            assert documents.get((corpus, domain), 0) > 0, f"no {corpus} documents for {domain}"
