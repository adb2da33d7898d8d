"""The shop's catalogue, accounts and per-visitor sessions (in memory, keyed by a cookie).

The catalogue is fixed, so recorded pages and a replay in a fresh sandbox show the same products;
each browser context is a new visitor with an empty cart.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

CATEGORIES = ("Shoes", "Bags", "Kitchen", "Books", "Electronics", "Garden")
_ITEMS = {
    "Shoes": "Trail Running Shoes|Leather Oxford|Canvas Sneakers|Hiking Boots|Wool Slippers|Rain Boots",
    "Bags": "Waxed Canvas Backpack|Leather Tote|Weekender Duffel|Laptop Sleeve|Hip Pack|Market Basket",
    "Kitchen": "Cast Iron Skillet|Chef's Knife|Pour-Over Coffee Set|Bamboo Cutting Board|Enamel Dutch Oven"
    "|Spice Grinder",
    "Books": "The Pragmatic Gardener|Bread by Hand|A Field Guide to Birds|Night Sky Atlas|Knots and Splices"
    "|The Quiet Kitchen",
    "Electronics": "Noise-Cancelling Headphones|Bluetooth Speaker|USB-C Charger 65W|E-Reader|Smart Thermostat"
    "|Mechanical Keyboard",
    "Garden": "Pruning Shears|Raised Bed Kit|Watering Can 7L|Seed Starter Tray|Garden Kneeler|Compost Bin",
}
_DESCRIPTIONS = {
    "Shoes": "Comfortable for all-day wear, with a cushioned insole and a durable rubber outsole.",
    "Bags": "Built to carry daily essentials, with reinforced seams and an inner zip pocket.",
    "Kitchen": "A kitchen workhorse that is easy to clean and built to last for years.",
    "Books": "A practical, illustrated guide written for beginners and enthusiasts alike.",
    "Electronics": "Reliable everyday tech with a two-year warranty and free returns.",
    "Garden": "Sturdy garden gear for small plots, balconies and allotments.",
}
COUNTRIES = (
    "United Kingdom",
    "Ireland",
    "France",
    "Germany",
    "Netherlands",
    "Spain",
    "United States",
    "Canada",
)
SHIPPING = {"standard": ("Standard (3-5 days)", 4.95), "express": ("Express (next day)", 12.50)}


@dataclass(frozen=True)
class Product:
    id: int
    name: str
    category: str
    price: float
    stock: int
    description: str


def _catalogue() -> list[Product]:
    products = []
    for c, category in enumerate(CATEGORIES):
        for i, name in enumerate(_ITEMS[category].split("|")):
            pid = c * 6 + i + 1
            price = round(8 + (pid * 37 % 140) + (pid % 4) * 0.25 + 0.99, 2)
            stock = (pid * 7) % 13
            products.append(Product(pid, name, category, price, stock, _DESCRIPTIONS[category]))
    return products


PRODUCTS = _catalogue()
PRODUCTS_BY_ID = {p.id: p for p in PRODUCTS}
FIRST_NEW_ORDER = 10600  # orders from this number on were placed in the session, not seeded
ACCOUNTS = {"alice@example.com": ("wonderland", "Alice Liddell"), "bob@example.com": ("builder", "Bob Stone")}


@dataclass
class Order:
    number: int
    date: str
    items: list[tuple[int, int]]  # (product id, quantity)
    shipping: str
    name: str
    address: str
    status: str = "Processing"
    # The checkout form's fields as submitted (email, address, city, postcode, country), which
    # the state API reports one by one for the task verifiers; empty for the seeded past orders.
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        goods = sum(PRODUCTS_BY_ID[pid].price * qty for pid, qty in self.items)
        return round(goods + SHIPPING[self.shipping][1], 2)


def _past_orders(name: str) -> list[Order]:
    return [
        Order(10231, "2026-09-14", [(3, 1), (14, 2)], "standard", name, "12 Rabbit Hole Lane", "Delivered"),
        Order(10452, "2026-10-02", [(27, 1)], "express", name, "12 Rabbit Hole Lane", "Delivered"),
        Order(
            10577,
            "2026-11-21",
            [(8, 1), (33, 3), (20, 1)],
            "standard",
            name,
            "12 Rabbit Hole Lane",
            "Shipped",
        ),
    ]


@dataclass
class Session:
    email: str = ""
    name: str = ""
    cart: dict[int, int] = field(default_factory=dict)  # product id -> quantity
    orders: list[Order] = field(default_factory=list)
    next_order: int = FIRST_NEW_ORDER
    subscribed: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)  # contact forms sent, as submitted

    def sign_in(self, email: str) -> None:
        self.email, self.name = email, ACCOUNTS[email][1]
        if not self.orders:
            self.orders = _past_orders(self.name)

    def cart_count(self) -> int:
        return sum(self.cart.values())


class Sessions:
    """Visitor sessions by cookie; the oldest are forgotten past `limit` so memory stays flat."""

    def __init__(self, limit: int = 5000) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.limit = limit

    def get(self, token: str) -> tuple[str, Session, bool]:
        """(token, session, is_new) for a cookie value, making a new session for an unknown one."""
        with self._lock:
            if token in self._sessions:
                self._sessions.move_to_end(token)
                return token, self._sessions[token], False
            token = secrets.token_hex(16)
            self._sessions[token] = Session()
            while len(self._sessions) > self.limit:
                self._sessions.popitem(last=False)
            return token, self._sessions[token], True


def search(query: str, category: str) -> list[Product]:
    words = query.lower().split()
    found = []
    for product in PRODUCTS:
        if category and product.category != category:
            continue
        haystack = f"{product.name} {product.category} {product.description}".lower()
        if all(word in haystack for word in words):
            found.append(product)
    return found
