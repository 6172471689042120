"""Write the WebShop catalogue shipped with gemgym (deterministic; the output is committed).

.venv/bin/python scripts/make_webshop_catalogue.py [--out DIR] [--per-type 16] [--seed 0]

The shop is made up, not scraped: 25 product types in WebShop's five categories (beauty,
fashion, furniture, electronics, grocery), 16 products each by default, with brands, attributes,
options (colour, size, flavour, ...), prices and instructions drawn from the tables below with a
seeded generator. Every product gets one shopper instruction, every other product a second;
each instruction names two or three of the product's attributes and one value of each of its
options, as WebShop's crowd instructions do.

The files are in WebShop's own formats, so gemgym reads them with the loader that reads
WebShop's data (:mod:`gemgym.envs.webshop._catalogue`):

* ``items_shuffle.json.gz``: the products (``asin``, ``name``, ``full_description``,
  ``small_description``, ``pricing``, ``images``, ``customization_options``, ``category``,
  ``query``, ``product_category``, ``average_rating``);
* ``items_ins_v2.json.gz``: ``{asin: {"attributes", "instruction", "instruction_attributes"}}``;
* ``items_human_ins.json.gz``: ``{asin: [{"asin", "instruction", "instruction_attributes",
  "instruction_options"}, ...]}`` (generated here, not written by people).

Gzip headers carry no time stamp, so the same arguments always give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src" / "gemgym" / "envs" / "data" / "webshop"

COLORS = ["black", "white", "navy blue", "grey", "red", "green", "beige", "pink", "brown"]
SHIRT_SIZES = ["small", "medium", "large", "x-large", "xx-large"]
SHOE_SIZES = ["7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12"]


@dataclass(frozen=True)
class Kind:
    """A product type: how its products are named, found, described and customised."""

    category: str
    noun: str
    query: str
    path: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...], int], ...]
    price: tuple[float, float]
    brands: tuple[str, ...]
    styles: tuple[str, ...]


def _k(
    category: str,
    noun: str,
    query: str,
    path: str,
    attributes: str,
    options: list[tuple[str, list[str], int]],
    price: tuple[float, float],
    brands: str,
    styles: str,
) -> Kind:
    return Kind(
        category,
        noun,
        query,
        path,
        tuple(a.strip() for a in attributes.split(",")),
        tuple((name, tuple(values), k) for name, values, k in options),
        price,
        tuple(brands.split()),
        tuple(s.strip() for s in styles.split(",")),
    )


KINDS: tuple[Kind, ...] = (
    # beauty
    _k(
        "beauty",
        "Shampoo",
        "shampoo",
        "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
        "sulfate free, paraben free, natural ingredients, tea tree, dry hair, color treated hair, cruelty free",
        [
            ("Size", ["8.4 fl oz", "12 fl oz", "16.9 fl oz", "33.8 fl oz"], 3),
            ("Scent", ["lavender", "coconut", "mint", "unscented", "argan"], 3),
        ],
        (6, 38),
        "Lumera Botaniq Verdell Aquavie",
        "Daily Moisture, Clarifying, Volumizing, Repair",
    ),
    _k(
        "beauty",
        "Face Moisturizer",
        "face moisturizer",
        "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
        "hyaluronic acid, fragrance free, sensitive skin, oil free, anti aging, spf 30, vitamin c",
        [("Size", ["1.7 oz", "2.5 oz", "3.4 oz"], 2)],
        (9, 55),
        "Dermaly Solenne Purevia Kalma",
        "Hydrating, Night Repair, Lightweight Gel, Daily Defense",
    ),
    _k(
        "beauty",
        "Lipstick",
        "matte lipstick",
        "Beauty & Personal Care › Makeup › Lips › Lipstick",
        "long lasting, matte finish, cruelty free, paraben free, highly pigmented, smudge proof",
        [("Color", ["ruby red", "nude", "berry", "coral", "mauve", "plum"], 4)],
        (5, 28),
        "Velvetta Rougeon Amaris Lumi",
        "Velvet Matte, Liquid, Satin, Creamy",
    ),
    _k(
        "beauty",
        "Hair Extensions",
        "clip in hair extensions",
        "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Hair Extensions",
        "natural looking, human hair, heat resistant, easy apply, long lasting, high quality",
        [
            ("Color", ["jet black", "dark brown", "blonde", "auburn", "ash blonde"], 3),
            ("Size", ["14 inch", "18 inch", "22 inch"], 2),
        ],
        (18, 120),
        "Silkara Mane Tressa Glamwave",
        "Clip In, Straight, Body Wave, Seamless",
    ),
    _k(
        "beauty",
        "Nail Polish",
        "nail polish set",
        "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
        "quick dry, non toxic, long lasting, gel effect, chip resistant, vegan",
        [("Color", ["cherry red", "baby pink", "midnight blue", "gold glitter", "white"], 3)],
        (4, 22),
        "Nailora Glossia Pinkett Lacqua",
        "Gel Shine, Classic, Glitter, Pastel",
    ),
    # fashion
    _k(
        "fashion",
        "Running Shoes",
        "men's running shoes",
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        "non slip, rubber sole, breathable mesh, lightweight, arch support, memory foam, wide toe box",
        [("Color", COLORS, 3), ("Size", SHOE_SIZES, 5)],
        (29, 140),
        "Stridex Kinetik Trailon Veloce",
        "Road, Trail, Cushioned, Racing",
    ),
    _k(
        "fashion",
        "T-Shirt",
        "women's t-shirt",
        "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › T-Shirts",
        "machine wash, cotton spandex, short sleeve, loose fit, crew neck, soft material, classic fit",
        [("Color", COLORS, 4), ("Size", SHIRT_SIZES, 4)],
        (9, 35),
        "Cottonly Basix Aurelle Tandem",
        "Casual, V-Neck, Oversized, Graphic",
    ),
    _k(
        "fashion",
        "Jeans",
        "men's jeans",
        "Clothing, Shoes & Jewelry › Men › Clothing › Jeans",
        "machine wash, straight leg, button closure, stretch fabric, relaxed fit, slim fit, classic fit",
        [
            ("Color", ["dark wash", "light wash", "black", "stone wash"], 3),
            ("Size", ["30w x 30l", "32w x 32l", "34w x 32l", "36w x 34l"], 3),
        ],
        (24, 89),
        "Denimco Rivetta Bluecraft Westfall",
        "Regular, Athletic, Vintage, Carpenter",
    ),
    _k(
        "fashion",
        "Hoodie",
        "pullover hoodie",
        "Clothing, Shoes & Jewelry › Men › Clothing › Active › Active Hoodies",
        "fleece lined, machine wash, drawstring closure, long sleeve, kangaroo pocket, polyester cotton",
        [("Color", COLORS, 4), ("Size", SHIRT_SIZES, 4)],
        (19, 65),
        "Hoodland Cozyfit Northpeak Urbane",
        "Pullover, Zip Up, Heavyweight, Athletic",
    ),
    _k(
        "fashion",
        "Sandals",
        "women's sandals",
        "Clothing, Shoes & Jewelry › Women › Shoes › Sandals",
        "open toe, ankle strap, rubber sole, arch support, non slip, leather upper",
        [
            ("Color", ["black", "tan", "white", "rose gold", "silver"], 3),
            ("Size", SHOE_SIZES[:8], 4),
        ],
        (15, 70),
        "Solaria Breezie Paseo Coralis",
        "Flat, Wedge, Platform, Slide",
    ),
    # furniture
    _k(
        "furniture",
        "Office Chair",
        "ergonomic office chair",
        "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Home Office Desk Chairs",
        "lumbar support, height adjustable, easy assemble, mesh back, swivel wheels, padded armrests",
        [("Color", ["black", "grey", "white", "blue"], 3)],
        (69, 289),
        "Ergonix Seatwell Postura Deskly",
        "Mesh Task, Executive, High Back, Mid Back",
    ),
    _k(
        "furniture",
        "Bookshelf",
        "wooden bookshelf",
        "Home & Kitchen › Furniture › Home Office Furniture › Bookcases",
        "solid wood, easy assemble, storage space, living room, engineered wood, space saving",
        [
            ("Color", ["walnut", "white", "black", "natural oak", "espresso"], 3),
            ("Size", ["3 tier", "4 tier", "5 tier"], 2),
        ],
        (39, 199),
        "Shelvio Oakridge Timbre Nordhus",
        "Ladder, Open, Cube, Corner",
    ),
    _k(
        "furniture",
        "Ottoman Bench",
        "storage ottoman bench",
        "Home & Kitchen › Furniture › Living Room Furniture › Ottomans",
        "space saving, faux leather, living room, storage space, easy clean, high density foam",
        [
            ("Color", ["grey", "brown", "beige", "navy blue", "black"], 3),
            ("Size", ["80x40x40cm", "100x45x45cm", "120x45x45cm"], 2),
        ],
        (35, 160),
        "Lounza Restwell Casavia Hollin",
        "Tufted, Folding, Round, Rectangular",
    ),
    _k(
        "furniture",
        "Bed Sheet Set",
        "bed sheet set",
        "Home & Kitchen › Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets",
        "machine wash, deep pocket, microfiber, wrinkle free, breathable, egyptian cotton",
        [
            ("Color", ["white", "grey", "beige", "navy blue", "sage green"], 3),
            ("Size", ["twin", "full", "queen", "king"], 3),
        ],
        (19, 95),
        "Dreamwell Linora Sleepcraft Hushly",
        "Hotel Luxury, Brushed, Percale, Sateen",
    ),
    _k(
        "furniture",
        "TV Stand",
        "tv stand",
        "Home & Kitchen › Furniture › Living Room Furniture › Television Stands & Entertainment Centers",
        "storage space, engineered wood, easy assemble, living room, cable management, tempered glass",
        [("Color", ["black", "walnut", "white", "rustic brown"], 3)],
        (59, 259),
        "Mediora Screenly Castell Rowan",
        "Entertainment Center, Media Console, Corner, Farmhouse",
    ),
    # electronics
    _k(
        "electronics",
        "Bluetooth Headphones",
        "wireless bluetooth headphones",
        "Electronics › Headphones, Earbuds & Accessories › Headphones › Over-Ear Headphones",
        "noise cancelling, long battery life, built in microphone, fast charging, over ear, foldable design",
        [("Color", ["black", "white", "silver", "navy blue", "rose gold"], 3)],
        (25, 199),
        "Sonique Auralis Beatform Quietra",
        "Studio, Sport, Travel, Kids",
    ),
    _k(
        "electronics",
        "USB C Charger",
        "usb c wall charger",
        "Electronics › Computers & Accessories › Laptop Accessories › Chargers & Adapters",
        "fast charging, compact design, multiple ports, overheat protection, foldable plug, power delivery",
        [("Style", ["20w", "45w", "65w", "100w"], 3), ("Color", ["white", "black"], 2)],
        (12, 69),
        "Voltix Chargepoint Amprise Nexcell",
        "GaN, Dual Port, Travel, Desktop",
    ),
    _k(
        "electronics",
        "HDMI Cable",
        "hdmi cable",
        "Electronics › Television & Video › Accessories › Cables › HDMI Cables",
        "high speed, gold plated, braided cord, 4k support, ethernet channel, durable connectors",
        [("Size", ["3 feet", "6 feet", "10 feet", "15 feet"], 3)],
        (6, 29),
        "Linkwave Signalux Cordex Pixlink",
        "Ultra HD, Premium, Slim, Right Angle",
    ),
    _k(
        "electronics",
        "Wireless Mouse",
        "wireless mouse",
        "Electronics › Computers & Accessories › Computer Accessories & Peripherals › Keyboards, Mice & Accessories › Mice",
        "ergonomic design, silent click, usb receiver, long battery life, adjustable dpi, rechargeable battery",
        [("Color", ["black", "grey", "white", "pink", "blue"], 3)],
        (9, 49),
        "Clickara Glidex Mousepro Tactil",
        "Portable, Vertical, Gaming, Compact",
    ),
    _k(
        "electronics",
        "Phone Case",
        "iphone case",
        "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
        "shockproof, wireless charging compatible, raised edges, slim fit, scratch resistant, military grade",
        [
            ("Color", ["clear", "black", "navy blue", "purple", "green"], 3),
            ("Size", ["iphone 13", "iphone 14", "iphone 15"], 2),
        ],
        (7, 39),
        "Caseon Armorly Shellix Guardia",
        "Clear, Rugged, Wallet, Silicone",
    ),
    # grocery
    _k(
        "grocery",
        "Coffee Beans",
        "whole bean coffee",
        "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Whole Coffee Beans",
        "single origin, medium roast, fair trade, usda organic, low acid, dark roast",
        [
            ("Flavor", ["original", "vanilla", "hazelnut", "french roast", "mocha"], 3),
            ("Size", ["12 ounce (pack of 1)", "2 pound (pack of 1)", "12 ounce (pack of 2)"], 2),
        ],
        (9, 45),
        "Roastery Beanwise Cafeza Altura",
        "Breakfast Blend, Espresso, House Blend, Colombian",
    ),
    _k(
        "grocery",
        "Protein Bars",
        "protein bars",
        "Grocery & Gourmet Food › Snack Foods › Bars › Protein Bars",
        "gluten free, high protein, low sugar, non gmo, keto friendly, plant based",
        [
            (
                "Flavor",
                ["chocolate peanut butter", "cookie dough", "almond", "birthday cake", "blueberry"],
                3,
            ),
            ("Size", ["12 count", "24 count"], 2),
        ],
        (12, 48),
        "Fuelbar Proteo Nutrix Gainly",
        "Whey, Vegan, Crispy, Chewy",
    ),
    _k(
        "grocery",
        "Herbal Tea",
        "herbal tea bags",
        "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Herbal",
        "caffeine free, usda organic, non gmo, individually wrapped, natural ingredients, kosher certified",
        [
            ("Flavor", ["chamomile", "peppermint", "ginger", "hibiscus", "lemon balm"], 3),
            ("Size", ["20 count (pack of 1)", "20 count (pack of 6)"], 2),
        ],
        (5, 32),
        "Teavana Leafora Calmwell Brewly",
        "Bedtime, Digestive, Wellness, Classic",
    ),
    _k(
        "grocery",
        "Potato Chips",
        "kettle potato chips",
        "Grocery & Gourmet Food › Snack Foods › Chips & Crisps › Potato Chips",
        "gluten free, non gmo, kettle cooked, no artificial flavors, individually wrapped, vegan",
        [
            (
                "Flavor",
                ["sea salt", "salt and vinegar", "barbecue", "jalapeno", "sour cream and onion"],
                3,
            ),
            ("Size", ["1 ounce (pack of 24)", "5 ounce (pack of 8)"], 2),
        ],
        (8, 36),
        "Crunchwell Kettlebay Spudly Goldcrisp",
        "Kettle, Thin, Wavy, Ridged",
    ),
    _k(
        "grocery",
        "Olive Oil",
        "extra virgin olive oil",
        "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Oils › Olive Oils",
        "extra virgin, cold pressed, first cold, non gmo, usda organic, glass bottle",
        [("Size", ["16.9 fl oz", "25.4 fl oz", "33.8 fl oz", "1 gallon"], 3)],
        (9, 59),
        "Olivara Mediterro Grovelle Sunpress",
        "Everyday, Premium, Robust, Mild",
    ),
)

INSTRUCTIONS = (
    "i'm looking for {a} {noun} that is {attrs}{opts}",
    "i need {a} {attrs} {noun}{opts}",
    "find me {a} {noun} with {attrs}{opts}",
    "i want to buy {a} {noun} which is {attrs}{opts}",
    "looking for {attrs} {noun_plural}{opts}",
    "i would like {a} {noun} that's {attrs}{opts}",
)

OPTION_PHRASES = {
    "Color": ("in {v}", "in {v} color", "with color {v}"),
    "Size": ("in size {v}", "size {v}", "in {v}"),
    "Scent": ("with a {v} scent", "{v} scented"),
    "Flavor": ("in {v} flavor", "{v} flavored"),
    "Style": ("{v} style", "in {v}"),
}


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _price(rng: random.Random, lo: float, hi: float) -> float:
    return round(int(rng.uniform(lo, hi)) + 0.99, 2)


def make_product(
    kind: Kind, rng: random.Random, taken: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """A product in ``items_shuffle.json``'s format and its attributes."""
    asin = _asin(rng, taken)
    brand = rng.choice(kind.brands)
    style = rng.choice(kind.styles)
    attrs = rng.sample(kind.attributes, rng.randint(3, 4))
    headline = ", ".join(a.title() for a in attrs[:2])
    name = f"{brand} {style} {kind.noun} - {headline}"
    options = {}
    for opt_name, pool, k in kind.options:
        values = sorted(rng.sample(pool, min(k, len(pool))), key=pool.index)
        options[opt_name] = [
            {"value": v.title() if opt_name == "Color" else v, "image": None} for v in values
        ]
    bullets = [
        f"{a.upper()}: "
        + rng.choice(
            (
                f"this {kind.noun.lower()} is {a}, made to last through daily use.",
                f"designed to be {a} without giving up comfort or style.",
                f"{a} by design; tested by our quality team before it ships.",
            )
        )
        for a in attrs
    ]
    bullets.append(
        rng.choice(
            (
                f"WHAT YOU GET: one {brand} {kind.noun.lower()} and our 30-day satisfaction promise.",
                "CUSTOMER SERVICE: questions? our support team answers within 24 hours.",
                f"GIFT IDEA: a thoughtful gift for anyone who needs a new {kind.noun.lower()}.",
            )
        )
    )
    description = (
        f"The {brand} {style} {kind.noun} is {_join(attrs)}. "
        + rng.choice(
            (
                f"It is one of our best-selling {kind.category} products. ",
                "Made with care and checked by hand. ",
                "A dependable choice for everyday use. ",
            )
        )
        + "Choose the "
        + _join([o.lower() for o in options])
        + " that suits you."
        if options
        else f"The {brand} {style} {kind.noun} is {_join(attrs)}."
    )
    price = _price(rng, *kind.price)
    if rng.random() < 0.1:
        pricing = f"${price} - ${round(price * 1.4 + 0.5, 2)}"
    else:
        pricing = f"${price}"
    product = {
        "asin": asin,
        "name": name,
        "full_description": description,
        "small_description": bullets,
        "pricing": pricing,
        "images": [f"https://example.com/webshop/images/{asin}.jpg"],
        "customization_options": options or None,
        "category": kind.category,
        "query": kind.query,
        "product_category": kind.path,
        "average_rating": round(rng.uniform(3.2, 4.9), 1),
    }
    return product, attrs


