"""Tasks from a list of start URLs (`--start-urls FILE`) and extra allowed origins (`--allow-origin`).

A start-URL file holds one http(s) URL per line; blank lines and lines starting with `#` are
skipped. Each URL becomes a task that may reach its own origin, plus any `--allow-origin`. The
task id is derived from the URL, so editing the file does not renumber the others and a rerun
resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import urllib.parse

import fsspec

from collectors.tasks import TaskSpec
from sandboxes.web.config import default_allowed_origins, origin_of
from schemas.records import Task


def parse_origin(value: str) -> str:
    """`https://Example.com:443/` -> `https://example.com`; ValueError for anything but http(s)."""
    parts = urllib.parse.urlsplit(value.strip())
    origin = origin_of(value.strip())
    if parts.scheme.lower() not in ("http", "https") or not origin:
        raise ValueError(f"{value!r} is not an http(s) origin such as https://example.com")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{value!r} is a URL, not an origin: give scheme://host[:port] only")
    return origin


def url_task(url: str) -> TaskSpec:
    digest = hashlib.sha1(url.encode()).hexdigest()[:10]
    host = urllib.parse.urlsplit(url).hostname or "site"
    task = Task(
        id=f"url-{host}-{digest}",
        instruction=f"Explore {url}",
        metadata={"start_url": url, "allowed_origins": [origin_of(url)], "category": "start-url"},
    )
    return TaskSpec(task=task)


def parse_start_urls(lines: list[str], path: str) -> list[TaskSpec]:
    """Tasks from the file's lines; ValueError naming every bad line (file:line) or an empty file."""
    specs: dict[str, TaskSpec] = {}
    problems = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = urllib.parse.urlsplit(line)
        if parts.scheme.lower() not in ("http", "https") or not origin_of(line) or " " in line:
            problems.append(f"{path}:{number}: {line[:80]!r} is not an http(s) URL")
            continue
        specs.setdefault(line, url_task(line))
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ValueError("; ".join(problems[:5]) + more + "; give one http(s) URL per line")
    if not specs:
        raise ValueError(f"{path} holds no URLs; give one http(s) URL per line")
    return list(specs.values())


def load_start_urls(path: str) -> list[TaskSpec]:
    """Read a start-URL file (local path or fsspec URI). OSError if unreadable, ValueError if bad."""
    with fsspec.open(path, "r", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return parse_start_urls(lines, path)


def apply_allowed_origins(tasks: list[TaskSpec], extra: list[str]) -> list[TaskSpec]:
    """Each task may also reach the `extra` origins; a task without its own list starts from the
    embedded sites (the sandbox's default)."""
    if not extra:
        return tasks
    for spec in tasks:
        metadata = spec.task.metadata
        own = list(metadata.get("allowed_origins") or default_allowed_origins())
        metadata["allowed_origins"] = own + [o for o in extra if o not in own]
    return tasks
