"""Contact sheets of the real-photo set's colour misses: what the colour backend saw.

For each colour-labelled original of a ``benchmarks/realphoto_eval.py`` set (built there
under ``--out``) whose named colour misses its label (or each stamp named by ``--stems``),
one PNG: the photo, the product mask the palette was drawn from (the rest in magenta),
and the named colours as a bar, each as wide as its weight. A line per sheet lists the
palette clusters (CIELAB, weight), so a miss can be told apart as the mask's (the wrong
pixels) or the naming's (the right pixels, another name).

    python benchmarks/realphoto_misses.py --seed 2 --out benchmarks/out/realphoto \\
        [--stems grapes,flower8] [--sheets /tmp/misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SIDE = 256  # pixels a side of each panel
BAR = 40  # height of the colour bar


def seen(backend, pixels: np.ndarray):
    """(the product mask (G, G) bool, the palette's Lab (K, 3) and weights (K,)) of one
    decoded image, as ``ColourBackend.encode_images`` computes them."""
    import torch

    from vismerch.features.colour import _StageClock, drop_outlines, kmeans_palette

    with torch.inference_mode():
        s, _ = backend._analyse(torch.from_numpy(pixels[None]), _StageClock(None, backend.device))
        centred = s.centred.reshape(1, -1).index_select(1, s.cell_idx)
        weights = drop_outlines(s.samples, s.weights, s.mask, s.cell_idx) * centred
        lab, weight = kmeans_palette(s.samples, weights)
    return s.mask[0].cpu().numpy(), lab[0].cpu().numpy(), weight[0].cpu().numpy()


def sheet(pixels: np.ndarray, mask: np.ndarray, named: list):
    """The photo, its masked copy and the named colours' bar, side by side (a PIL image)."""
    from PIL import Image, ImageDraw

    photo = Image.fromarray(pixels).resize((SIDE, SIDE))
    keep = Image.fromarray(mask.astype(np.uint8) * 255).resize((SIDE, SIDE), Image.NEAREST)
    masked = Image.composite(photo, Image.new("RGB", photo.size, (255, 0, 255)), keep)
    out = Image.new("RGB", (2 * SIDE + 8, SIDE + BAR + 4), "white")
    out.paste(photo, (0, 0))
    out.paste(masked, (SIDE + 8, 0))
    draw, x = ImageDraw.Draw(out), 0
    for c in named:
        w = round(out.width * c.weight)
        draw.rectangle([x, SIDE + 4, x + w, SIDE + 4 + BAR], fill=c.hex)
        draw.text((x + 2, SIDE + 6), c.name, fill="black" if (c.lab or (100,))[0] > 50 else "white")
        x += w
    return out


def main(argv: list[str] | None = None) -> list[str]:
    from colour_eval import _families
    from realphoto_eval import COLOUR_LABELS
    from vismerch.config import load_settings
    from vismerch.features.colour import ColourBackend, colour_names
    from vismerch.imaging.decode import decode_image

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "realphoto")
    parser.add_argument("--stems", help="these stamps (comma-separated), missed or not")
    parser.add_argument("--sheets", type=Path, default=Path("realphoto-misses"))
    args = parser.parse_args(argv)
    root = args.out / f"seed-{args.seed}"
    truth = json.loads((root / "truth.json").read_text())
    wanted = set(args.stems.split(",")) if args.stems else None
    settings, fam = load_settings(), _families()
    backend = ColourBackend("cpu", settings)
    args.sheets.mkdir(parents=True, exist_ok=True)
    lines = []
    for pid, p in sorted(truth["products"].items()):
        label = COLOUR_LABELS.get(p["stamp"])
        if not p.get("original") or label is None or (wanted and p["stamp"] not in wanted):
            continue
        pixels = decode_image((root / p["image"]).read_bytes(), settings.working_size,
                              thumb_size=None).pixels
        mask, lab, weight = seen(backend, pixels)
        named = colour_names(lab, weight)[0]
        first = next((c.name for c in named if c.name != "multicolour"), None)
        if wanted is None and fam.get(first) == label:
            continue
        name = f"{args.seed}-{p['stamp']}-{p['photo']}-{pid}.png"
        sheet(pixels, mask, named).save(args.sheets / name)
        clusters = ", ".join("({:.0f} {:.0f} {:.0f}) x{:.2f}".format(*lab[k], weight[k])
                             for k in np.argsort(-weight) if weight[k] > 0)
        lines.append(f"{name}: {label} -> {first}; palette {clusters}")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
