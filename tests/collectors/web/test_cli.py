"""`python -m collectors.web` as a user runs it: a subprocess, real Chromium, real local sites; the
refusals in this process (its `main(argv)`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.web import parse_action
from sandboxes.web.config import origin_of
from tests.collectors.conftest import ROOT, assert_exactly_once, run_main
from tests.support_s3 import running_s3_server, s3_objects

EMBEDDED = {"http://shop.agentworld.test", "http://docs.agentworld.test"}


def run_web(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "collectors.web", "--no-progress", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_help_shows_examples_and_the_web_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("web", "--help") == 0
    printed = capsys.readouterr().out
    for text in ("--browsers", "--start-urls", "--allow-origin", "--screenshots", "examples:"):
        assert text in printed


def test_a_bad_start_urls_file_names_its_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("# my sites\nhttps://example.com/\nnot a url\n\nftp://files.example.com/x\n")
    assert run_main("web", "--start-urls", str(urls), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert f"{urls}:3: 'not a url' is not an http(s) URL" in err
    assert f"{urls}:5:" in err and "one http(s) URL per line" in err
    assert run_main("web", "--start-urls", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "out")) == 2
    assert "cannot read --start-urls" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n")
    assert run_main("web", "--start-urls", str(empty), "--out", str(tmp_path / "out")) == 2
    assert "holds no URLs" in capsys.readouterr().err


def test_a_bad_origin_and_a_missing_browser_say_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main("web", "--allow-origin", "https://example.com/path", "--out", str(tmp_path / "a")) == 2
    assert "scheme://host[:port] only" in capsys.readouterr().err
    assert run_main("web", "--chromium", str(tmp_path / "no-chromium"), "--out", str(tmp_path / "b")) == 2
    err = capsys.readouterr().err
    assert "Chromium not found" in err and "apt-get install chromium" in err


@pytest.mark.chromium
def test_embedded_defaults_write_valid_trajectories_and_a_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "web"
    args = ("--browsers", "2", "--episodes", "3", "--max-steps", "4", "--seed", "5", "--out", str(out))
    first = run_web(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    found = assert_exactly_once(out, 3)
    for trajectory in found:
        assert trajectory.domain == "web" and trajectory.policy.name == "web-explorer"
        assert trajectory.outcome.status in ("completed", "truncated"), trajectory.outcome
        assert origin_of(trajectory.task.metadata["start_url"]) in EMBEDDED
        observations = [trajectory.initial_observation] + [s.observation for s in trajectory.steps]
        for observation in observations:
            assert observation.format == "a11y_tree" and observation.text.startswith("URL: ")
            assert "page.html" in [a.name for a in observation.attachments]
            url = observation.data["url"]
            assert url == "about:blank" or origin_of(url) in EMBEDDED, url
        for step in trajectory.steps:
            assert parse_action(step.action.kind, step.action.arguments).text == step.action.text
    assert sum(len(t.steps) for t in found) >= 3
    second = run_web(*args)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "trajectories written: 0 (skipped as already finished: 3" in second.stdout
    assert_exactly_once(out, 3)


def _site(request: Request) -> Response:
    pages = {"/": ("Start", '<a href="/about">About us</a> <a href="/form">Form</a>')}
    pages["/about"] = ("About", '<p>We make lamps.</p><a href="/">Start</a>')
    pages["/form"] = ("Form", '<form action="/"><label>Email <input name="email" type="email"></label>'
                      "<button>Send</button></form>")  # fmt: skip
    title, body = pages.get(request.path, ("Missing", "<p>no such page</p>"))
    html = (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
    )
    return Response(200 if request.path in pages else 404, html)


def _gone_url() -> str:
    """The start page of a site whose server is closed: nothing listens there any more."""
    with LocalHTTPServer({"/": _site}) as server:
        return server.url("/")


def run_start_urls(
    tmp_path: Path, urls: list[str], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m collectors.web --start-urls FILE ARGS`, FILE (tmp_path/urls.txt) holding `urls`."""
    file = tmp_path / "urls.txt"
    file.write_text("".join(f"{url}\n" for url in urls))
    return run_web("--start-urls", str(file), *args, env=env)


@pytest.mark.chromium
def test_start_urls_record_a_site_of_our_own_with_screenshots_and_stay_on_its_origin(tmp_path: Path) -> None:
    with LocalHTTPServer({"/": _site}) as server:
        start = server.url("/")
        out = tmp_path / "mine"
        lines = ["# a real HTTP server on loopback", start, start]
        result = run_start_urls(
            tmp_path, lines, "--episodes", "2", "--max-steps", "6", "--screenshots", "--out", str(out)
        )
    assert result.returncode == 0, result.stderr[-2000:]
    found = assert_exactly_once(out, 2)
    origin = origin_of(start)
    for trajectory in found:
        assert trajectory.task.metadata["allowed_origins"] == [origin]
        assert trajectory.initial_observation.data["title"] == "Start"
        names = [a.name for a in trajectory.initial_observation.attachments]
        assert "screenshot.png" in names and "page.html" in names
        for step in trajectory.steps:
            url = step.observation.data["url"]
            assert url == "about:blank" or origin_of(url) == origin, url
            if step.action.kind == "goto":
                assert origin_of(step.action.arguments["url"]) == origin


def test_browsers_is_the_fleet_size_and_sandboxes_still_works() -> None:
    from collectors.cli import parse_args
    from collectors.web.__main__ import SPEC

    assert parse_args(SPEC, ["--browsers", "3", "--out", "x"]).sandboxes == 3
    assert parse_args(SPEC, ["--sandboxes", "2", "--out", "x"]).sandboxes == 2
    with pytest.raises(SystemExit):
        parse_args(SPEC, ["--browsers", "0", "--out", "x"])


@pytest.mark.chromium
def test_unreachable_start_urls_are_error_episodes_and_the_run_exits_non_zero(tmp_path: Path) -> None:
    gone = _gone_url()
    out = tmp_path / "unreachable"
    result = run_start_urls(
        tmp_path, [gone, f"{gone}other"], "--episodes", "2", "--max-steps", "3", "--out", str(out)
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "every episode ended in an error (2)" in result.stderr
    found = assert_exactly_once(out, 2)
    for trajectory in found:
        assert trajectory.outcome.status == "error" and trajectory.steps == []
        assert "could not be loaded: Page.goto: net::ERR_CONNECTION_REFUSED" in trajectory.outcome.error
    # One reachable start URL among them: the run counts as done.
    with LocalHTTPServer({"/": _site}) as server:
        urls = [gone, server.url("/")]
        result = run_start_urls(
            tmp_path, urls, "--episodes", "2", "--max-steps", "3", "--out", str(tmp_path / "mixed")
        )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.chromium
def test_a_run_whose_every_episode_failed_exits_non_zero_with_an_object_store_out(tmp_path: Path) -> None:
    with running_s3_server() as s3:
        out = f"s3://{s3.bucket()}/run"
        args = ("--episodes", "1", "--max-steps", "2", "--out", out)
        result = run_start_urls(tmp_path, [_gone_url()], *args, env=s3.child_env())
        keys = s3_objects(s3, out.split("/")[2], "run/")
    assert any(key.endswith("summary.json") for key in keys), keys
    assert result.returncode == 1, result.stderr[-2000:]
    assert "every episode ended in an error (1)" in result.stderr
