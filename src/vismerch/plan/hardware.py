"""The GPU catalog: ``hardware.toml`` in the package, plus an optional user file.

A user file has the same layout. Fields it gives replace ours (a field overridden without
a source is credited to the user file), new keys add GPUs. ``--set h100.rent_usd_per_h=2``
overrides one field from the command line the same way.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from vismerch.errors import UnknownName, UsageError

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp8", "fp4")
# what --precision auto picks, best first (lowest precision the hardware runs natively)
_AUTO_ORDER: tuple[str, ...] = ("fp4", "fp8", "bf16", "fp32")
NUMERIC_FIELDS: tuple[str, ...] = (
    "memory_gb", "hbm_tb_s", "nvlink_gb_s", "nvlink_domain", "pcie_gb_s", "scaleout_gb_s",
    "gpus_per_node", "tdp_w", "rent_usd_per_h", "purchase_usd",
)
_INT_FIELDS = ("nvlink_domain", "gpus_per_node")
_REQUIRED = ("name", "arch", "memory_gb", "hbm_tb_s", "tdp_w", "rent_usd_per_h", "purchase_usd")


@dataclass(frozen=True)
class GPU:
    """One catalog entry. Bandwidths as published; see hardware.toml for units."""

    key: str
    name: str
    arch: str
    tflops: dict[str, float]
    memory_gb: float
    hbm_tb_s: float
    tdp_w: float
    rent_usd_per_h: float
    purchase_usd: float
    nvlink_gb_s: float = 0.0
    nvlink_domain: int = 1
    pcie_gb_s: float = 64.0
    scaleout_gb_s: float = 12.5
    gpus_per_node: int = 8
    rent_range_usd_per_h: tuple[float, float] | None = None
    aliases: tuple[str, ...] = ()
    source: dict[str, str] = field(default_factory=dict)

    def supports(self, precision: str) -> bool:
        return self.tflops.get(precision, 0) > 0

    def peak_flops(self, precision: str) -> float:
        """Dense peak in FLOP/s for a precision (KeyError when unsupported)."""
        return self.tflops[precision] * 1e12

    @property
    def mem_bytes_per_s(self) -> float:
        return self.hbm_tb_s * 1e12

    @property
    def nvlink_bytes_per_s_each_way(self) -> float:
        return self.nvlink_gb_s * 1e9 / 2

    @property
    def scaleout_bytes_per_s(self) -> float:
        return self.scaleout_gb_s * 1e9

    def auto_precision(self) -> str:
        return next(p for p in _AUTO_ORDER if self.supports(p))

    def source_of(self, name: str) -> str | None:
        """The source for a figure (``tflops.fp8`` falls back to ``tflops``)."""
        if name in self.source:
            return self.source[name]
        if name.startswith("tflops."):
            return self.source.get("tflops")
        return None

    def figures(self) -> list[str]:
        """Names of every numeric figure of this entry (for the every-figure-sourced check)."""
        names = list(NUMERIC_FIELDS)
        names += [f"tflops.{p}" for p in self.tflops]
        if self.rent_range_usd_per_h is not None:
            names.append("rent_range_usd_per_h")
        return names


def _gpu_from_table(key: str, table: Mapping[str, Any], origin: str) -> GPU:
    missing = [f for f in _REQUIRED if f not in table] + ([] if table.get("tflops") else ["tflops"])
    if missing:
        raise UsageError(
            f"GPU {key!r} in {origin} lacks {', '.join(missing)}",
            hint="see the header of vismerch/plan/hardware.toml for the fields and units",
        )
    try:
        tflops = {str(p): float(v) for p, v in dict(table["tflops"]).items()}
        values = {f: float(table[f]) for f in NUMERIC_FIELDS if f in table}
        for f in _INT_FIELDS:
            if f in values:
                values[f] = int(values[f])
        rng = table.get("rent_range_usd_per_h")
        rent_range = (float(rng[0]), float(rng[1])) if rng else None
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise UsageError(f"GPU {key!r} in {origin}: a figure is not a number ({exc})") from exc
    unknown = set(tflops) - set(PRECISIONS)
    if unknown:
        raise UsageError(f"GPU {key!r} in {origin}: unknown precision {sorted(unknown)}",
                         hint="precisions: " + ", ".join(PRECISIONS))
    return GPU(
        key=key, name=str(table["name"]), arch=str(table["arch"]), tflops=tflops,
        rent_range_usd_per_h=rent_range, aliases=tuple(str(a).lower() for a in table.get("aliases", ())),
        source={str(k): str(v) for k, v in dict(table.get("source", {})).items()}, **values,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read hardware file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"hardware file {path} is not valid TOML: {exc}") from exc


class Catalog:
    """GPUs by key, with aliases, user overrides and device-name matching."""

    def __init__(self, gpus: Mapping[str, GPU]):
        self._gpus = dict(gpus)

    @classmethod
    def load(cls, user_file: str | Path | None = None) -> Catalog:
        text = resources.files("vismerch.plan").joinpath("hardware.toml").read_text()
        data = tomllib.loads(text)
        catalog = cls({k: _gpu_from_table(k, t, "hardware.toml") for k, t in data["gpu"].items()})
        if user_file is not None:
            catalog = catalog.merged(_read_toml(Path(user_file)), origin=str(user_file))
        return catalog

    def merged(self, data: Mapping[str, Any], origin: str) -> Catalog:
        """A new catalog with ``data['gpu']`` entries merged over this one."""
        entries = data.get("gpu")
        if not isinstance(entries, Mapping) or not entries:
            raise UsageError(f"{origin} has no [gpu.<name>] tables",
                             hint="see the header of vismerch/plan/hardware.toml")
        gpus = dict(self._gpus)
        for raw_key, table in entries.items():
            key = self.resolve(raw_key, missing_ok=True) or raw_key.lower()
            base = _as_table(gpus[key]) if key in gpus else {}
            merged = {**base, **{k: v for k, v in table.items() if k not in ("tflops", "source")}}
            merged["tflops"] = {**base.get("tflops", {}), **dict(table.get("tflops", {}))}
            sources = dict(base.get("source", {}))
            for name in table:
                if name not in ("source", "tflops", "name", "arch", "aliases"):
                    sources[name] = f"user file {origin}"
            for prec in table.get("tflops", {}):
                sources[f"tflops.{prec}"] = f"user file {origin}"
            sources.update({str(k): str(v) for k, v in dict(table.get("source", {})).items()})
            merged["source"] = sources
            gpus[key] = _gpu_from_table(key, merged, origin)
        return Catalog(gpus)

    def with_fields(self, overrides: Mapping[str, Mapping[str, str]]) -> Catalog:
        """Apply ``--set gpu.field=value`` overrides."""
        gpus = dict(self._gpus)
        for raw_key, fields in overrides.items():
            key = self.resolve(raw_key)
            gpu = gpus[key]
            changes: dict[str, Any] = {}
            tflops = dict(gpu.tflops)
            for name, value in fields.items():
                try:
                    number = float(value)
                except ValueError as exc:
                    raise UsageError(f"--set {raw_key}.{name}: {value!r} is not a number") from exc
                if name.startswith("tflops."):
                    precision = name.split(".", 1)[1]
                    if precision not in PRECISIONS:
                        raise UsageError(f"--set {raw_key}.{name}: unknown precision {precision!r}",
                                         hint="precisions: " + ", ".join(PRECISIONS))
                    tflops[precision] = number
                elif name in NUMERIC_FIELDS:
                    changes[name] = int(number) if name in _INT_FIELDS else number
                else:
                    raise UsageError(f"--set {raw_key}.{name}: unknown GPU field",
                                     hint="fields: " + ", ".join(NUMERIC_FIELDS + ("tflops.<precision>",)))
            source = dict(gpu.source)
            source.update({name: "command line --set" for name in fields})
            gpus[key] = replace(gpu, tflops=tflops, source=source, **changes)
        return Catalog(gpus)

    def names(self) -> list[str]:
        return list(self._gpus)

    def resolve(self, name: str, missing_ok: bool = False) -> str | None:
        wanted = name.strip().lower()
        if wanted in self._gpus:
            return wanted
        for key, gpu in self._gpus.items():
            if wanted in gpu.aliases:
                return key
        if missing_ok:
            return None
        raise UnknownName(f"unknown GPU {name!r}", hint="known: " + ", ".join(self._gpus))

    def get(self, name: str) -> GPU:
        return self._gpus[self.resolve(name)]

    def __iter__(self):
        return iter(self._gpus.values())

    def match_device(self, device_name: str) -> str | None:
        """Catalog key for a CUDA device name ("NVIDIA H100 80GB HBM3" -> "h100")."""
        tokens = set(re.split(r"[^a-z0-9]+", device_name.lower()))
        joined = re.sub(r"[^a-z0-9]+", "-", device_name.lower())
        # longest names first so "l40s" wins over "l4"
        for key in sorted(self._gpus, key=len, reverse=True):
            candidates = (key, *self._gpus[key].aliases)
            if any(c in tokens or f"-{c}-" in f"-{joined}-" for c in candidates):
                return key
        return None


def _as_table(gpu: GPU) -> dict[str, Any]:
    table: dict[str, Any] = {f: getattr(gpu, f) for f in NUMERIC_FIELDS}
    table.update(name=gpu.name, arch=gpu.arch, tflops=dict(gpu.tflops), aliases=list(gpu.aliases),
                 source=dict(gpu.source))
    if gpu.rent_range_usd_per_h is not None:
        table["rent_range_usd_per_h"] = list(gpu.rent_range_usd_per_h)
    return table
