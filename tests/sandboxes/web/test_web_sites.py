"""The embedded sites over real HTTP (no browser): the shop's flows, the docs, the lab, the index."""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from sandboxes.http_server import LocalHTTPServer
from sandboxes.web.sites import start_sites_server
from sandboxes.web.sites.shop import checkout_errors


class Visitor:
    """One browser-like client: keeps cookies, follows redirects, sends the site's Host header."""

    def __init__(self, server: LocalHTTPServer, site: str) -> None:
        self.server, self.host = server, f"{site}.agentworld.test"
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def open(self, path: str, form: dict[str, str] | None = None) -> tuple[int, str, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.server.url(path), data=data, headers={"Host": self.host})
        try:
            with self.opener.open(request, timeout=10) as response:
                return response.status, urllib.parse.urlsplit(response.url).path, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, path, exc.read().decode()


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHTTPServer]:
    made = start_sites_server()
    yield made
    made.close()


def test_search_paginates(server: LocalHTTPServer) -> None:
    visitor = Visitor(server, "shop")
    _, _, page1 = visitor.open("/products?q=&category=Kitchen")
    assert "Showing 1-5 of 6 results" in page1 and 'rel="next"' in page1
    _, _, page2 = visitor.open("/products?q=&category=Kitchen&page=2")
    assert "Showing 6-6 of 6 results" in page2 and 'rel="prev"' in page2
    _, _, none = visitor.open("/products?q=unicorn")
    assert "No products match &quot;unicorn&quot;" in none


def test_checkout_validates_then_places_an_order(server: LocalHTTPServer) -> None:
    visitor = Visitor(server, "shop")
    status, path, _ = visitor.open("/cart/add", {"product": "3", "quantity": "2"})
    assert (status, path) == (200, "/cart")
    status, _, page = visitor.open("/checkout", {"name": "", "email": "nope", "postcode": "!"})
    assert status == 200 and "Please correct" in page
    for message in (
        "Enter your full name",
        "Enter an email address like name@example.com",
        "Choose a country",
    ):
        assert message in page
    status, path, _ = visitor.open(
        "/signin", {"email": "alice@example.com", "password": "wonderland", "next": "/cart"}
    )
    assert path == "/cart"
    form = {
        "name": "Alice Liddell",
        "email": "alice@example.com",
        "address": "12 Rabbit Hole Lane",
        "city": "Oxford",
        "postcode": "OX1 1AA",
        "country": "United Kingdom",
        "shipping": "express",
        "agree": "on",
    }
    assert checkout_errors(form) == {}
    status, path, page = visitor.open("/checkout", form)
    assert path == "/orders/10600" and "Thank you! Your order has been placed." in page
    _, _, orders = visitor.open("/orders")
    assert "#10600" in orders and "#10231" in orders
    _, _, cart = visitor.open("/cart")
    assert "Your cart is empty." in cart


def test_sessions_are_per_visitor_and_orders_need_sign_in(server: LocalHTTPServer) -> None:
    first, second = Visitor(server, "shop"), Visitor(server, "shop")
    first.open("/cart/add", {"product": "1"})
    assert "Cart (1)" in first.open("/")[2]
    assert "Cart (0)" in second.open("/")[2]
    assert second.open("/orders")[1] == "/signin"
    _, _, page = second.open("/signin", {"email": "alice@example.com", "password": "wrong"})
    assert "Email or password is incorrect" in page


def test_docs_lab_and_index(server: LocalHTTPServer) -> None:
    status, _, docs = Visitor(server, "docs").open("/library/functions.html")
    assert status == 200 and "Built-in Functions" in docs
    status, _, landed = Visitor(server, "lab").open("/landed?via=test")
    assert status == 200 and "Arrived by test." in landed
    status, _, index = Visitor(server, "elsewhere").open("/")
    assert status == 404 and "http://shop.agentworld.test/" in index
    assert Visitor(server, "shop").open("/no/such/page")[0] == 404
