"""`vismerch demo`: generate the sample catalog, ingest it, write the report, and score
what vismerch found against the catalog's ground truth."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vismerch.config import Settings

SUMMARY_KEYS = (
    "colour_accuracy", "duplicate_precision", "duplicate_recall",
    "quality_precision", "quality_recall", "report",
)


def predictions(store) -> dict[str, Any]:
    """What the store says, in the shape the scorer takes."""
    colours = {pid: cols[0]["name"] for pid, cols in store.colours().items() if cols}
    groups = [g["members"] for g in store.dup_groups()]
    flags = {pid: {f["name"] for f in fl} for pid, fl in store.quality().items()}
    failed = {e["product_id"]: e["reason"] for e in store.errors()}
    return {"colours": colours, "groups": groups, "flags": flags, "failed": failed}


def _demo_settings(settings: Settings | None) -> Settings:
    """The demo's 600 images afford style vectors on a CPU too: ``auto`` means EfficientNet-
    Lite0 here when its weights are installed, else the shape vectors, so the similar-items
    choice is always shown."""
    from vismerch.config import load_settings
    from vismerch.features.effnet_lite import packaged_weights

    settings = settings or load_settings()
    if str(settings.style_encoder).strip().lower() == "auto":
        return settings.replace(style_encoder="effnet" if packaged_weights() is not None else "shape")
    return settings


DEMO_OUTPUTS = ("catalog", "store", "report.html")  # what a demo writes under its folder


def clear_previous_demo(out: Path) -> None:
    """A demo starts from scratch: a previous demo's outputs in ``out`` are removed (its week
    of traffic would clash with the new one's); a store there that no demo made is refused."""
    import shutil

    from vismerch.errors import UsageError

    if not (out / "store").exists():
        return
    if not (out / "catalog" / "truth.json").exists():
        raise UsageError(f"{out} holds a store that is not a demo's; the demo will not overwrite it",
                         hint="give the demo another folder with --out")
    for name in DEMO_OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def run_demo(
    n: int = 600,
    out: str | os.PathLike = "demo-output",
    seed: int = 0,
    workers: int | None = None,
    progress: bool = True,
    settings: Settings | None = None,
) -> dict[str, Any]:
    from vismerch.catalog.store import Store
    from vismerch.pipeline.ingest import ingest
    from vismerch.report.html import arranged_collection, write_report
    from vismerch.sample import generate_catalog
    from vismerch.sample.evaluate import score_against_truth

    out = Path(out)
    clear_previous_demo(out)
    settings = _demo_settings(settings)
    started = time.perf_counter()
    catalog = generate_catalog(out / "catalog", n=n, seed=seed)
    generated = time.perf_counter()
    summary = ingest(catalog.manifest_path, out / "store", workers=workers, progress=progress,
                     settings=settings)
    ingested = time.perf_counter()
    with Store.open(out / "store") as store:
        arranged = arranged_collection(store, settings=settings)
        report = write_report(store, out / "report.html", arrangement=arranged, settings=settings)
        predicted = predictions(store)
    traffic = _week_of_traffic(out / "store", arranged, settings, seed)
    truth = catalog.truth()
    similar = similar_by_mode(out / "store", truth, settings)
    scores = score_against_truth(
        truth, predicted["colours"], predicted["groups"], predicted["flags"], failed=predicted["failed"]
    )
    result: dict[str, Any] = {key: scores[key] for key in SUMMARY_KEYS if key in scores}
    result["report"] = str(report)
    for key, value in scores.items():
        result.setdefault(key, value)
    result.update({
        "products": summary.total,
        "ingested": summary.ingested,
        "skipped": summary.skipped,
        "failed": summary.failed,
        "failed_by_reason": summary.failed_by_reason,
        "ingest_images_per_s": summary.images_per_s,
        "seconds_generate": round(generated - started, 2),
        "seconds_ingest": round(ingested - generated, 2),
        "seconds_total": round(time.perf_counter() - started, 2),
        "store": str(out / "store"),
        "arrangement": _arrangement_summary(arranged),
        "traffic": traffic,
        "similar_by_mode": similar,
    })
    return result


def similar_by_mode(store: Path, truth: dict[str, Any], settings: Settings, queries: int = 120,
                    k: int = 5) -> dict[str, Any] | None:
    """Similar items in each mode the store answers, on its first ``queries`` products: the
    share of each one's ``k`` nearest with its category (its kind), its colour, and both,
    by the catalog's truth; and the model of its style vectors."""
    import json

    from vismerch.service import search
    from vismerch.service.workspace import Workspace

    products = truth["products"]
    with Workspace.open(store, settings, writable=False) as ws:
        modes = search.similar_modes(ws)
        fingerprint = (ws.store.fingerprints("style") or [None])[0]
        ids = [p for p in ws.features("colour").ids if p in products][:queries]
        out: dict[str, Any] = {"queries": len(ids), "k": k,
                               "style_model": json.loads(fingerprint)["model"] if fingerprint else None}
        for mode in modes:
            same = {"category": 0, "colour": 0, "both": 0}
            for pid in ids:
                for hit in search.similar(ws, pid, k=k, mode=mode).hits:
                    a, b = products[pid], products.get(hit.id, {})
                    cat, col = a["category"] == b.get("category"), a["colour"] == b.get("colour")
                    same["category"] += cat
                    same["colour"] += col
                    same["both"] += cat and col
            out[mode] = {key: round(v / max(1, len(ids) * k), 3) for key, v in same.items()}
    return out


def _week_of_traffic(store: Path, arranged: dict[str, Any] | None, settings: Settings, seed: int
                     ) -> dict[str, Any] | None:
    """A simulated week of shoppers on the arranged collection, with its analytics in short."""
    from vismerch.service import events
    from vismerch.service.demo_traffic import simulate_week
    from vismerch.service.workspace import Workspace

    if not arranged or "error" in arranged:
        return None
    with Workspace.open(store, settings) as ws:
        written = simulate_week(ws, arranged["collection"], seed=seed)
        totals = events.collection_analytics(ws, arranged["collection"])["totals"]
    return {**written, "impressions": totals["impressions"], "clicks": totals["clicks"],
            "orders": totals["orders"], "revenue": round(totals["revenue"], 2)}


def _arrangement_summary(done: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report's arranged collection in short: look-alike neighbours per grid width."""
    if done is None or "error" in done:
        return done
    return {
        "collection": done["collection"],
        "lookalikes_before": done["before"]["lookalikes"],
        "lookalikes_after": done["after"]["lookalikes"],
        "business_kept": round(float(done["business"]["ratio"]), 4),
        "preview": done["combined_png"],
    }