def make_instruction(
    kind: Kind, product: dict[str, Any], attrs: list[str], rng: random.Random
) -> dict[str, Any]:
    """A shopper instruction in ``items_human_ins.json``'s format."""
    wanted = rng.sample(attrs, rng.randint(2, min(3, len(attrs))))
    picked: list[str] = []
    phrases: list[str] = []
    for opt_name, contents in (product["customization_options"] or {}).items():
        value = str(rng.choice(contents)["value"]).lower()
        picked.append(value)
        phrases.append(rng.choice(OPTION_PHRASES[opt_name]).format(v=value))
    noun = kind.noun.lower()
    plural = noun if noun.endswith("s") else noun + "s"
    template = rng.choice(INSTRUCTIONS)
    text = template.format(
        a=_article(_join(wanted) if "{a} {attrs}" in template else noun),
        noun=noun,
        noun_plural=plural,
        attrs=_join(wanted),
        opts=(", " + ", ".join(phrases)) if phrases else "",
    )
    return {
        "asin": product["asin"],
        "instruction": text,
        "instruction_attributes": wanted,
        "instruction_options": picked,
    }


def build(per_type: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    rng = random.Random(seed)
    taken: set[str] = set()
    products: list[dict[str, Any]] = []
    attributes: dict[str, Any] = {}
    human: dict[str, Any] = {}
    by_kind = []
    for kind in KINDS:
        for _ in range(per_type):
            product, attrs = make_product(kind, rng, taken)
            by_kind.append((kind, product, attrs))
    rng.shuffle(by_kind)  # items_shuffle.json is shuffled
    for i, (kind, product, attrs) in enumerate(by_kind):
        products.append(product)
        main = make_instruction(kind, product, attrs, rng)
        attributes[product["asin"]] = {
            "attributes": attrs,
            "instruction": f"i need {_article(kind.noun.lower())} {kind.noun.lower()} that is "
            + _join(main["instruction_attributes"]),
            "instruction_attributes": main["instruction_attributes"],
        }
        entries = [main]
        if i % 2 == 0:
            entries.append(make_instruction(kind, product, attrs, rng))
        human[product["asin"]] = entries
    return products, attributes, human


def _write(path: Path, value: Any) -> None:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--per-type", type=int, default=16, help="products per type (16)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    products, attributes, human = build(args.per_type, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "items_shuffle.json.gz", products)
    _write(args.out / "items_ins_v2.json.gz", attributes)
    _write(args.out / "items_human_ins.json.gz", human)
    n_goals = sum(len(v) for v in human.values())
    size = sum(
        (args.out / f).stat().st_size
        for f in ("items_shuffle.json.gz", "items_ins_v2.json.gz", "items_human_ins.json.gz")
    )
    print(f"{len(products)} products, {n_goals} instructions, {size / 1024:.0f} KiB in {args.out}")


if __name__ == "__main__":
    main()
