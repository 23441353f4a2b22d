"""Previews of an arranged grid: a PNG mosaic of the first rows and an HTML page.

Tiles come from the store's thumbnails (``store.thumbnail``); a product without one
gets a grey tile with its id. Look-alike neighbours are outlined in red, so a before /
after pair shows at a glance what the arrangement fixed. The HTML page shows the whole
order (up to ``limit`` tiles) with a width switcher for every breakpoint and each slot's
reason as a tooltip. ``arranged_before_after`` makes both for the demo and the report.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vismerch.arrange.explain import lookalike_adjacencies

if TYPE_CHECKING:
    from vismerch.catalog.store import Store

LABEL_H = 18
GAP = 6
RED = (220, 30, 45)


def _font(size: int = 11) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def _tile(store: Store, pid: str, size: int) -> Image.Image:
    thumb = store.thumbnail(pid) if store is not None else None
    if thumb is not None:
        try:
            with Image.open(io.BytesIO(thumb.data)) as im:
                im = im.convert("RGB")
                im.thumbnail((size, size))
                tile = Image.new("RGB", (size, size), (255, 255, 255))
                tile.paste(im, ((size - im.width) // 2, (size - im.height) // 2))
                return tile
        except OSError:
            pass  # unreadable thumbnail: fall through to the placeholder
    tile = Image.new("RGB", (size, size), (200, 200, 200))
    draw = ImageDraw.Draw(tile)
    draw.text((size // 2, size // 2), pid, fill=(70, 70, 70), font=_font(12), anchor="mm")
    return tile


def mosaic(store: Store, ids: Sequence[str], columns: int, rows: int = 3, *, tile: int = 160,
           title: str | None = None, lookalikes: Sequence[tuple[int, int]] = (),
           start: int = 1) -> Image.Image:
    """The first ``rows`` rows of ``ids`` as a grid of ``columns``. ``lookalikes`` are
    0-based position pairs outlined in red."""
    shown = list(ids[: columns * rows])
    n_rows = max(1, -(-len(shown) // columns))
    head = 26 if title else 0
    width = columns * tile + (columns + 1) * GAP
    height = head + n_rows * (tile + LABEL_H) + (n_rows + 1) * GAP
    canvas = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    if title:
        draw.text((GAP, 6), title, fill=(20, 20, 20), font=_font(15))
    boxes = []
    for k, pid in enumerate(shown):
        r, c = divmod(k, columns)
        x = GAP + c * (tile + GAP)
        y = head + GAP + r * (tile + LABEL_H + GAP)
        canvas.paste(_tile(store, pid, tile), (x, y))
        draw.text((x + 2, y + tile + 2), f"{start + k}  {pid}", fill=(60, 60, 60), font=_font(11))
        boxes.append((x, y, x + tile, y + tile))
    marked = {p for pair in lookalikes for p in pair if p < len(shown)}
    for p in sorted(marked):
        x0, y0, x1, y1 = boxes[p]
        draw.rectangle((x0 - 2, y0 - 2, x1 + 1, y1 + 1), outline=RED, width=3)
    return canvas


def side_by_side(left: Image.Image, right: Image.Image, gap: int = 24) -> Image.Image:
    out = Image.new("RGB", (left.width + gap + right.width, max(left.height, right.height)),
                    (255, 255, 255))
    out.paste(left, (0, 0))
    out.paste(right, (left.width + gap, 0))
    return out


def _data_uri(store: Store, pid: str, size: int) -> str:
    buf = io.BytesIO()
    _tile(store, pid, size).save(buf, format="WEBP", quality=80)
    return "data:image/webp;base64," + base64.b64encode(buf.getvalue()).decode()


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; color: #222; }}
.grid {{ display: grid; gap: 8px; grid-template-columns: repeat(var(--cols), 1fr);
        max-width: calc(var(--cols) * 190px); }}
.slot {{ border: 1px solid #ddd; padding: 4px; position: relative; }}
.slot img {{ width: 100%; aspect-ratio: 1; object-fit: contain; display: block; }}
.slot.alike {{ outline: 3px solid #dc1e2d; }}
.slot .pos {{ font-size: 11px; color: #555; }}
.slot.pinned .pos::after {{ content: " 📌"; }}
button.on {{ font-weight: bold; }}
</style></head><body>
<h1>{title}</h1>
<p>{subtitle}</p>
<p>Width: {buttons} &nbsp; <span id="count"></span></p>
<div class="grid" id="grid" style="--cols: {primary}">
{tiles}
</div>
<script>
const pairs = {pairs};
function show(c) {{
  document.getElementById('grid').style.setProperty('--cols', c);
  document.querySelectorAll('button[data-c]').forEach(b => b.classList.toggle('on', b.dataset.c == c));
  document.querySelectorAll('.slot').forEach(s => s.classList.remove('alike'));
  const list = pairs[c] || [];
  list.forEach(([a, b]) => [a, b].forEach(p => {{
    const el = document.getElementById('p' + p); if (el) el.classList.add('alike'); }}));
  document.getElementById('count').textContent = list.length + ' look-alike neighbour pairs shown';
}}
show({primary});
</script></body></html>
"""


