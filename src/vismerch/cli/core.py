"""Core commands: ingest, tags, quality, audit, errors, dupes, similar, search, report, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg, console
from vismerch.cli.output import open_store as _open
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import table as _table


def ingest_cmd(
    source: Annotated[Path, typer.Argument(help="Folder of images, or a manifest (.csv, .jsonl, .parquet).")],
    store: Annotated[Path, typer.Option("--store", "-s", help="Store directory (created if missing).")],
    backend: Annotated[
        list[str], typer.Option("--backend", "-b", help="Feature backend(s); colour always runs.")
    ] = ["colour"],  # noqa: B006 - typer needs a list default
    workers: Annotated[int, typer.Option(help="Worker processes (0 = one per core).")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    model: Annotated[str | None, typer.Option(help="Model id or local folder for neural backends.")] = None,
    revision: Annotated[str | None, typer.Option(help="Pinned model revision (commit/tag).")] = None,
    precision: Annotated[str, typer.Option(help="auto|fp32|bf16|fp16|fp8|fp4 for neural backends.")] = "auto",
    compile: Annotated[bool, typer.Option("--compile", help="torch.compile the neural encoder.")] = False,
    config: Annotated[Path | None, typer.Option(help="Settings TOML file.")] = None,
    distributor: Annotated[
        str | None, typer.Option(help="auto, local, device or ray (setting: distributor).")
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="With --distributor ray: local, auto or HOST:PORT (setting: ray_address)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Ingest a catalog into a store: incremental, resumable, safe on bad files."""
    from vismerch.config import load_settings
    from vismerch.pipeline.ingest import ingest

    settings = load_settings(toml_path=config,
                             overrides={"distributor": distributor, "ray_address": ray_address})
    neural = {"model": model, "revision": revision, "precision": precision, "compile": compile or None}
    options = {b: neural for b in backend if b in ("clip", "siglip", "openclip")}
    summary = ingest(
        source, store, backends=backend, backend_options=options, settings=settings,
        workers=workers or None, device=device, progress=not json_out,
    )
    if json_out:
        _print_json(summary.as_dict())
        return
    console.print(
        f"[bold green]done[/] {summary.total} products: {summary.ingested} ingested, "
        f"{summary.skipped} skipped (unchanged), {summary.failed} failed "
        f"in {summary.seconds:.1f}s ({summary.images_per_s:.1f} images/s)"
    )
    if summary.failed_by_reason:
        _table("failed by reason", ["reason", "count"], [[r, n] for r, n in summary.failed_by_reason.items()])
    if summary.phases:
        _table("time per phase (s, summed over workers)", ["phase", "seconds"],
               [[p, f"{s:.2f}"] for p, s in summary.phases.items()])


