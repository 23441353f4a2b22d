"""Workload models: FLOPs, bytes and memory from a model's configuration, not a constant.

A ViT image tower is described by width, depth, patch, resolution and MLP width; every
count below follows from those (multiply-add = 2 FLOPs). Presets match open_clip's
published profile (docs/model_profile.csv: image GFLOPs and parameters) within ~1%,
which the tests check. ``vit:width=1024,depth=24,patch=14,resolution=224`` describes any
other ViT.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vismerch.errors import UnknownName, UsageError


@dataclass(frozen=True)
class ViTConfig:
    name: str
    width: int
    depth: int
    patch: int
    resolution: int
    mlp_dim: int = 0  # 0 -> 4 x width
    pool: str = "cls"  # "cls" token, or "map" (SigLIP attention-pool head, no cls token)
    embed_dim: int = 0  # output projection width (0 = none)
    channels: int = 3

    @property
    def mlp(self) -> int:
        return self.mlp_dim or 4 * self.width

    @property
    def patches(self) -> int:
        return (self.resolution // self.patch) ** 2

    @property
    def tokens(self) -> int:
        return self.patches + (1 if self.pool == "cls" else 0)

    def params(self) -> float:
        d, m = self.width, self.mlp
        block = (4 * d * d + 4 * d) + (2 * d * m + m + d) + 4 * d  # attn, MLP, 2 LayerNorms
        stem = self.channels * self.patch**2 * d + d + self.tokens * d + (d if self.pool == "cls" else 0)
        head = 4 * d  # ln_pre/ln_post
        if self.pool == "map":
            head += block + d  # one attention-pool block and its probe token
        if self.embed_dim:
            head += d * self.embed_dim
        return float(self.depth * block + stem + head)

    def forward_flops(self) -> float:
        """FLOPs for one image through the tower."""
        n, d, m = self.tokens, self.width, self.mlp
        per_layer = 2 * n * (4 * d * d + 2 * d * m) + 4 * n * n * d  # projections + QK^T, AV
        stem = 2 * self.patches * self.channels * self.patch**2 * d
        head = 0.0
        if self.pool == "map":  # keys/values over all tokens, one query through the MLP
            head = 2 * n * 2 * d * d + 4 * n * d + 2 * (2 * d * d + 2 * d * m)
        if self.embed_dim:
            head += 2 * d * self.embed_dim
        return float(self.depth * per_layer + stem + head)

    def activation_traffic(self, act_bytes: float) -> float:
        """HBM bytes moved by activations for one image in inference.

        Per layer, counting d-wide tensors read+written: LN 2, QKV 1+3, fused (flash)
        attention 3+1, out-proj 2, residual 3, LN 2, fc1 1+r, fc2 r+1, residual 3 —
        i.e. (22 + 2r) * tokens * width with GELU fused into fc1.
        """
        r = self.mlp / self.width
        return self.depth * (22 + 2 * r) * self.tokens * self.width * act_bytes

    def inference_live_bytes(self, act_bytes: float) -> float:
        """Peak transient activation memory per image (a few layer tensors alive)."""
        return (4 * self.width + 2 * self.mlp) * self.tokens * act_bytes

    def train_activation_bytes(self) -> float:
        """Activations kept for backward, per image, 16-bit, flash attention, no recompute.

        Korthikanti et al. 2022 (arXiv 2205.05198): 34*s*h + 5*a*s^2 bytes per layer per
        sequence; flash attention does not store the 5*a*s^2 score tensors.
        """
        r = self.mlp / self.width
        return self.depth * (34 + 4 * (r - 4)) * self.tokens * self.width

    def describe(self) -> dict:
        out = asdict(self)
        out["mlp_dim"] = self.mlp
        out.update(tokens=self.tokens, params_m=round(self.params() / 1e6, 2),
                   gflops_per_image=round(self.forward_flops() / 1e9, 2))
        return out


PRESETS: dict[str, ViTConfig] = {
    c.name: c
    for c in (
        ViTConfig("vit-b-32", 768, 12, 32, 224, embed_dim=512),
        ViTConfig("vit-b-16", 768, 12, 16, 224, embed_dim=512),
        ViTConfig("vit-l-14", 1024, 24, 14, 224, embed_dim=768),
        ViTConfig("vit-l-14-336", 1024, 24, 14, 336, embed_dim=768),
        ViTConfig("vit-h-14", 1280, 32, 14, 224, embed_dim=1024),
        ViTConfig("vit-g-14", 1408, 40, 14, 224, mlp_dim=6144, embed_dim=1024),
        ViTConfig("siglip-b-16", 768, 12, 16, 224, pool="map"),
        ViTConfig("siglip-so400m", 1152, 27, 14, 384, mlp_dim=4304, pool="map"),
    )
}

# The one FLOP convention of the project (benchmarks/gpu.py, gpu_ingest.py, the planner).
FLOP_CONVENTION = (
    "FLOPs = 2 x multiply-accumulates (timm's GMACs x 2) of the matrix products: patch "
    "embedding, QKV/output projections, MLP, QK^T and AV, pooling head, output projection; "
    "softmax, LayerNorm, GELU, biases and preprocessing are not counted. MFU = achieved model "
    "FLOP/s / the card's dense datasheet peak at the precision run (plan/hardware.toml), not "
    "a measured matmul peak."
)


def model_flops_utilisation(flops_per_item: float, items_per_s: float, peak_flops: float) -> float:
    """MFU under ``FLOP_CONVENTION``: ``peak_flops`` is the datasheet dense peak in FLOP/s."""
    if peak_flops <= 0:
        raise UsageError("MFU needs a positive peak")
    return flops_per_item * items_per_s / peak_flops


def clip_vision(hidden: int, layers: int, patch: int, image_size: int, intermediate: int,
                projection: int = 0, name: str = "custom") -> ViTConfig:
    """A CLIP image tower in the planner's terms (the fields transformers' configs use)."""
    return ViTConfig(name, hidden, layers, patch, image_size, mlp_dim=intermediate, embed_dim=projection)


_SPEC_KEYS = {"width", "depth", "patch", "resolution", "mlp_dim", "embed_dim", "pool"}


def get_model(spec: str | ViTConfig | dict) -> ViTConfig:
    """A preset name, ``vit:width=..,depth=..,patch=..,resolution=..``, a dict or a config."""
    if isinstance(spec, ViTConfig):
        return spec
    if isinstance(spec, dict):
        return _from_fields("custom", {k: str(v) for k, v in spec.items()})
    name = spec.strip().lower().replace("_", "-")
    if name in PRESETS:
        return PRESETS[name]
    if name.startswith("vit:"):
        fields: dict[str, str] = {}
        for part in filter(None, name[4:].split(",")):
            key, sep, value = part.partition("=")
            if not sep:
                raise UsageError(f"model spec {spec!r}: {part!r} is not key=value")
            fields[key.strip()] = value.strip()
        return _from_fields(spec, fields)
    raise UnknownName(
        f"unknown model {spec!r}",
        hint="presets: " + ", ".join(PRESETS)
        + "; or vit:width=1024,depth=24,patch=14,resolution=224[,mlp_dim=4096,pool=map]",
    )


def _from_fields(name: str, fields: dict[str, str]) -> ViTConfig:
    unknown = set(fields) - _SPEC_KEYS
    missing = {"width", "depth", "patch", "resolution"} - set(fields)
    if unknown or missing:
        raise UsageError(
            f"model spec {name!r}: " + (f"unknown keys {sorted(unknown)} " if unknown else "")
            + (f"missing {sorted(missing)}" if missing else ""),
            hint="keys: width, depth, patch, resolution, and optionally mlp_dim, embed_dim, pool",
        )
    try:
        ints = {k: int(v) for k, v in fields.items() if k != "pool"}
    except ValueError as exc:
        raise UsageError(f"model spec {name!r}: sizes must be whole numbers ({exc})") from exc
    if any(v < 0 for v in ints.values()) or min(ints["width"], ints["depth"], ints["patch"]) < 1:
        raise UsageError(f"model spec {name!r}: sizes must be positive")
    if ints["resolution"] < ints["patch"]:
        raise UsageError(f"model spec {name!r}: resolution is smaller than the patch")
    pool = fields.get("pool", "cls")
    if pool not in ("cls", "map"):
        raise UsageError(f"model spec {name!r}: pool must be cls or map")
    return ViTConfig(name=name, pool=pool, **ints)


@dataclass(frozen=True)
class SearchShape:
    """Brute-force (or IVF-fraction) similarity search over ``vectors`` x ``dim``."""

    vectors: float
    dim: int
    queries: float
    vector_bytes: float = 2.0
    scan_fraction: float = 1.0

    @property
    def index_bytes(self) -> float:
        return self.vectors * self.dim * self.vector_bytes

    def batch_flops_bytes(self, batch: float, shard_vectors: float) -> tuple[float, float]:
        """One query batch against one shard: every scanned vector is read once per batch."""
        scanned = shard_vectors * self.scan_fraction
        flops = 2.0 * batch * scanned * self.dim
        traffic = scanned * self.dim * self.vector_bytes + 2 * batch * self.dim * self.vector_bytes
        return flops, traffic
