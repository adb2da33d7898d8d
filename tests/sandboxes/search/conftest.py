"""One real tantivy index for the search sandbox tests, built once per session from the real
offline sources (python3-doc HTML and Debian manual pages rendered by mandoc)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.search import BuildParams, SearchConfig, SearchSandbox, TantivyBackend, build_index
from schemas.records import Task

TEST_LIMIT = 600


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mandoc") is None:
        pytest.fail("mandoc is not installed (apt-get install mandoc)")
    out = tmp_path_factory.mktemp("search") / "index"
    manifest = build_index(out, BuildParams(limit=TEST_LIMIT), progress=False)
    assert manifest["documents"] == TEST_LIMIT
    assert set(manifest["sources"]) == {"python-docs", "man-pages"}
    return out


@pytest.fixture(scope="module")
def sandbox(index_dir: Path) -> Iterator[SearchSandbox]:
    with SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(index_dir)))) as box:
        box.reset(Task(id="test"))
        yield box
