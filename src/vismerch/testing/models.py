"""Tiny random-initialised CLIP and SigLIP models of the real architectures, on disk.

They are saved with ``save_pretrained`` (weights, config, tokenizer, image-processor
config) and then loaded by vismerch through exactly the code that loads real weights,
so tests exercise the real path without any download. The tokenizers are built here
from a small vocabulary (byte-level BPE alphabet for CLIP, a character Unigram model for
SigLIP), never fetched.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import torch

# every layer width is a multiple of 32 so that the FP8/FP4 paths convert all linears
TINY = {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "image_size": 32, "patch": 8}


def clip_tokenizer(max_length: int = 77):
    """A CLIPTokenizer over the byte-level alphabet (no merges): any text tokenises."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    vocab: dict[str, int] = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    alphabet = sorted(ByteLevel.alphabet())
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    for ch in alphabet:
        vocab.setdefault(ch + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=max_length)


def siglip_tokenizer(max_length: int = 64):
    """A SentencePiece-style Unigram tokenizer (fast backend; needs no sentencepiece)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    chars = string.ascii_lowercase + string.digits + string.punctuation
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    pieces += [(c, -3.0) for c in chars] + [("\u2581" + c, -2.5) for c in chars]
    tok = Tokenizer(models.Unigram(pieces, unk_id=2, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="</s>",
        pad_token="</s>",
        unk_token="<unk>",
        model_max_length=max_length,
    )


LAYOUTS = ("processor", "image-processor")


def _save_processor(folder: Path, processor_cls: Any, image_processor: Any, tokenizer: Any,
                    layout: str) -> None:
    """Save tokenizer and image processor the way a user would, with the installed
    transformers deciding the files. ``processor``: ``Processor.save_pretrained`` (5.x
    writes ``processor_config.json`` with the image processor nested, 4.x wrote
    ``preprocessor_config.json``); ``image-processor``: each part's own save_pretrained,
    which writes ``preprocessor_config.json`` (the layout of most hub repositories)."""
    if layout == "processor":
        processor_cls(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    elif layout == "image-processor":
        image_processor.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")


# real CLIP architectures (vision tower as published; text tower of the OpenAI models)
CLIP_ARCHS: dict[str, dict[str, int]] = {
    "tiny": dict(TINY, text_hidden=64, text_layers=2, text_heads=4, projection=32),
    "vit-s-16": dict(
        hidden=384, intermediate=1536, layers=12, heads=6, image_size=224, patch=16,
        text_hidden=384, text_layers=6, text_heads=6, projection=384,
    ),
    "vit-b-16": dict(
        hidden=768, intermediate=3072, layers=12, heads=12, image_size=224, patch=16,
        text_hidden=512, text_layers=12, text_heads=8, projection=512,
    ),
    "vit-l-14": dict(
        hidden=1024, intermediate=4096, layers=24, heads=16, image_size=224, patch=14,
        text_hidden=768, text_layers=12, text_heads=12, projection=768,
    ),
}


def save_random_clip(
    folder: str | Path,
    arch: str = "tiny",
    seed: int = 0,
    image_size: int | None = None,
    layout: str = "processor",
) -> Path:
    """Save a random-initialised ``CLIPModel`` of a named architecture (``CLIP_ARCHS``)
    with its tokenizer and image processor, ready for ``from_pretrained`` (``layout``:
    see ``_save_processor``)."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    a = CLIP_ARCHS[arch]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    size = image_size or a["image_size"]
    tokenizer = clip_tokenizer()
    text_hidden = a["text_hidden"]
    config = CLIPConfig(
        text_config=dict(
            hidden_size=text_hidden,
            intermediate_size=4 * text_hidden if arch != "tiny" else a["intermediate"],
            num_hidden_layers=a["text_layers"],
            num_attention_heads=a["text_heads"],
            vocab_size=len(tokenizer),
            max_position_embeddings=77,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        ),
        vision_config=dict(
            hidden_size=a["hidden"],
            intermediate_size=a["intermediate"],
            num_hidden_layers=a["layers"],
            num_attention_heads=a["heads"],
            image_size=size,
            patch_size=a["patch"],
        ),
        projection_dim=a["projection"],
    )
    torch.manual_seed(seed)
    CLIPModel(config).eval().save_pretrained(folder)
    image_processor = CLIPImageProcessor(
        do_resize=True,
        size={"shortest_edge": size},
        resample=3,
        do_center_crop=True,
        crop_size={"height": size, "width": size},
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=[0.48145466, 0.4578275, 0.40821073],
        image_std=[0.26862954, 0.26130258, 0.27577711],
        do_convert_rgb=True,
    )
    _save_processor(folder, CLIPProcessor, image_processor, tokenizer, layout)
    return folder


