"""The lab: small pages that exercise the sandbox's edge cases (slow loads, pages that navigate by
themselves, a DOM that never stops changing, links the sandbox must refuse). Nothing links to it
from the shop or the docs, so explorers do not wander in; tests and benchmarks open it directly.
"""

from __future__ import annotations

import time
import urllib.parse
from html import escape

from sandboxes.http_server import Request, Response

MAX_DELAY_MS = 20_000
PIXEL_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'


def _page(title: str, body: str, head: str = "") -> Response:
    return Response(
        200,
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>{head}</head>"
        f"<body>{body}</body></html>",
    )


def _delay_ms(request: Request, default: int) -> int:
    try:
        return max(0, min(MAX_DELAY_MS, int((request.query.get("ms") or [default])[0])))
    except ValueError:
        return default


def lab_app(request: Request) -> Response:
    path = request.path.rstrip("/") or "/"
    if path == "/":
        return _page(
            "Lab",
            '<h1>Lab</h1><ul><li><a href="/slow?ms=2000">Slow page</a></li>'
            '<li><a href="/timer?ms=1500">Timer</a></li>'
            '<li><a href="/refresh">Meta refresh</a></li><li><a href="/mutating">Mutating</a></li>'
            '<li><a href="/popup">Popup</a></li><li><a href="/file-link">Local file link</a></li></ul>',
        )
    if path == "/slow":  # the document is quick, an image on it is not: load waits for the image
        ms = _delay_ms(request, 2000)
        return _page(
            "Slow page",
            f'<h1>Slow page</h1><p>Loading a picture.</p><img alt="slow picture" '
            f'src="/slow-resource?ms={ms}">',
        )
    if path == "/slow-resource":
        time.sleep(_delay_ms(request, 2000) / 1000)
        return Response(200, PIXEL_SVG, "image/svg+xml")
    if path == "/slow-document":  # the server takes its time before the first byte
        time.sleep(_delay_ms(request, 2000) / 1000)
        return _page("Slow document", "<h1>Slow document</h1><p>Finally here.</p>")
    if path == "/timer":  # navigates by itself after a JavaScript timer (?slow=N: to a slow document)
        ms = _delay_ms(request, 1500)
        slow = (request.query.get("slow") or [""])[0]
        target = f"/slow-document?ms={int(slow)}" if slow.isdigit() else "/landed?via=timer"
        script = f"<script>setTimeout(() => {{ location.href = '{target}'; }}, {ms});</script>"
        return _page("Timer", f"<h1>Waiting for a timer</h1>{script}")
    if path == "/refresh":  # navigates by itself through a meta refresh
        return _page(
            "Refresh",
            "<h1>Refreshing soon</h1>",
            '<meta http-equiv="refresh" content="1.5;url=/landed?via=refresh">',
        )
    if path == "/landed":
        via = (request.query.get("via") or ["link"])[0]
        return _page("Landed", f"<h1>Landed</h1><p>Arrived by {escape(via)}.</p>")
    if path == "/mutating":  # the DOM changes every 5 ms, forever: settling must give up at its bound
        script = (
            "<script>let n = 0; "
            "setInterval(() => { document.getElementById('n').textContent = ++n; }, 5);</script>"
        )
        return _page("Mutating", f'<h1>Mutating</h1><p>Tick <span id="n">0</span></p>{script}')
    if path == "/popup":
        return _page(
            "Popup", '<h1>Popup</h1><a href="/landed?via=popup" target="_blank">Open in a new tab</a>'
        )
    if path == "/file-link":
        return _page("File link", '<h1>File link</h1><a href="file:///etc/passwd">Local file</a>')
    if path == "/link":  # a link to any URL, for the allowed/blocked origin tests
        target = (request.query.get("to") or ["/"])[0]
        return _page("Link", f'<h1>Link</h1><a href="{escape(target)}">Follow the link</a>')
    if path == "/widgets":  # one of every control the actions drive
        return _page("Widgets", WIDGETS)
    return Response(404, f"<h1>404 Not Found</h1><p>{escape(urllib.parse.unquote(request.path))}</p>")


WIDGETS = """<h1>Widgets</h1>
<p><label>Name <input id="name" name="name"></label></p>
<p><label>Colour <select id="colour"><option>Red</option><option>Green</option><option>Blue</option>
</select></label></p>
<p><button id="hover" onmouseover="this.textContent='Hovered'">Hover me</button></p>
<p><button id="dbl" ondblclick="this.textContent='Double-clicked'">Double-click me</button></p>
<p><button id="right" oncontextmenu="event.preventDefault(); this.textContent='Right-clicked'">
Right-click me</button></p>
<p><label>Keys <input id="keys"
 onkeydown="if (event.key === 'Enter') document.getElementById('out').textContent = 'Entered ' + this.value">
</label></p>
<p id="out">Nothing entered</p>
<div id="pad" style="width:300px;height:100px;background:#eee"
 onclick="this.textContent='Pad clicked at ' + event.offsetX + ',' + event.offsetY">Pad</div>
<div style="height:2000px"></div><p id="bottom">Bottom of the page</p>"""
