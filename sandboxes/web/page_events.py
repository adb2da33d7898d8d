"""What pages do on their own between two observations: dialogs and downloads.

Dialogs (alert, confirm, prompt, beforeunload) are answered by the configured policy the moment
they open (a page's script waits on them), and each is recorded with how it was answered, so a
trajectory never shows `confirm()` answering "no" for no visible reason. Downloads are saved into
the sandbox's own folder, or refused, and recorded either way.
"""

from __future__ import annotations

import time
from pathlib import Path

from playwright.sync_api import Dialog, Download
from playwright.sync_api import Error as PlaywrightError

from sandboxes.web.config import WebConfig


class PageEvents:
    def __init__(self, config: WebConfig, download_dir: Path) -> None:
        self.config = config
        self.download_dir = download_dir
        self.dialogs: list[dict] = []
        self._downloads: list[Download] = []

    def on_dialog(self, dialog: Dialog) -> None:
        record = {"kind": dialog.type, "message": dialog.message, "default_text": dialog.default_value}
        try:
            if self.config.dialog_policy == "dismiss":
                dialog.dismiss()
                record["resolution"] = "dismissed"
            elif dialog.type == "prompt":
                text = dialog.default_value if self.config.prompt_text is None else self.config.prompt_text
                dialog.accept(text)
                record["resolution"] = f"accepted with {text!r}"
            else:
                dialog.accept()
                record["resolution"] = "accepted"
        except PlaywrightError as exc:  # the page closed under its dialog
            record["resolution"] = f"not answered: {str(exc).splitlines()[0]}"
        self.dialogs.append(record)

    def on_download(self, download: Download) -> None:
        self._downloads.append(download)

    def drain(self) -> tuple[list[dict], list[dict]]:
        """(dialogs, downloads) since the last call; a download is saved (waiting for it to finish)
        or its refusal recorded."""
        dialogs, self.dialogs = self.dialogs, []
        downloads, self._downloads = self._downloads, []
        return dialogs, [self._finish(download) for download in downloads]

    def _finish(self, download: Download) -> dict:
        name = Path(download.suggested_filename).name or "download"
        record: dict = {"name": name, "url": download.url}
        if self.config.downloads == "refuse":
            _cancel(download)
            record.update(saved=False, reason="downloads are refused in this sandbox")
            return record
        target = _free_path(self.download_dir / name)
        bound_s = self.config.download_timeout_ms / 1000
        try:
            if not _saved_within(download, target, bound_s):
                record.update(saved=False, reason=f"still arriving after {bound_s:g} s: cancelled")
                return record
        except PlaywrightError as exc:
            record.update(saved=False, reason=f"the download failed: {str(exc).splitlines()[0]}")
            return record
        record.update(saved=True, file=target.name, size=target.stat().st_size)
        return record


def _saved_within(download: Download, target: Path, timeout_s: float) -> bool:
    """Save `download` as `target` if it finishes arriving within `timeout_s`, else cancel it.

    `Download.save_as` waits for the whole download without a bound, and the sync API offers no
    way to ask whether a download has finished. So the save runs as a task on the sync API's own
    event loop (private attributes of the pinned Playwright), turned by the page's clock until it
    is done or the bound has passed."""
    task = download._loop.create_task(download._impl_obj.save_as(target))
    deadline = time.monotonic() + timeout_s
    while not task.done() and time.monotonic() < deadline:
        download.page.wait_for_timeout(20)
    if task.done():
        task.result()  # raises the download's own error
        return True
    _cancel(download)
    while not task.done():  # a cancelled save ends at once, with an error we have reported
        download.page.wait_for_timeout(5)
    task.exception()  # retrieved, so asyncio does not log it as never retrieved
    return False


def _cancel(download: Download) -> None:
    try:
        download.cancel()
    except PlaywrightError:
        pass  # already finished or failed: nothing arrives any more either way


def _free_path(path: Path) -> Path:
    """`path`, or `stem (2).ext`, ... when a file of that name was saved before."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem} ({n}){path.suffix}")
    return candidate


def event_lines(blocked: list[dict], dialogs: list[dict], downloads: list[dict]) -> list[str]:
    """Header lines of the observation for what happened besides the action's own effect."""
    lines = []
    for record in blocked:
        if record["kind"] in ("navigation", "frame", "websocket"):
            lines.append(f"Blocked: {record['kind']} to {record['url']} ({record['reason']})")
    for record in dialogs:
        default = f" (default {record['default_text']!r})" if record["kind"] == "prompt" else ""
        lines.append(f"Dialog: {record['kind']} {record['message']!r}{default} -> {record['resolution']}")
    for record in downloads:
        if record["saved"]:
            lines.append(f"Download: {record['file']} ({record['size']} bytes) saved")
        else:
            lines.append(f"Download: {record['name']} not saved: {record['reason']}")
    return lines
