"""HTML of the shop's pages: plain server-rendered markup with a little script (the modal dialogs)."""

from __future__ import annotations

from html import escape

from sandboxes.web.sites.shop_data import COUNTRIES, SHIPPING, Order, Product, Session

CSS = """body{font-family:sans-serif;margin:0;color:#222}header{background:#234;color:#fff;padding:8px 16px}
header a{color:#fff;margin-right:12px}main{padding:16px;max-width:960px}.error{color:#b00}
.field-error{color:#b00;font-size:.9em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px}
.grid{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;padding:8px;width:200px}
dialog::backdrop{background:rgba(0,0,0,.4)}.notice{background:#efe;padding:8px}"""

SCRIPT = """document.querySelectorAll('[data-opens]').forEach(button => {
  button.addEventListener('click', () => document.getElementById(button.dataset.opens).showModal());
});
document.querySelectorAll('dialog [data-close]').forEach(button => {
  button.addEventListener('click', () => button.closest('dialog').close());
});"""


def money(value: float) -> str:
    return f"${value:,.2f}"


def layout(title: str, body: str, session: Session) -> str:
    account = (
        f"<span>Signed in as {escape(session.name)}</span> "
        '<form method="post" action="/signout" style="display:inline"><button>Sign out</button></form>'
        if session.email
        else '<a href="/signin">Sign in</a>'
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} - Agentworld Shop</title>
<link rel="stylesheet" href="/static/shop.css"></head>
<body><header><nav aria-label="Main">
<a href="/">Home</a><a href="/products">Products</a><a href="/cart">Cart ({session.cart_count()})</a>
<a href="/orders">Orders</a><a href="/contact">Contact</a> {account}
</nav></header>
<main>{body}</main>
<footer><p>Agentworld Shop - a demo store. Prices in US dollars.</p></footer>
<script src="/static/shop.js"></script></body></html>"""


def product_card(product: Product) -> str:
    stock = "In stock" if product.stock else "Out of stock"
    return (
        f'<article class="card"><h3><a href="/product/{product.id}">{escape(product.name)}</a></h3>'
        f"<p>{escape(product.category)} - {money(product.price)}</p><p>{stock}</p></article>"
    )


def home(featured: list[Product], categories: tuple[str, ...], session: Session) -> str:
    cards = "".join(product_card(p) for p in featured)
    links = "".join(f'<li><a href="/products?category={escape(c)}">{escape(c)}</a></li>' for c in categories)
    notice = (
        f'<p class="notice" role="status">Subscribed {escape(session.subscribed)}.</p>'
        if session.subscribed
        else ""
    )
    return f"""<h1>Welcome to the Agentworld Shop</h1>{notice}
<form action="/products" role="search"><label>Search products <input type="search" name="q"></label>
<button>Search</button></form>
<h2>Shop by category</h2><ul>{links}</ul>
<h2>Featured</h2><div class="grid">{cards}</div>
<button type="button" data-opens="newsletter">Subscribe to our newsletter</button>
<dialog id="newsletter" aria-labelledby="newsletter-title"><h2 id="newsletter-title">Newsletter</h2>
<form method="post" action="/subscribe"><label>Email <input type="email" name="email" required></label>
<button>Subscribe</button> <button type="button" data-close>Cancel</button></form></dialog>"""


def products(
    results: list[Product], query: str, category: str, page: int, per_page: int, categories: tuple[str, ...]
) -> str:
    pages = max(1, -(-len(results) // per_page))
    shown = results[(page - 1) * per_page : page * per_page]
    options = "".join(
        f'<option value="{escape(c)}"{" selected" if c == category else ""}>{escape(c)}</option>'
        for c in categories
    )
    base = f"/products?q={escape(query)}&amp;category={escape(category)}"
    if shown:
        first = (page - 1) * per_page + 1
        summary = f"<p>Showing {first}-{first + len(shown) - 1} of {len(results)} results</p>"
        rows = "".join(product_card(p) for p in shown)
    else:
        summary, rows = f"<p>No products match &quot;{escape(query)}&quot;.</p>", ""
    links = []
    if page > 1:
        links.append(f'<a href="{base}&amp;page={page - 1}" rel="prev">Previous</a>')
    for n in range(1, pages + 1):
        current = ' aria-current="page"' if n == page else ""
        links.append(f'<a href="{base}&amp;page={n}"{current}>{n}</a>')
    if page < pages:
        links.append(f'<a href="{base}&amp;page={page + 1}" rel="next">Next</a>')
    return f"""<h1>Products</h1>
