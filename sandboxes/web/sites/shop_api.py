"""The shop's state as JSON (`GET /api/state`): what the visitor's session holds on the server.

Task verifiers read it after an episode, with the episode's own session cookie, so each browser
context sees only its own cart, orders and messages, however many sandboxes share the server. It
only reads: an agent that finds it learns nothing the shop's pages do not show.
"""

from __future__ import annotations

import json
from typing import Any

from sandboxes.http_server import Response
from sandboxes.web.sites.shop_data import FIRST_NEW_ORDER, PRODUCTS_BY_ID, Order, Session


def _items(pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"product": pid, "name": PRODUCTS_BY_ID[pid].name, "quantity": qty} for pid, qty in pairs]


def _order(order: Order) -> dict[str, Any]:
    return {
        "number": order.number,
        "placed_in_session": order.number >= FIRST_NEW_ORDER,
        "items": _items(order.items),
        "shipping": order.shipping,
        "name": order.name,
        **order.fields,
        "status": order.status,
        "total": order.total,
    }


def session_state(session: Session) -> dict[str, Any]:
    return {
        "site": "shop",
        "signed_in": session.email,
        "subscribed": session.subscribed,
        "cart": _items(sorted(session.cart.items())),
        "orders": [_order(order) for order in session.orders],
        "messages": list(session.messages),
    }


def state_response(session: Session) -> Response:
    body = json.dumps(session_state(session), sort_keys=True)
    return Response(200, body, "application/json", headers={"Cache-Control": "no-store"})
