"""The human naming data behind colour names: the XKCD colour survey mapped to the retail
vocabulary of ``data/colours.csv``.

Source: the XKCD colour survey (Randall Munroe, 2010: about five million colour names typed
by some 222,500 people for random RGB points), whose results (``rgb.txt``, the 949 most
common names with the mean RGB of the points each was given to) are public domain, CC0
(https://xkcd.com/color/rgb/). matplotlib ships the same list as
``matplotlib.colors.XKCD_COLORS`` (matplotlib licence: PSF-style, BSD-compatible);
``build_points`` reads it from there, so matplotlib is needed only to rebuild the table.

Each survey name is mapped to a retail name by its words, never by hand per colour: the
head word (the last: English colour compounds are head-final, "reddish brown" is a brown)
gives the retail name (``WORDS``: "brick" -> red; "navy" -> navy), moved by a lightness
word (``_SHIFT``: "pale blue" -> light blue, "dark red" -> burgundy). Where the head spans
several retail names (``_NEAREST``: "taupe", "peach") or another colour word qualifies it
("blue green"), the survey colour takes the nearest (CIEDE2000) of the head's retail
names. Names with no colour word ("ice", "bruise") are
left out. The result ships as ``data/colour_points.csv`` (``hex,xkcd,name``);
``colournames`` names a colour by a vote of its nearest points, so the boundaries between
retail names are where people draw them, not where hand-picked swatches meet.

    python -m vismerch.features.xkcdnames   # rewrites src/vismerch/data/colour_points.csv
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

POINTS_FILE = "data/colour_points.csv"
_RED = ("red", "burgundy", "coral")
_BROWNISH = ("brown", "tan", "orange")
_SANDY = ("beige", "cream", "tan", "khaki")
_GREENS = ("green", "olive", "mint", "teal")
_BLUES = ("blue", "light blue", "navy", "teal", "turquoise")
_AQUAS = ("turquoise", "teal", "light blue", "mint")
_GREYS = ("grey", "light grey", "charcoal", "silver", "white", "black")
_YELLOWS = ("yellow", "mustard", "gold", "cream")
_WARM_YELLOWS = ("orange", "mustard", "yellow", "gold")
# colour word -> candidate retail names (the survey colour takes the nearest candidate)
WORDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("red", "crimson", "scarlet", "cherry", "ruby", "carmine", "blood",
                     "vermillion", "tomato", "lipstick", "strawberry", "cranberry", "rouge",
                     "raspberry"), _RED),
    "brick": ("red", "burgundy", "brown"),
    **dict.fromkeys(("burgundy", "maroon", "wine", "claret", "bordeaux", "merlot",
                     "mulberry"), ("burgundy",)),
    **dict.fromkeys(("coral", "salmon", "grapefruit", "melon", "watermelon"), ("coral", "pink")),
    **dict.fromkeys(("pink", "rose", "blush", "bubblegum", "carnation", "barbie", "rosa",
                     "pig"), ("pink", "hot pink", "coral")),
    **dict.fromkeys(("fuchsia", "magenta", "cerise"), ("hot pink", "purple")),
    "mauve": ("pink", "lavender", "purple", "burgundy"),
    "puce": ("brown", "khaki", "tan"),
    **dict.fromkeys(("orange", "tangerine", "pumpkin", "mango", "apricot", "orangered"),
                    ("orange", "coral")),
    "peach": ("orange", "coral", "cream", "beige"),
    **dict.fromkeys(("amber", "saffron", "marigold", "squash", "butterscotch", "macaroni"),
                    _WARM_YELLOWS),
    **dict.fromkeys(("yellow", "lemon", "canary", "butter", "banana", "sunflower", "dandelion",
                     "maize", "straw", "custard", "piss", "sunshine"), _YELLOWS),
    **dict.fromkeys(("gold", "golden", "goldenrod"), ("gold", "mustard", "yellow")),
    **dict.fromkeys(("mustard", "ochre", "ocher", "ocre"), ("mustard", "gold")),
    **dict.fromkeys(("green", "grass", "leaf", "leafy", "forest", "forrest", "emerald", "kelly",
                     "kelley", "shamrock", "fern", "jade", "pea", "apple", "lime", "chartreuse",
                     "moss", "mossy", "avocado", "pistachio", "celery", "kiwi", "swamp", "algae",
                     "seaweed", "evergreen", "pine", "spruce", "hunter", "viridian", "asparagus",
                     "lichen", "booger", "snot", "vomit", "puke", "bile", "barf", "frog",
                     "kermit", "slime", "pear", "greenblue", "greenish"), _GREENS),
    **dict.fromkeys(("olive", "drab", "camo", "camouflage", "army", "military"),
                    ("olive", "khaki", "green")),
    **dict.fromkeys(("mint", "minty", "seafoam", "spearmint", "celadon", "sage"),
                    ("mint", "green", "light blue", "turquoise", "grey")),
    "teal": ("teal", "turquoise"),
    **dict.fromkeys(("turquoise", "aqua", "cyan", "aquamarine", "tiffany", "robin", "robin's",
                     "tealish"), _AQUAS),
    **dict.fromkeys(("blue", "azure", "azul", "cobalt", "sapphire", "cerulean", "ultramarine",
                     "denim", "cornflower", "ocean", "marine", "petrol", "bluegrey",
                     "greyblue", "bluegreen", "darkblue", "lightblue", "bluey"), _BLUES),
    **dict.fromkeys(("navy", "midnight"), ("navy",)),
    "sky": ("light blue", "blue"),
    "indigo": ("purple", "navy", "blue"),
    "periwinkle": ("blue", "light blue", "lavender"),
    "perrywinkle": ("blue", "light blue", "lavender"),
    **dict.fromkeys(("purple", "violet", "plum", "eggplant", "aubergine", "grape", "amethyst",
                     "orchid", "heliotrope", "iris", "purpley", "purply", "purpleish", "burple",
                     "blurple", "barney", "urple", "purplish"), ("purple", "lavender")),
    **dict.fromkeys(("lavender", "lavendar", "lilac", "liliac", "wisteria"),
                    ("lavender", "purple")),
    **dict.fromkeys(("brown", "chocolate", "coffee", "mocha", "cocoa", "chestnut", "mahogany",
                     "umber", "sepia", "mud", "muddy", "dirt", "earth", "poo", "poop", "shit",
                     "diarrhea", "leather", "hazel", "bronze", "clay", "adobe", "brownish",
                     "browny"), ("brown", "tan", "khaki")),
    **dict.fromkeys(("rust", "rusty", "copper", "auburn", "russet", "sienna", "siena",
                     "terracotta", "terracota", "cinnamon"), _BROWNISH),
    **dict.fromkeys(("tan", "camel", "fawn", "caramel"), ("tan", "brown", "beige", "khaki")),
    **dict.fromkeys(("taupe", "toupe", "mushroom", "putty", "stone"),
                    ("beige", "grey", "khaki", "tan")),
    **dict.fromkeys(("beige", "sand", "sandy", "desert", "buff", "ecru", "wheat", "parchment",
                     "sandstone"), _SANDY),
    "khaki": ("khaki", "beige", "olive"),
    **dict.fromkeys(("cream", "creme", "ivory", "eggshell", "manilla", "pale"),
                    ("cream", "white", "beige")),
    **dict.fromkeys(("grey", "greyish", "gunmetal", "steel", "cement", "battleship"), _GREYS),
    "slate": ("grey", "charcoal", "navy"),
    "charcoal": ("charcoal",),
    "silver": ("silver", "light grey"),
    "black": ("black", "charcoal"),
    "dark": ("black", "charcoal", "navy"),
    "white": ("white",),
}
_NEAREST = {"amber", "saffron", "marigold", "squash", "butterscotch", "macaroni", "taupe", "toupe",
            "mushroom", "putty", "stone", "peach", "mauve", "puce", "slate", "dark",
            # earth pigments and metals: from orange to brown
            "rust", "rusty", "copper", "auburn", "russet", "sienna", "siena", "terracotta",
            "terracota", "cinnamon"}
# "-ish" and "-y" forms of colour words ("reddish brown", "pinky red")
_FORMS = {"reddish": "red", "reddy": "red", "pinkish": "pink", "pinky": "pink",
          "orangish": "orange", "orangeish": "orange", "orangey": "orange",
          "yellowish": "yellow", "yellowy": "yellow", "bluish": "blue", "greeny": "green",
          "purplish": "purple", "greyish": "grey"}
# whole names whose words mislead ("navy green" is a green; "egg shell" one word)
_PHRASES = {"egg shell": "eggshell", "off white": "white", "off yellow": "yellow",
            "robin egg": "robin", "duck egg": "robin", "golden rod": "goldenrod",
            "terra cotta": "terracotta", "bubble gum": "bubblegum"}


_LIGHT = {"light", "pale", "pastel", "baby", "soft", "lighter", "lightish", "powder", "faded"}
_DARK = {"dark", "deep", "darkish", "midnight", "night"}
_VIVID = {"hot", "bright", "neon", "electric", "vivid", "shocking", "fluorescent", "strong"}
# a lightness or vividness word moves a name to its retail neighbour ("pale blue" is light blue)
_SHIFT = {
    "light": {"blue": "light blue", "grey": "light grey", "green": "mint", "purple": "lavender",
              "brown": "tan", "navy": "blue", "charcoal": "grey",
              "burgundy": "red", "olive": "khaki", "teal": "turquoise", "turquoise": "mint"},
    "dark": {"blue": "navy", "red": "burgundy", "grey": "charcoal", "pink": "hot pink",
             "yellow": "mustard", "light blue": "blue", "turquoise": "teal", "coral": "red",
             "tan": "brown", "lavender": "purple", "mint": "green", "khaki": "olive",
             "beige": "tan", "cream": "beige"},
    "vivid": {"pink": "hot pink"},
}


def _words(xkcd_name: str) -> list[str]:
    name = xkcd_name.lower().replace("gray", "grey").replace("/", " ")
    for phrase, word in _PHRASES.items():
        name = name.replace(phrase, word)
    return [_FORMS.get(w, w) for w in re.split(r"[\s\-]+", name) if w]


def candidates(xkcd_name: str) -> tuple[str, ...]:
    """The retail names an XKCD survey name can map to (see the module docstring), the
    one its words name first; empty when it holds no colour word."""
    words = _words(xkcd_name)
    known = [w for w in words if w in WORDS]
    if not known:
        return ()
    head = known[-1]
    if head == "blue" and "navy" in words:
        return ("navy",)
    if head in _NEAREST:  # words that span retail names: the nearest swatch decides
        return WORDS[head]
    base = WORDS[head][0]
    for kind, mods in (("light", _LIGHT), ("dark", _DARK), ("vivid", _VIVID)):
        if mods & set(words) and base in _SHIFT[kind]:
            base = _SHIFT[kind][base]
    if any(w not in ("dark", "pale") and WORDS[w][0] != WORDS[head][0] for w in known[:-1]):
        # a mixed name is its head's ("reddish orange" is an orange, "blue green" a green):
        # the nearest of the head's retail names, the other word says which
        return (base, *(n for n in WORDS[head] if n != base))
    return (base,)


def build_points(table=None) -> list[tuple[str, str, str]]:
    """(hex, XKCD name, retail name) for every survey name with a colour word, from
    matplotlib's copy of the survey, for ``table`` (a ``ColourTable``; default: the
    packaged one). A mixed name takes the candidate with the nearest swatch (CIEDE2000)."""
    from matplotlib.colors import XKCD_COLORS

    from vismerch.features.colourspace import ciede2000_np, hex_to_lab

    if table is None:
        from vismerch.features.colournames import load_colour_table

        table = load_colour_table()
    rows = []
    for key, hex_ in XKCD_COLORS.items():
        xkcd = key.removeprefix("xkcd:")
        names = [n for n in candidates(xkcd) if table.index(n) is not None]
        if not names:
            continue
        lab = hex_to_lab(hex_)
        dist = [float(ciede2000_np(lab, table.swatch_lab[table.swatch_name == table.index(n)]).min())
                for n in names]
        rows.append((hex_.lower(), xkcd, names[int(np.argmin(dist))]))
    return sorted(rows, key=lambda r: (r[2], r[1]))


def points_csv(rows: list[tuple[str, str, str]]) -> str:
    head = ("# XKCD colour survey (public domain, CC0; via matplotlib.colors.XKCD_COLORS) mapped "
            "to retail names by vismerch.features.xkcdnames; regenerate, do not edit\n")
    return head + "hex,xkcd,name\n" + "".join(f"{h},{x},{n}\n" for h, x, n in rows)


def main() -> None:
    path = Path(__file__).resolve().parent.parent / POINTS_FILE
    rows = build_points()
    path.write_text(points_csv(rows), encoding="utf-8")
    print(f"{len(rows)} survey colours -> {path}")


if __name__ == "__main__":
    main()