<form action="/products" role="search">
<label>Search <input type="search" name="q" value="{escape(query)}"></label>
<label>Category <select name="category"><option value="">All categories</option>{options}</select></label>
<button>Search</button></form>{summary}<div class="grid">{rows}</div>
<nav aria-label="Pagination">{" ".join(links)}</nav>"""


def product_page(product: Product) -> str:
    quantities = "".join(f"<option>{n}</option>" for n in range(1, 6))
    buy = (
        f"""<form method="post" action="/cart/add"><input type="hidden" name="product" value="{product.id}">
<label>Quantity <select name="quantity">{quantities}</select></label> <button>Add to cart</button></form>"""
        if product.stock
        else "<p>Out of stock. <button disabled>Add to cart</button></p>"
    )
    return f"""<nav aria-label="Breadcrumb"><a href="/products">Products</a> &gt;
<a href="/products?category={escape(product.category)}">{escape(product.category)}</a></nav>
<h1>{escape(product.name)}</h1><p>{money(product.price)}</p><p>{escape(product.description)}</p>
<p>{product.stock} left in stock</p>{buy}"""


def cart(session: Session, lines: list[tuple[Product, int]], added: str) -> str:
    if not lines:
        return '<h1>Your cart</h1><p>Your cart is empty.</p><p><a href="/products">Browse products</a></p>'
    rows = "".join(
        f'<tr><td><a href="/product/{p.id}">{escape(p.name)}</a></td><td>{money(p.price)}</td><td>{qty}</td>'
        f'<td>{money(p.price * qty)}</td><td><form method="post" action="/cart/remove">'
        f'<input type="hidden" name="product" value="{p.id}">'
        f"<button>Remove {escape(p.name)}</button></form></td></tr>"
        for p, qty in lines
    )
    total = sum(p.price * qty for p, qty in lines)
    notice = f'<p class="notice" role="status">Added {escape(added)} to your cart.</p>' if added else ""
    return f"""<h1>Your cart</h1>{notice}<table><caption>Items in your cart</caption>
<thead><tr><th>Product</th><th>Price</th><th>Quantity</th><th>Subtotal</th><th>Actions</th></tr></thead>
<tbody>{rows}</tbody>
<tfoot><tr><th colspan="3">Total</th><td colspan="2">{money(total)}</td></tr></tfoot></table>
<p><a href="/checkout">Proceed to checkout</a></p>
<button type="button" data-opens="empty-cart">Empty cart</button>
<dialog id="empty-cart" aria-labelledby="empty-title"><h2 id="empty-title">Empty your cart?</h2>
<p>This removes all {session.cart_count()} items.</p><form method="post" action="/cart/empty">
<button>Yes, empty it</button> <button type="button" data-close>Keep my items</button></form></dialog>"""


def _field(
    label: str, name: str, value: str, errors: dict[str, str], kind: str = "text", extra: str = ""
) -> str:
    error = errors.get(name, "")
    described = f' aria-invalid="true" aria-describedby="{name}-error"' if error else ""
    message = f'<span class="field-error" id="{name}-error">{escape(error)}</span>' if error else ""
    return (
        f'<p><label for="{name}">{label}</label> <input id="{name}" name="{name}" type="{kind}" '
        f'value="{escape(value)}"{described}{extra}> {message}</p>'
    )


def error_summary(errors: dict[str, str]) -> str:
    if not errors:
        return ""
    items = "".join(f"<li>{escape(message)}</li>" for message in errors.values())
    return (
        f'<div role="alert" class="error"><p>Please correct {len(errors)} error(s):</p><ul>{items}</ul></div>'
    )


AUTOCOMPLETE_USERNAME = ' autocomplete="username"'


def signin(values: dict[str, str], errors: dict[str, str], next_url: str) -> str:
    return f"""<h1>Sign in</h1>{error_summary(errors)}