def save_tiny_clip(
    folder: str | Path, seed: int = 0, image_size: int | None = None, layout: str = "processor"
) -> Path:
    """Save a tiny random CLIP (real ``CLIPModel`` architecture) with tokenizer and processor."""
    return save_random_clip(folder, "tiny", seed=seed, image_size=image_size, layout=layout)


def save_tiny_siglip(
    folder: str | Path, seed: int = 0, image_size: int | None = None, layout: str = "processor"
) -> Path:
    """Save a random SigLIP (real ``SiglipModel`` architecture) with tokenizer and processor."""
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    size = image_size or TINY["image_size"]
    tokenizer = siglip_tokenizer()
    common = dict(
        hidden_size=TINY["hidden"],
        intermediate_size=TINY["intermediate"],
        num_hidden_layers=TINY["layers"],
        num_attention_heads=TINY["heads"],
    )
    config = SiglipConfig(
        text_config=dict(
            common,
            vocab_size=len(tokenizer),
            max_position_embeddings=64,
            pad_token_id=1,
            eos_token_id=1,
            bos_token_id=None,
        ),
        vision_config=dict(common, image_size=size, patch_size=TINY["patch"]),
    )
    torch.manual_seed(seed)
    SiglipModel(config).eval().save_pretrained(folder)
    image_processor = SiglipImageProcessor(
        do_resize=True,
        size={"height": size, "width": size},
        resample=2,
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        do_convert_rgb=True,
    )
    _save_processor(folder, SiglipProcessor, image_processor, tokenizer, layout)
    return folder


def store_with_vectors(
    store_path: str | Path,
    backend: Any,
    products: list[dict[str, Any]],
    images: Any,
) -> Any:
    """A store whose ``products`` (dicts with ``id`` and optional title, description,
    category, attributes) have ``backend``'s vectors for ``images`` (uint8 (N, H, W, 3)),
    written as one committed shard (with the backend's extra columns), as ingest would.
    Call it again with another backend to add its features. For tests of search and
    tagging that need vectors without running the whole pipeline."""
    import hashlib

    from vismerch.catalog.shards import record_shard, write_shard
    from vismerch.catalog.store import Store
    from vismerch.features.base import fingerprint_key

    store = Store.open(store_path, create=True)
    shas = [hashlib.sha256(f"image-{p['id']}".encode()).hexdigest() for p in products]
    out = backend.encode_images(images)
    path = write_shard(store.path, backend.name, "part-test-00000", shas, out.vectors, out.columns)
    fingerprint = fingerprint_key(backend.fingerprint)
    with store.transaction() as con:
        for p, sha in zip(products, shas, strict=True):
            con.execute(
                "INSERT OR IGNORE INTO images (sha256, width, height, bytes, format) VALUES (?,?,?,?,?)",
                (sha, int(images.shape[2]), int(images.shape[1]), 1, "PNG"),
            )
            con.execute(
                "INSERT OR IGNORE INTO products (id, image_path, sha256, status, title, description, "
                "category, attributes) VALUES (?,?,?,?,?,?,?,?)",
                (
                    p["id"],
                    f"/nonexistent/{p['id']}.png",
                    sha,
                    "ok",
                    p.get("title"),
                    p.get("description"),
                    p.get("category"),
                    json.dumps(p.get("attributes", {})),
                ),
            )
        record_shard(con, backend.name, fingerprint, json.dumps({"backend": backend.name}), path, shas)
    return store
