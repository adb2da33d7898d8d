"""Start-URL files and --allow-origin values, parsed without a browser."""

from __future__ import annotations

import pytest

from collectors.tasks import embedded_tasks
from collectors.web.start_urls import apply_allowed_origins, parse_origin, parse_start_urls
from sandboxes.web.config import default_allowed_origins, origin_of


def test_one_task_per_distinct_url_with_its_own_origin() -> None:
    lines = [
        "# comment",
        "",
        "https://Example.com/a?b=1",
        "  http://127.0.0.1:8080/  ",
        "https://Example.com/a?b=1",
    ]
    specs = parse_start_urls(lines, "urls.txt")
    assert [s.task.metadata["start_url"] for s in specs] == [
        "https://Example.com/a?b=1",
        "http://127.0.0.1:8080/",
    ]
    assert [s.task.metadata["allowed_origins"] for s in specs] == [
        ["https://example.com"],
        ["http://127.0.0.1:8080"],
    ]
    assert len({s.id for s in specs}) == 2
    again = parse_start_urls(["http://127.0.0.1:8080/"], "other.txt")
    assert again[0].id == specs[1].id  # ids come from the URL, so reruns resume


def test_bad_lines_are_all_named() -> None:
    with pytest.raises(ValueError) as error:
        parse_start_urls(["file:///etc/passwd", "https://ok.example/", "example.com", "http://a b/"], "u.txt")
    message = str(error.value)
    assert "u.txt:1:" in message and "u.txt:3:" in message and "u.txt:4:" in message
    assert "u.txt:2:" not in message
    with pytest.raises(ValueError, match="holds no URLs"):
        parse_start_urls(["# only a comment"], "u.txt")


def test_origins_are_normalised_and_urls_refused() -> None:
    assert parse_origin("HTTPS://Docs.Example.com:443/") == "https://docs.example.com"
    assert parse_origin("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    for bad in ("https://example.com/path", "ftp://example.com", "example.com", "https://x.test/?q=1"):
        with pytest.raises(ValueError):
            parse_origin(bad)


def test_extra_origins_extend_every_task() -> None:
    tasks = embedded_tasks("web")
    own = [list(t.task.metadata["allowed_origins"]) for t in tasks]
    apply_allowed_origins(tasks, ["https://cdn.example.com"])
    for before, spec in zip(own, tasks, strict=True):
        assert spec.task.metadata["allowed_origins"] == before + ["https://cdn.example.com"]
    plain = parse_start_urls(["https://a.example/"], "u.txt")
    plain[0].task.metadata.pop("allowed_origins")
    apply_allowed_origins(plain, ["https://b.example"])
    assert plain[0].task.metadata["allowed_origins"] == default_allowed_origins() + ["https://b.example"]


def test_the_embedded_suite_starts_inside_its_allowed_origins() -> None:
    tasks = embedded_tasks("web")
    assert {t.task.metadata["category"] for t in tasks} == {"shop", "docs"}
    for spec in tasks:
        metadata = spec.task.metadata
        assert origin_of(metadata["start_url"]) in metadata["allowed_origins"]