<form method="post" action="/signin" novalidate><input type="hidden" name="next" value="{escape(next_url)}">
{_field("Email", "email", values.get("email", ""), errors, "email", AUTOCOMPLETE_USERNAME)}
{_field("Password", "password", "", errors, "password")}
<p><label><input type="checkbox" name="remember"> Remember me</label></p><button>Sign in</button></form>
<p>Demo account: alice@example.com / wonderland</p>"""


def checkout(values: dict[str, str], errors: dict[str, str], total: float) -> str:
    country = values.get("country", "")
    options = "".join(f"<option{' selected' if c == country else ''}>{escape(c)}</option>" for c in COUNTRIES)
    shipping = values.get("shipping", "standard")
    radios = "".join(
        f'<label><input type="radio" name="shipping" value="{key}"{" checked" if key == shipping else ""}> '
        f"{escape(label)} {money(cost)}</label> "
        for key, (label, cost) in SHIPPING.items()
    )
    country_error = errors.get("country", "")
    agree_error = errors.get("agree", "")
    return f"""<h1>Checkout</h1><p>Goods total: {money(total)}</p>{error_summary(errors)}
<form method="post" action="/checkout" novalidate>
{_field("Full name", "name", values.get("name", ""), errors)}
{_field("Email", "email", values.get("email", ""), errors, "email")}
{_field("Street address", "address", values.get("address", ""), errors)}
{_field("City", "city", values.get("city", ""), errors)}
{_field("Postcode", "postcode", values.get("postcode", ""), errors)}
<p><label for="country">Country</label> <select id="country" name="country">
<option value="">Choose a country</option>
{options}</select> <span class="field-error">{escape(country_error)}</span></p>
<fieldset><legend>Shipping</legend>{radios}</fieldset>
<p><label><input type="checkbox" name="agree"{" checked" if values.get("agree") else ""}> I accept the terms
and conditions</label> <span class="field-error">{escape(agree_error)}</span></p>
<button>Place order</button></form>"""


def orders(session: Session, sort: str) -> str:
    listed = sorted(
        session.orders, key=(lambda o: o.total) if sort == "total" else (lambda o: o.date), reverse=True
    )
    rows = "".join(
        f'<tr><td><a href="/orders/{o.number}">#{o.number}</a></td><td>{o.date}</td>'
        f"<td>{sum(q for _, q in o.items)}</td><td>{money(o.total)}</td><td>{o.status}</td></tr>"
        for o in listed
    )
    return f"""<h1>Your orders</h1>
<p>Sort by: <a href="/orders?sort=date">Date</a> <a href="/orders?sort=total">Total</a></p>
<table><caption>Orders of {escape(session.name)}</caption><thead><tr><th>Order</th><th>Date</th><th>Items</th>
<th>Total</th><th>Status</th></tr></thead><tbody>{rows}</tbody></table>"""


def order_page(order: Order, products_by_id: dict[int, Product], placed: bool) -> str:
    rows = "".join(
        f"<tr><td>{escape(products_by_id[pid].name)}</td><td>{qty}</td>"
        f"<td>{money(products_by_id[pid].price * qty)}</td></tr>"
        for pid, qty in order.items
    )
    notice = '<p class="notice" role="status">Thank you! Your order has been placed.</p>' if placed else ""
    label, cost = SHIPPING[order.shipping]
    return f"""<h1>Order #{order.number}</h1>{notice}<p>Placed on {order.date} - {order.status}</p>
<p>Ship to {escape(order.name)}, {escape(order.address)}</p>
<table><thead><tr><th>Product</th><th>Quantity</th><th>Subtotal</th></tr></thead><tbody>{rows}
<tr><td>{escape(label)}</td><td></td><td>{money(cost)}</td></tr></tbody></table>
<p>Total: {money(order.total)}</p><p><a href="/orders">Back to your orders</a></p>"""


def contact(values: dict[str, str], errors: dict[str, str], sent: bool) -> str:
    if sent:
        thanks = "Thanks, we will reply within two working days."
        return f'<h1>Contact us</h1><p class="notice" role="status">{thanks}</p>'
    topic = values.get("topic", "")
    topics = "".join(
        f"<option{' selected' if t == topic else ''}>{t}</option>"
        for t in ("Order status", "Returns", "Product question", "Other")
    )
    message_error = errors.get("message", "")
    return f"""<h1>Contact us</h1>{error_summary(errors)}<form method="post" action="/contact" novalidate>
{_field("Your email", "email", values.get("email", ""), errors, "email")}
<p><label for="topic">Topic</label> <select id="topic" name="topic">{topics}</select></p>
<p><label for="message">Message</label><br>
<textarea id="message" name="message" rows="4">{escape(values.get("message", ""))}</textarea>
<span class="field-error">{escape(message_error)}</span></p><button>Send message</button></form>"""


def not_found(path: str) -> str:
    return (
        f"<h1>Page not found</h1><p>There is no page at {escape(path)}.</p>"
        '<p><a href="/">Go to the home page</a></p>'
    )
