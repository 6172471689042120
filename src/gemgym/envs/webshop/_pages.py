"""WebShop's pages: one model of each page, rendered as HTML, as ``text`` and as ``text_rich``.

Each page is built once as a list of visible text nodes (in document order, each with its role:
plain text, a button, a product link or an option) together with its HTML. The text modes are
read off the nodes as GEM reads them off its HTML with BeautifulSoup:

* ``text``: the stripped texts after the instruction, joined by ``" [SEP] "``;
* ``text_rich``: one line a text, buttons as ``[button] X [button_]``, the chosen options and
  the products already visited as ``[clicked button] X [clicked button_]``, with ``"You have
  clicked X."`` lines first for the chosen options.

The HTML is self-contained (inline CSS, no scripts, no network): save it and open it in a
browser to see the page the agent acts on. It keeps WebShop's ids and classes
(``instruction-text``, ``search_input``, ``btn``, ``product-link``, radio inputs named by the
option) so WebShop's HTML parsers read it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gemgym.envs.webshop._catalogue import Product

__all__ = ["Clickable", "Page", "PageKind", "render"]

PageKind = Literal["search", "results", "item", "sub", "done"]
Role = Literal["text", "button", "product", "option", "instruction", "label", "logo"]

PRODUCT_WINDOW = 10
"""Products a results page shows (WebShop's ``PRODUCT_WINDOW``)."""

SUB_PAGES = ("description", "features", "reviews", "attributes")
"""The item sub pages, by the (lower-case) name of the button that opens them."""

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;margin:0;background:#f5f5f5;color:#222}
.container{max-width:960px;margin:24px auto;padding:16px;background:#fff;border-radius:6px}
#instruction-text{background:#fff8e1;border:1px solid #f0d98c;padding:8px 12px;border-radius:4px}
#logo h2{margin:0 0 12px}
.btn{padding:6px 12px;margin:4px 4px 4px 0;border:1px solid #2e6da4;border-radius:4px;
background:#337ab7;color:#fff;cursor:default}
.btn-success{background:#5cb85c;border-color:#4cae4c}.purchase{background:#f0ad4e;border-color:#eea236}
.result{border-top:1px solid #ddd;padding:8px 0}.product-link{font-weight:bold}
.radio-toolbar label{display:inline-block;padding:4px 10px;margin:2px;border:1px solid #ccc;
border-radius:4px}.radio-toolbar input{display:none}
.radio-toolbar input:checked+label{background:#337ab7;color:#fff;border-color:#2e6da4}
#search_input{width:70%;padding:6px}.product-info{white-space:pre-wrap}
""".strip()


@dataclass(frozen=True)
class Clickable:
    """What clicking a name does: a button, a product link or an option (of ``option_name``)."""

    kind: Literal["button", "product", "option"]
    option_name: str | None = None


@dataclass
class Page:
    """A rendered page: its text nodes, its HTML and what can be clicked on it."""

    kind: PageKind
    nodes: list[tuple[Role, str]] = field(default_factory=list)
    html: str = ""
    clickables: dict[str, Clickable] = field(default_factory=dict)
    has_search_bar: bool = False

    def text(self) -> str:
        """GEM's ``text`` mode: the texts after the instruction, ``" [SEP] "``-joined."""
        parts = [t.strip() for role, t in self.nodes]
        roles = [role for role, _ in self.nodes]
        if "instruction" in roles:
            parts = parts[roles.index("instruction") + 1 :]
        return " [SEP] ".join(p for p in parts if p)

    def text_rich(self, chosen: Sequence[str], visited: set[str]) -> str:
        """GEM's ``text_rich`` mode (module docstring)."""
        lines: list[str] = []
        clicked: list[str] = []
        for role, t in self.nodes:
            if role in ("instruction", "label") or not t.strip():
                continue
            if role == "button":
                lines.append(f"[button] {t} [button_]")
            elif role == "option":
                if t in chosen:
                    lines.append(f"  [clicked button] {t} [clicked button_]")
                    clicked.append(f"You have clicked {t}.")
                else:
                    lines.append(f"  [button] {t} [button_]")
            elif role == "product":
                mark = "clicked button" if t.upper() in visited else "button"
                lines.append(f"\n[{mark}] {t} [{mark}_]")
            else:
                lines.append(t)
        head = "".join(f"{c}\n" for c in reversed(clicked))
        return head + "".join(f"{line}\n" for line in lines)


class _Builder:
    def __init__(self, kind: PageKind, instruction: str | None) -> None:
        self.page = Page(kind)
        self.body: list[str] = []
        self.option_values: list[tuple[str, str]] = []
        if instruction is not None:
            self.page.nodes += [("label", "Instruction:"), ("instruction", instruction)]
            self.body.append(
                '<div id="instruction-text"><h4>Instruction:<br>'
                f"{html.escape(instruction)}</h4></div>"
            )

    def raw(self, markup: str) -> None:
        self.body.append(markup)

    def text(self, text: str, tag: str = "p", cls: str = "", role: Role = "text") -> None:
        self.page.nodes.append((role, text))
        attr = f' class="{cls}"' if cls else ""
        self.body.append(f"<{tag}{attr}>{html.escape(text)}</{tag}>")

    def button(self, label: str, cls: str = "btn btn-primary") -> None:
        self.page.nodes.append(("button", label))
        self.page.clickables.setdefault(label.lower(), Clickable("button"))
        self.body.append(f'<button type="button" class="{cls}">{html.escape(label)}</button>')

    def product(self, p: Product) -> None:
        self.page.nodes.append(("product", p.asin))
        self.page.clickables.setdefault(p.asin.lower(), Clickable("product"))
        self.body.append(
            '<div class="result">'
            f'<h4 class="product-asin"><a class="product-link" href="#{html.escape(p.asin)}">'
            f"{html.escape(p.asin)}</a></h4>"
        )
        self.text(p.name, "h4", "product-title")
        self.text(p.price_tag, "h5", "product-price")
        self.body.append("</div>")

    def options(self, name: str, values: Sequence[str], chosen: Mapping[str, str]) -> None:
        self.text(name, "h4")
        self.body.append('<div class="radio-toolbar">')
        for i, value in enumerate(values):
            self.page.nodes.append(("option", value))
            self.option_values.append((value, name))
            rid = html.escape(f"radio_{name}{i}")
            checked = " checked" if chosen.get(name) == value else ""
            self.body.append(
                f'<input type="radio" id="{rid}" name="{html.escape(name)}" '
                f'value="{html.escape(value)}"{checked}><label for="{rid}">{html.escape(value)}</label>'
            )
        self.body.append("</div>")

    def done(self) -> Page:
        # options come after buttons and product links; a value in two options is the last one's
        for value, name in self.option_values:
            self.page.clickables[value] = Clickable("option", name)
        self.page.html = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>WebShop</title>'
            f'<style>{_CSS}</style></head>\n<body><div class="container">\n'
            + "\n".join(self.body)
            + "\n</div></body></html>\n"
        )
        return self.page


def search_page(instruction: str) -> Page:
    b = _Builder("search", None)
    b.page.nodes.append(("logo", "WebShop"))
    b.raw('<div id="logo"><h2>WebShop</h2></div>')
    b.page.nodes += [("label", "Instruction:"), ("instruction", instruction)]
    b.raw(f'<div id="instruction-text"><h4>Instruction:<br>{html.escape(instruction)}</h4></div>')
    b.raw(
        '<form id="search-form"><input id="search_input" type="text" name="search_query" '
        'placeholder="Search...">'
    )
    b.button("Search", "btn btn-success")
    b.raw("</form>")
    b.page.has_search_bar = True
    return b.done()


def results_page(instruction: str, products: Sequence[Product], page_no: int, total: int) -> Page:
    b = _Builder("results", instruction)
    b.button("Back to Search", "btn btn-success")
    b.text(f"Page {page_no} (Total results: {total})", "h3")
    if page_no > 1:
        b.button("< Prev")
    b.button("Next >")
    for p in products:
        b.product(p)
    return b.done()


def item_page(
    instruction: str, product: Product, chosen: Mapping[str, str], show_attrs: bool
) -> Page:
    b = _Builder("item", instruction)
    b.button("Back to Search", "btn btn-success")
    b.button("< Prev")
    if product.main_image:
        b.raw(f'<p><a id="product-image" href="{html.escape(product.main_image)}">image</a></p>')
    for name, values in product.options.items():
        b.options(name, values, chosen)
    b.text(product.name, "h2")
    b.text(f"Price: {product.price_tag}", "h4")
    b.text(f"Rating: {product.rating}", "h4")
    for label in ("Description", "Features", "Reviews") + (("Attributes",) if show_attrs else ()):
        b.button(label)
    b.button("Buy Now", "btn btn-lg purchase")
    return b.done()


def sub_page(instruction: str, product: Product, which: str) -> Page:
    b = _Builder("sub", instruction)
    b.button("Back to Search", "btn btn-success")
    b.button("< Prev")
    if which == "description":
        b.text(product.description, "p", "product-info")
    elif which == "features":
        b.raw("<ul>")
        for point in product.bullet_points:
            b.text(point, "li", "product-info")
        b.raw("</ul>")
    elif which == "reviews":
        for review in product.reviews:
            b.text(f'"{review.title}"', "h4")
            b.text(str(review.score), "p")
            b.text(review.body, "p", "content")
    else:
        b.raw("<ul>")
        for attribute in product.attributes:
            b.text(attribute, "li", "attribute")
        b.raw("</ul>")
        b.text(product.category, "h5", "product-category")
        b.text(product.query, "h5", "product-query")
        b.text(product.product_category, "h5", "product-product_category")
    return b.done()


def done_page(asin: str | None, chosen: Mapping[str, str], reward: float) -> Page:
    b = _Builder("done", None)
    b.text("Thank you for shopping with us!", "h1")
    b.text(f"Purchased: {asin}", "h4", "purchased-asin")
    b.text(f"Options: {json.dumps(dict(chosen))}", "h4", "purchased-options")
    b.text("Your score (min 0.0, max 1.0)", "h3")
    b.text(str(reward), "pre", "reward")
    return b.done()


def render(
    kind: PageKind,
    *,
    instruction: str,
    products: Sequence[Product] = (),
    product: Product | None = None,
    page_no: int = 1,
    total: int = 0,
    chosen: Mapping[str, str] | None = None,
    sub: str = "description",
    show_attrs: bool = False,
    asin: str | None = None,
    reward: float = 0.0,
) -> Page:
    """The page ``kind`` with the given contents (see :class:`Page`)."""
    chosen = chosen or {}
    if kind == "search":
        return search_page(instruction)
    if kind == "results":
        return results_page(instruction, products, page_no, total)
    if kind == "done":
        return done_page(asin, chosen, reward)
    if product is None:
        raise ValueError(f"a {kind} page needs a product")
    if kind == "item":
        return item_page(instruction, product, chosen, show_attrs)
    return sub_page(instruction, product, sub)
