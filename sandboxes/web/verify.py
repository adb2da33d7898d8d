"""Task verifiers of the web domain: what the episode left on the embedded sites' servers.

`site_state` reads the shop's server-side state for the episode's own session (its cookie) from
`GET /api/state`, and scores what the task lists, each listed check an equal share of the reward:

    {"kind": "site_state", "site": "shop",
     "cart": {"9": 2},                                   # product id -> quantity, exactly
     "order": {"items": {"9": 1}, "shipping": "express", "name": "...", "email": "...",
               "address": "...", "city": "...", "postcode": "...", "country": "..."},
     "message": {"email": "...", "topic": "Returns", "message_contains": "..."},
     "signed_in": "alice@example.com", "subscribed": "bob@example.com"}

Partial credit: a list of items (the cart, an order's items) scores, per product in the expected
or the found list, 1 for the right product at the right quantity, 0.5 for the right product at
another quantity, 0 for one missing or not asked for, averaged over those products (so the right
product at the wrong quantity is 0.5, the right one plus an unwanted one is 0.5). An order scores
its items' score times the share of its listed fields that match (an order of the wrong things is
worth nothing however well it is addressed); the best order placed in the episode counts, and none
is 0. A message scores the share of its listed fields that match, the best message counting.
Text compares case-insensitively with outer spaces dropped.

`page_url` checks the URL of the page the episode ended on: {"kind": "page_url", "url": "..."}
(the fragment is ignored), for reading tasks whose result is reaching a page.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.web.config import SITE_DOMAIN
from sandboxes.web.sites.shop import COOKIE as SHOP_COOKIE
from schemas.records import Verification

STATE_TIMEOUT_S = 10.0
VERIFIER_KINDS = ("site_state", "page_url")
CHECKS = ("cart", "order", "message", "signed_in", "subscribed")
ORDER_FIELDS = ("shipping", "name", "email", "address", "city", "postcode", "country")


def fetch_state(port: int, site: str, cookie: str) -> dict[str, Any]:
    """The site's `/api/state` for the session `cookie` (a `name=value` pair, or "" for none), asked
    of the loopback server directly with the site's Host header, as the browser reaches it."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/state",
        headers={"Host": f"{site}.{SITE_DOMAIN}", **({"Cookie": cookie} if cookie else {})},
    )
    with urllib.request.urlopen(request, timeout=STATE_TIMEOUT_S) as response:  # noqa: S310 (loopback)
        return json.loads(response.read())


def _text(value: object) -> str:
    return str(value).strip().casefold()


def items_score(expected: dict[str, int], found: dict[str, int]) -> float:
    """1 per product at the right quantity, 0.5 at another, 0 missing or unwanted; averaged."""
    products = set(expected) | set(found)
    if not products:
        return 1.0
    score = sum((1.0 if expected[p] == found[p] else 0.5) for p in products if p in expected and p in found)
    return score / len(products)


def _as_items(lines: list[dict[str, Any]]) -> dict[str, int]:
    return {str(line["product"]): int(line["quantity"]) for line in lines}


