"""The shop: a stateful multi-page application (sign-in, search with pagination, a cart, a checkout
form with validation errors, modal dialogs, an orders table), one session per browser cookie.

Forms post back and redirect (303) on success, as server-rendered stores do, so each page the
agent sees comes from a real navigation.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable

from sandboxes.http_server import Request, Response
from sandboxes.web.sites import shop_pages as pages
from sandboxes.web.sites.shop_api import state_response
from sandboxes.web.sites.shop_data import (
    ACCOUNTS,
    CATEGORIES,
    COUNTRIES,
    PRODUCTS,
    PRODUCTS_BY_ID,
    SHIPPING,
    Order,
    Session,
    Sessions,
    search,
)

COOKIE = "shop_session"
PER_PAGE = 5
ORDER_DATE = "2026-11-30"  # fixed, so a replay sees the same order pages
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")


def _form(request: Request) -> dict[str, str]:
    parsed = urllib.parse.parse_qs(request.body.decode(errors="replace"), keep_blank_values=True)
    return {k: v[0].strip() for k, v in parsed.items()}


def _arg(request: Request, name: str) -> str:
    return (request.query.get(name) or [""])[0]


def _redirect(location: str) -> Response:
    return Response(303, "", headers={"Location": location})


def _safe_next(url: str) -> str:
    return url if url.startswith("/") and not url.startswith("//") else "/orders"


class ShopApp:
    def __init__(self) -> None:
        self.sessions = Sessions()

    def __call__(self, request: Request) -> Response:
        cookies = dict(
            part.strip().split("=", 1) for part in request.headers.get("cookie", "").split(";") if "=" in part
        )
        token, session, new = self.sessions.get(cookies.get(COOKIE, ""))
        response = self.route(request, session)
        if new:
            response.headers["Set-Cookie"] = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax"
        return response

    def route(self, request: Request, session: Session) -> Response:
        path = request.path.rstrip("/") or "/"
        if path == "/static/shop.css":
            return Response(200, pages.CSS, "text/css; charset=utf-8")
        if path == "/static/shop.js":
            return Response(200, pages.SCRIPT, "text/javascript; charset=utf-8")
        post = request.method == "POST"
        if path == "/api/state" and not post:
            return state_response(session)
        handlers: dict[str, Callable[[Request, Session], Response]] = {
            "/": self.home,
            "/products": self.products,
            "/cart": self.cart,
            "/checkout": self.checkout,
            "/signin": self.signin,
            "/orders": self.orders,
            "/contact": self.contact,
        }
        posts: dict[str, Callable[[Request, Session], Response]] = {
            "/cart/add": self.cart_add,
            "/cart/remove": self.cart_remove,
            "/cart/empty": self.cart_empty,
            "/signout": self.signout,
            "/subscribe": self.subscribe,
        }
        if post and path in posts:
            return posts[path](request, session)
        if path in handlers:
            return handlers[path](request, session)
        if match := re.fullmatch(r"/product/(\d+)", path):
            product = PRODUCTS_BY_ID.get(int(match[1]))
            if product is not None:
                return self.page(product.name, pages.product_page(product), session)
        if match := re.fullmatch(r"/orders/(\d+)", path):
            return self.order(int(match[1]), request, session)
        return self.page("Not found", pages.not_found(request.path), session, status=404)

    def page(self, title: str, body: str, session: Session, status: int = 200) -> Response:
        return Response(status, pages.layout(title, body, session))

    def home(self, request: Request, session: Session) -> Response:
        featured = [PRODUCTS_BY_ID[i] for i in (1, 9, 15, 31)]
        return self.page("Home", pages.home(featured, CATEGORIES, session), session)

    def products(self, request: Request, session: Session) -> Response:
        query, category = _arg(request, "q").strip(), _arg(request, "category")
        category = category if category in CATEGORIES else ""
        results = search(query, category)
        pages_count = max(1, -(-len(results) // PER_PAGE))
        try:
            page = min(max(1, int(_arg(request, "page") or 1)), pages_count)
        except ValueError:
            page = 1
        title = f"Search: {query}" if query else (category or "All products")
        body = pages.products(results, query, category, page, PER_PAGE, CATEGORIES)
        return self.page(title, body, session)

    def cart(self, request: Request, session: Session) -> Response:
        lines = [(PRODUCTS_BY_ID[pid], qty) for pid, qty in session.cart.items()]
        added = PRODUCTS_BY_ID.get(int(_arg(request, "added") or 0))
        return self.page("Cart", pages.cart(session, lines, added.name if added else ""), session)

    def cart_add(self, request: Request, session: Session) -> Response:
        form = _form(request)
        product = PRODUCTS_BY_ID.get(
            int(form.get("product") or 0) if form.get("product", "").isdigit() else 0
        )
        if product is None or not product.stock:
            return self.page("Not found", pages.not_found("that product"), session, status=404)
        quantity = int(form["quantity"]) if form.get("quantity", "").isdigit() else 1
        session.cart[product.id] = min(product.stock, session.cart.get(product.id, 0) + max(1, quantity))
        return _redirect(f"/cart?added={product.id}")

    def cart_remove(self, request: Request, session: Session) -> Response:
        product = _form(request).get("product", "")
        session.cart.pop(int(product) if product.isdigit() else 0, None)
        return _redirect("/cart")

    def cart_empty(self, request: Request, session: Session) -> Response:
        session.cart.clear()
        return _redirect("/cart")

    def subscribe(self, request: Request, session: Session) -> Response:
        email = _form(request).get("email", "")
        session.subscribed = email if _EMAIL.fullmatch(email) else ""
        return _redirect("/")

    def signin(self, request: Request, session: Session) -> Response:
        next_url = _safe_next(_arg(request, "next") or "/orders")
        if request.method != "POST":
            return self.page("Sign in", pages.signin({}, {}, next_url), session)
        form = _form(request)
        email, password = form.get("email", "").lower(), form.get("password", "")
        errors = {}
        if not email:
            errors["email"] = "Enter your email address"
        elif not _EMAIL.fullmatch(email):
            errors["email"] = "Enter an email address like name@example.com"
        if not password:
            errors["password"] = "Enter your password"
        if not errors and ACCOUNTS.get(email, ("",))[0] != password:
            errors["password"] = "Email or password is incorrect"
        if errors:
            body = pages.signin(form, errors, _safe_next(form.get("next", "/orders")))
            return self.page("Sign in", body, session, status=200)
        session.sign_in(email)
        return _redirect(_safe_next(form.get("next", "/orders")))

    def signout(self, request: Request, session: Session) -> Response:
        session.email = session.name = ""
        return _redirect("/")

    def orders(self, request: Request, session: Session) -> Response:
        if not session.email:
            return _redirect("/signin?next=/orders")
        return self.page("Your orders", pages.orders(session, _arg(request, "sort")), session)

    def order(self, number: int, request: Request, session: Session) -> Response:
        if not session.email:
            return _redirect(f"/signin?next=/orders/{number}")
        found = next((o for o in session.orders if o.number == number), None)
        if found is None:
            return self.page("Not found", pages.not_found(request.path), session, status=404)
        body = pages.order_page(found, PRODUCTS_BY_ID, _arg(request, "placed") == "1")
        return self.page(f"Order #{number}", body, session)

    def checkout(self, request: Request, session: Session) -> Response:
        total = sum(PRODUCTS_BY_ID[pid].price * qty for pid, qty in session.cart.items())
        if not session.cart:
            return _redirect("/cart")
        if request.method != "POST":
            values = {"email": session.email, "name": session.name}
            return self.page("Checkout", pages.checkout(values, {}, total), session)
        form = _form(request)
        errors = checkout_errors(form)
        if errors:
            return self.page("Checkout", pages.checkout(form, errors, total), session)
        order = Order(
            session.next_order,
            ORDER_DATE,
            sorted(session.cart.items()),
            form.get("shipping", "standard"),
            form["name"],
            f"{form['address']}, {form['city']} {form['postcode']}, {form['country']}",
            fields={key: form[key] for key in ("email", "address", "city", "postcode", "country")},
        )
        session.next_order += 1
        session.orders.append(order)
        session.cart.clear()
        if not session.email:
            return self.page(f"Order #{order.number}", pages.order_page(order, PRODUCTS_BY_ID, True), session)
        return _redirect(f"/orders/{order.number}?placed=1")

    def contact(self, request: Request, session: Session) -> Response:
        if request.method != "POST":
            return self.page("Contact us", pages.contact({"email": session.email}, {}, False), session)
        form = _form(request)
        errors = {}
        if not _EMAIL.fullmatch(form.get("email", "")):
            errors["email"] = "Enter an email address like name@example.com"
        if len(form.get("message", "")) < 10:
            errors["message"] = "Write a message of at least 10 characters"
        if not errors:
            session.messages.append({key: form.get(key, "") for key in ("email", "topic", "message")})
        return self.page("Contact us", pages.contact(form, errors, not errors), session)


def checkout_errors(form: dict[str, str]) -> dict[str, str]:
    """Field name -> the message shown next to it; empty when the order can be placed."""
    errors = {}
    if not form.get("name"):
        errors["name"] = "Enter your full name"
    if not _EMAIL.fullmatch(form.get("email", "")):
        errors["email"] = "Enter an email address like name@example.com"
    if not form.get("address"):
        errors["address"] = "Enter your street address"
    if not form.get("city"):
        errors["city"] = "Enter your city"
    if not re.fullmatch(r"[A-Za-z0-9 -]{3,10}", form.get("postcode", "")):
        errors["postcode"] = "Enter a valid postcode"
    if form.get("country") not in COUNTRIES:
        errors["country"] = "Choose a country"
    if form.get("shipping", "standard") not in SHIPPING:
        errors["shipping"] = "Choose a shipping option"
    if not form.get("agree"):
        errors["agree"] = "You must accept the terms and conditions"
    return errors


__all__ = ["PRODUCTS", "ShopApp", "checkout_errors"]