@dataclass(frozen=True)
class Lookalikes:
    """The slots' vectors (in slot order) and the cosine at which neighbours look alike."""

    vectors: np.ndarray | None
    threshold: float = 0.9


def html_page(store: Store, slots: Sequence[dict[str, Any]], widths: Sequence[int], *,
              title: str, subtitle: str = "", lookalikes: Lookalikes | None = None,
              limit: int = 120, tile: int = 180) -> str:
    """A self-contained page (thumbnails inlined) with a width switcher; look-alike
    neighbours at the chosen width are outlined."""
    vectors = lookalikes.vectors if lookalikes is not None else None
    shown = list(slots[:limit])
    tiles = []
    for s in shown:
        pinned = " pinned" if s.get("kind") == "pinned" else ""
        tiles.append(
            f'<div class="slot{pinned}" id="p{s["position"] - 1}" '
            f'title="{html.escape(str(s.get("reason", "")))}">'
            f'<img src="{_data_uri(store, s["id"], tile)}" alt="{html.escape(s["id"])}">'
            f'<div class="pos">{s["position"]} · {html.escape(s["id"])}</div></div>')
    pairs: dict[int, list[list[int]]] = {}
    if vectors is not None:
        for c in widths:
            pairs[c] = [[a.a, a.b] for a in lookalike_adjacencies(vectors[: len(shown)], c,
                                                                  lookalikes.threshold)]
    buttons = " ".join(f'<button data-c="{c}" onclick="show({c})">{c}</button>' for c in widths)
    return _PAGE.format(title=html.escape(title), subtitle=html.escape(subtitle),
                        buttons=buttons, primary=widths[0], tiles="\n".join(tiles),
                        pairs=json.dumps(pairs))


def lookalike_pairs(vectors: np.ndarray | None, columns: int, threshold: float, depth: int
           ) -> list[tuple[int, int]]:
    """0-based position pairs of look-alike neighbours among the first ``depth``."""
    if vectors is None:
        return []
    return [(a.a, a.b) for a in lookalike_adjacencies(vectors[:depth], columns, threshold)]


def arranged_before_after(store: Store, collection: str, out_dir: str | Path | None = None, *,
                          columns: int = 4, columns_set: Sequence[int] | str | None = None,
                          rows: int = 3, mode: str = "mix", **kwargs: Any) -> dict[str, Any]:
    """Arrange ``collection`` and write before/after previews into ``out_dir`` (default:
    ``<store>/previews``).

    "Before" is the plain order a rules-only tool shows (score order with the same pins,
    boosts, hides and quality gate); "after" is vismerch's arrangement. Returns the PNG and
    HTML paths, both orders and the measured change, for the demo and the report:
    ``{collection, columns, before: {png, ids, lookalikes}, after: {...}, combined_png,
    html, business}``; ``lookalikes`` counts look-alike neighbour pairs in the first 48
    positions per width.
    """
    from vismerch.arrange.layout import arrange_collection

    out = Path(out_dir) if out_dir is not None else Path(store.path) / "previews"
    out.mkdir(parents=True, exist_ok=True)
    result = arrange_collection(store, collection, columns=columns, columns_set=columns_set,
                                mode=mode, log=False, **kwargs)
    arr = result.arrangement
    widths = list(arr.params["columns"])
    ids_after = arr.ids
    ids_before = _plain_ids(arr)
    vectors = result.vectors(ids_after + ids_before)
    v_after = vectors[: len(ids_after)] if vectors is not None else None
    v_before = vectors[len(ids_after):] if vectors is not None else None
    tau = float(arr.params["lookalike_cosine"])
    depth = arr.business["depth"]
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in collection)
    before_png, after_png = out / f"{slug}-before.png", out / f"{slug}-after.png"
    combined_png, page = out / f"{slug}-before-after.png", out / f"{slug}.html"
    before = mosaic(store, ids_before, columns, rows, title=f"{collection}: score order",
                    lookalikes=lookalike_pairs(v_before, columns, tau, columns * rows))
    after = mosaic(store, ids_after, columns, rows, title=f"{collection}: vismerch {mode}",
                   lookalikes=lookalike_pairs(v_after, columns, tau, columns * rows))
    before.save(before_png)
    after.save(after_png)
    side_by_side(before, after).save(combined_png)
    page.write_text(html_page(store, result.slots(), widths, title=f"{collection} ({mode})",
                              subtitle="hover a tile for its reason; red outlines mark "
                              "look-alike neighbours at the chosen width",
                              lookalikes=Lookalikes(v_after, tau)))
    # the arrangement already counted both orders' look-alikes in depth at every width
    report = {b.columns: b for b in arr.breakpoints}
    return {
        "collection": collection, "columns": columns, "widths": widths, "mode": mode,
        "before": {"png": str(before_png), "ids": ids_before,
                   "lookalikes": {c: report[c].plain_in_depth for c in widths}},
        "after": {"png": str(after_png), "ids": ids_after,
                  "lookalikes": {c: report[c].in_depth for c in widths}},
        "combined_png": str(combined_png), "html": str(page), "business": arr.business,
        "depth": depth, "lookalike_cosine": tau,
    }


def _plain_ids(arr: Any) -> list[str]:
    """The plain (rules-only) order of an Arrangement."""
    return [s.id for s in sorted(arr.slots, key=lambda s: s.plain_position)]