def _expected_items(value: object, check: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(isinstance(q, int) for q in value.values()):
        raise VerifierError(f"site_state: {check!r} must map product ids to quantities, got {value!r}")
    return {str(pid): qty for pid, qty in value.items()}


def _fields_share(expected: dict[str, Any], found: dict[str, Any]) -> tuple[float, list[str]]:
    """The share of `expected`'s fields that `found` matches, and the names of those that do not;
    a `<field>_contains` key asks for a substring instead of the whole value."""
    if not expected:
        return 1.0, []
    wrong = []
    for key, want in expected.items():
        name, contains = (key[: -len("_contains")], True) if key.endswith("_contains") else (key, False)
        have = _text(found.get(name, ""))
        if not (_text(want) in have if contains else _text(want) == have):
            wrong.append(name)
    return 1 - len(wrong) / len(expected), wrong


def _check_cart(expected: object, state: dict[str, Any]) -> tuple[float, str]:
    found = _as_items(state["cart"])
    score = items_score(_expected_items(expected, "cart"), found)
    return score, f"cart {found or 'empty'}"


def _check_order(expected: object, state: dict[str, Any]) -> tuple[float, str]:
    if not isinstance(expected, dict):
        raise VerifierError(f"site_state: 'order' must be an object, got {expected!r}")
    want_items = _expected_items(expected.get("items", {}), "order.items")
    want_fields = {k: v for k, v in expected.items() if k != "items"}
    placed = [o for o in state["orders"] if o.get("placed_in_session")]
    if not placed:
        return 0.0, "no order was placed"
    best, note = 0.0, ""
    for order in placed:
        share, wrong = _fields_share(want_fields, order)
        score = items_score(want_items, _as_items(order["items"])) * share
        if score >= best:
            best = score
            note = f"order #{order['number']} items {_as_items(order['items'])}" + (
                f", wrong fields {wrong}" if wrong else ""
            )
    return best, note


def _check_message(expected: object, state: dict[str, Any]) -> tuple[float, str]:
    if not isinstance(expected, dict) or not expected:
        raise VerifierError(f"site_state: 'message' must be a non-empty object, got {expected!r}")
    if not state["messages"]:
        return 0.0, "no message was sent"
    scored = [_fields_share(expected, message) for message in state["messages"]]
    share, wrong = max(scored, key=lambda s: s[0])
    return share, f"{len(scored)} message(s); the best" + (f" has wrong {wrong}" if wrong else " matches")


def _equal(name: str) -> Callable[[object, dict[str, Any]], tuple[float, str]]:
    def check(expected: object, state: dict[str, Any]) -> tuple[float, str]:
        found = state[name]
        return (1.0 if _text(expected) == _text(found) else 0.0), f"{name} {found!r}"

    return check


_CHECKERS: dict[str, Callable[[object, dict[str, Any]], tuple[float, str]]] = {
    "cart": _check_cart,
    "order": _check_order,
    "message": _check_message,
    "signed_in": _equal("signed_in"),
    "subscribed": _equal("subscribed"),
}


def score_site_state(verifier: dict[str, Any], state: dict[str, Any]) -> Verification:
    """Score a `site_state` verifier against the state a site reported (see the module doc)."""
    asked = [name for name in CHECKS if name in verifier]
    unknown = set(verifier) - set(CHECKS) - {"kind", "site"}
    if unknown or not asked:
        raise VerifierError(
            f"site_state: needs one or more of {list(CHECKS)}"
            + (f"; unknown key(s) {sorted(unknown)}" if unknown else "")
        )
    details: dict[str, Any] = {}
    lines = []
    for name in asked:
        score, note = _CHECKERS[name](verifier[name], state)
        details[name] = {"score": score, "found": note}
        lines.append(f"{name}: {score:.2f} ({note})")
    reward = sum(d["score"] for d in details.values()) / len(details)
    output = "\n".join(lines) + "\nstate: " + json.dumps(state, sort_keys=True)
    output = output[-VERIFIER_OUTPUT_CHARS:]
    return Verification(verifier="site_state", reward=reward, output=output, details=details)


def score_page_url(verifier: dict[str, Any], url: str) -> Verification:
    want = verifier.get("url")
    if not isinstance(want, str) or not want:
        raise VerifierError(f"page_url: needs a 'url' string, got {want!r}")
    matched = urllib.parse.urldefrag(url)[0] == urllib.parse.urldefrag(want)[0]
    return Verification(
        verifier="page_url",
        reward=1.0 if matched else 0.0,
        output=f"the episode ended on {url}; expected {want}",
        details={"url": url, "expected": want},
    )


def verify_web(verifier: dict[str, Any], cookies: list[dict[str, Any]], port: int, url: str) -> Verification:
    """Run a `site_state` or `page_url` verifier, given the episode's browser cookies, the sites
    server's port and the active page's URL."""
    if verifier["kind"] == "page_url":
        return score_page_url(verifier, url)
    site = verifier.get("site", "shop")
    if site != "shop":
        raise VerifierError(f"site_state: only the shop keeps state, not {site!r}")
    cookie = next((f"{c['name']}={c['value']}" for c in cookies if c["name"] == SHOP_COOKIE), "")
    try:
        state = fetch_state(port, site, cookie)
    except (OSError, ValueError) as exc:  # URLError is an OSError
        raise VerifierError(f"site_state: cannot read {site}'s /api/state: {exc}") from exc
    return score_site_state(verifier, state)