def tags_cmd(
    store: StoreArg,
    attribute: Annotated[
        str | None, typer.Option(help="Attribute tags (neural): pattern, category, sleeve-length, ...")
    ] = None,
    threshold: Annotated[float | None, typer.Option(help="Minimum attribute tag score.")] = None,
    vocabulary: Annotated[
        Path | None, typer.Option(help="Attribute vocabulary TOML (default: built in).")
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(help="Record a merchandiser label ID=LABEL for --attribute (overrides zero-shot)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Colour tags and quality flags per product (or zero-shot attribute tags)."""
    s = _open(store)
    if attribute is not None:
        from vismerch.errors import UsageError
        from vismerch.merch.tagging import set_tag_label, tag_attributes

        for item in label or []:
            pid, sep, value = item.partition("=")
            if not sep or not pid or not value:
                raise UsageError(f"--label {item!r}: expected ID=LABEL")
            if s.product(pid) is None:
                raise UsageError(f"--label {item!r}: no product {pid!r}")
            set_tag_label(s, pid, attribute, value)
        data = tag_attributes(s, attribute=attribute, threshold=threshold, vocabulary=vocabulary)
        if json_out:
            _print_json(data)
            return
        _table(f"{attribute} tags", ["id", "tags"], [
            [d["id"], ", ".join(f"{t['name']} {t['score']:.2f}" for t in d["tags"])] for d in data
        ])
        return
    if label:
        from vismerch.errors import UsageError

        raise UsageError(
            "--label needs --attribute", hint="vismerch tags STORE --attribute pattern --label ID=striped"
        )
    data = s.tags()
    if json_out:
        _print_json(data)
        return
    _table("tags", ["id", "colours", "flags"], [
        [d["id"], ("multicolour: " if d["multicolour"] else "")
         + ", ".join(f"{c['name']} {c['weight']:.0%}" for c in d["colours"]),
         ", ".join(f"{f['name']} ({f['value']:g})" for f in d["flags"])]
        for d in data
    ])


def quality_cmd(
    store: StoreArg,
    all_metrics: Annotated[bool, typer.Option("--all", help="Every metric, not just flagged ones.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Image-quality flags with the measured value beside each."""
    s = _open(store)
    data = [{"id": pid, "flags": flags} for pid, flags in s.quality(flagged_only=not all_metrics).items()]
    if json_out:
        _print_json(data)
        return
    _table("quality", ["id", "flags"], [
        [d["id"], ", ".join(f"{f['name']}={f['value']:g}" for f in d["flags"])] for d in data
    ])


def audit_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Catalog audit: listed colours that disagree with the image (CIEDE2000 as evidence)."""
    data = _open(store).audit()
    if json_out:
        _print_json(data)
        return
    _table("listed colour vs image", ["id", "listed", "observed", "ΔE00"],
           [[d["id"], d["listed"], d["observed"], f"{d['distance']:.1f}"] for d in data])


def errors_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Images that were refused, with the reason."""
    data = _open(store).errors()
    if json_out:
        _print_json(data)
        return
    rows = [[d["product_id"], d["reason"], d["detail"]] for d in data]
    _table("refused images", ["id", "reason", "detail"], rows)


def dupes_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Near-duplicate groups with their representative."""
    data = _open(store).dup_groups()
    if json_out:
        _print_json(data)
        return
    _table("duplicate groups", ["group", "representative", "members"],
           [[d["group"], d["representative"], ", ".join(d["members"])] for d in data])


def similar_cmd(
    store: StoreArg,
    product_id: Annotated[str, typer.Argument(help="Product id.")],
    k: Annotated[int, typer.Option("-k", help="How many.")] = 12,
    same_category: Annotated[bool, typer.Option("--same-category", help="Only the same category.")] = False,
    in_stock: Annotated[bool, typer.Option("--in-stock", help="Only products in stock.")] = False,
    backend: Annotated[str | None, typer.Option(help="Vectors to use (default: neural if present).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """More like this: the most similar products to one product."""
    from vismerch import api

    data = api.similar(store, product_id, k, same_category=same_category, in_stock=in_stock, backend=backend)
    if json_out:
        _print_json(data)
        return
    _table(f"similar to {product_id}", ["id", "score"], [[d["id"], f"{d['score']:.3f}"] for d in data])


def search_cmd(
    store: StoreArg,
    query: Annotated[str | None, typer.Argument(help="Text query (needs neural or text features).")] = None,
    colour: Annotated[str | None, typer.Option("--colour", "--color", help="Colour name or #hex.")] = None,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many.")] = 12,
    json_out: JsonOpt = False,
) -> None:
    """Search by text, by colour, or both."""
    from vismerch import api

    data = api.search(store, query, colour=colour, category=category, k=k)
    if json_out:
        _print_json(data)
        return
    _table("results", ["id", "score"], [[d["id"], f"{d['score']:.3f}"] for d in data])


def report_cmd(
    store: StoreArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write.")] = Path("report.html"),
) -> None:
    """Write one self-contained HTML report of the store."""
    from vismerch.report.html import write_report

    path = write_report(_open(store), output)
    console.print(f"report written to [bold]{_safe(path)}[/]")


def demo_cmd(
    n: Annotated[int, typer.Option("--n", help="Products in the sample catalog.")] = 600,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("demo-output"),
    seed: Annotated[int, typer.Option(help="Random seed of the sample catalog.")] = 0,
    workers: Annotated[int, typer.Option(help="Worker processes (0 = one per core).")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Generate a sample apparel catalog, ingest it, write the report, score against truth."""
    from vismerch.demo import run_demo

    summary = run_demo(n=n, out=out, seed=seed, workers=workers or None, progress=not json_out)
    if json_out:
        _print_json(summary)
        return
    flat = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    _table("demo: accuracy against the ground truth", ["measure", "value"],
           [[k, f"{v:.3f}" if isinstance(v, float) else v] for k, v in flat.items()])
    arranged = summary.get("arrangement")
    if arranged:
        console.print(
            f"arranged collection [bold]{arranged['collection']}[/]: look-alike neighbours per width "
            f"{arranged['lookalikes_before']} -> {arranged['lookalikes_after']}, "
            f"business score kept {arranged['business_kept']:.1%} (preview {arranged['preview']})"
        )


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_cmd)
    app.command("tags")(tags_cmd)
    app.command("quality")(quality_cmd)
    app.command("audit")(audit_cmd)
    app.command("errors")(errors_cmd)
    app.command("dupes")(dupes_cmd)
    app.command("similar")(similar_cmd)
    app.command("search")(search_cmd)
    app.command("report")(report_cmd)
    app.command("demo")(demo_cmd)
