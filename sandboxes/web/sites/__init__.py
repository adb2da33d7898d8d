"""The embedded sites, all on one loopback server and told apart by Host header:
`shop.agentworld.test`, `docs.agentworld.test`, `lab.agentworld.test` (the browser maps the names to
the server's port). A request for any other host gets an index of the sites.
"""

from __future__ import annotations

from html import escape

from sandboxes.http_server import App, LocalHTTPServer, Request, Response
from sandboxes.web.config import SITE_DOMAIN, SITES, site_url
from sandboxes.web.sites.docs import docs_app
from sandboxes.web.sites.lab import lab_app
from sandboxes.web.sites.shop import ShopApp


def sites_app() -> App:
    """One app serving every embedded site by host name (fresh shop state)."""
    apps: dict[str, App] = {"shop": ShopApp(), "docs": docs_app(), "lab": lab_app}
    assert set(apps) == set(SITES)

    def route(request: Request) -> Response:
        site = request.host.lower().removesuffix(f".{SITE_DOMAIN}")
        if site in apps:
            return apps[site](request)
        links = "".join(f'<li><a href="{site_url(s)}">{escape(site_url(s))}</a></li>' for s in SITES)
        return Response(
            404,
            "<!DOCTYPE html><html><head><title>Embedded sites</title></head><body><h1>Embedded sites</h1>"
            f"<p>This server answers by host name; open one of:</p><ul>{links}</ul></body></html>",
        )

    return route


def start_sites_server(port: int = 0) -> LocalHTTPServer:
    """Start the embedded sites on 127.0.0.1 (port 0: a free one); `server.port` says which."""
    return LocalHTTPServer({"/": sites_app()}, port=port).start()


__all__ = ["sites_app", "start_sites_server"]
