"""Core commands: ingest, tags, quality, audit, errors, dupes, similar, search, report, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.context import command_settings, open_workspace
from vismerch.cli.output import JsonOpt, StoreArg, console
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import table as _table
from vismerch.errors import NotFound


def ingest_cmd(
    source: Annotated[Path, typer.Argument(
        help="Folder of images, or a manifest (.csv, .jsonl, .parquet) whose image column holds "
             "paths or URLs (http(s), s3, gs, file; see the fetch_* settings).")],
    store: Annotated[Path, typer.Option("--store", "-s", help="Store directory (created if missing).")],
    backend: Annotated[
        list[str], typer.Option("--backend", "-b", help="Feature backend(s); colour always runs.")
    ] = ["colour"],  # noqa: B006 - typer needs a list default
    workers: Annotated[
        int | None, typer.Option(help="Worker processes, 0 = one per core (setting: workers).")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (setting: device).")] = None,
    model: Annotated[str | None, typer.Option(help="Model id or local folder for neural backends.")] = None,
    revision: Annotated[str | None, typer.Option(help="Pinned model revision (commit/tag).")] = None,
    precision: Annotated[
        str | None, typer.Option(help="auto|fp32|bf16|fp16|fp8|fp4 for neural backends (setting: precision).")
    ] = None,
    compile: Annotated[bool, typer.Option("--compile", help="torch.compile the neural encoder.")] = False,
    config: Annotated[
        Path | None, typer.Option(help="Settings TOML file (the same as `vismerch --config FILE ingest`).")
    ] = None,
    distributor: Annotated[
        str | None,
        typer.Option(help="auto, local, stream, device or ray (setting: distributor; auto: stream on CUDA)."),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="With --distributor ray: local, auto or HOST:PORT (setting: ray_address)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Ingest a catalog into a store: incremental, resumable, safe on bad files."""
    from vismerch.features.base import list_backends
    from vismerch.pipeline.ingest import ingest

    settings = command_settings({"workers": workers, "device": device, "precision": precision,
                                 "distributor": distributor, "ray_address": ray_address}, config=config)
    # the resolved precision is part of what was asked for (the plan's key), as before
    neural = {"model": model, "revision": revision, "precision": settings.precision,
              "compile": compile or None}
    options = {b: neural for b in backend if b in list_backends(neural=True)}
    summary = ingest(source, store, backends=backend, backend_options=options, settings=settings,
                     progress=not json_out)
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
    threshold: Annotated[
        float | None, typer.Option(help="Minimum attribute tag score (setting: tag_threshold).")
    ] = None,
    vocabulary: Annotated[
        Path | None, typer.Option(help="Attribute vocabulary TOML (default: built in).")
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(help="Record a merchandiser label ID=LABEL for --attribute (overrides zero-shot)."),
    ] = None,
    device: Annotated[str | None, typer.Option(help="Device for --attribute (setting: device).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Colour tags and quality flags per product (or zero-shot attribute tags)."""
    from vismerch.errors import UsageError
    from vismerch.service import catalog, tagging

    if label and attribute is None:
        raise UsageError(
            "--label needs --attribute", hint="vismerch tags STORE --attribute pattern --label ID=striped"
        )
    labels = []
    for item in label or []:
        pid, sep, value = item.partition("=")
        if not sep or not pid or not value:
            raise UsageError(f"--label {item!r}: expected ID=LABEL")
        labels.append((pid, value))
    ws = open_workspace(store, {"tag_threshold": threshold, "device": device})
    if attribute is not None:
        for pid, value in labels:
            try:
                tagging.set_label(ws, pid, attribute, value)
            except NotFound:
                raise UsageError(f"--label {pid}={value}: no product {pid!r}") from None
        rows = [r.model_dump() for r in tagging.attribute_tags(ws, attribute, vocabulary=vocabulary)]
        if json_out:
            _print_json(rows)
            return
        _table(f"{attribute} tags", ["id", "tags"], [
            [d["id"], ", ".join(f"{t['name']} {t['score']:.2f}" for t in d["tags"])] for d in rows
        ])
        return
    # flags as the store lists raised ones: {name, value}
    data = [t.model_dump(exclude={"flags": {"__all__": {"flagged"}}}) for t in catalog.tags(ws)]
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
    from vismerch.service import quality

    metrics = quality.quality_metrics(open_workspace(store), all_metrics=all_metrics)
    hide = None if all_metrics else {"flagged"}  # only raised flags: flagged goes without saying
    data = [{"id": pid, "flags": [m.model_dump(exclude=hide) for m in ms]} for pid, ms in metrics.items()]
    if json_out:
        _print_json(data)
        return
    _table("quality", ["id", "flags"], [
        [d["id"], ", ".join(f"{f['name']}={f['value']:g}" for f in d["flags"])] for d in data
    ])


def audit_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Catalog audit: listed colours that disagree with the image (CIEDE2000 as evidence)."""
    from vismerch.service import quality

    data = quality.audit_rows(open_workspace(store))
    if json_out:
        _print_json(data)
        return
    _table("listed colour vs image", ["id", "listed", "observed", "ΔE00"],
           [[d["id"], d["listed"], d["observed"], f"{d['distance']:.1f}"] for d in data])


def errors_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Images that were refused, with the reason."""
    from vismerch.service import catalog

    data = [e.model_dump() for e in catalog.errors(open_workspace(store))]
    if json_out:
        _print_json(data)
        return
    rows = [[d["product_id"], d["reason"], d["detail"]] for d in data]
    _table("refused images", ["id", "reason", "detail"], rows)


def dupes_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Near-duplicate groups with their representative."""
    from vismerch.service import duplicates

    groups = duplicates.list_groups(open_workspace(store))
    data = [g.model_dump(include={"group", "representative", "members"}) for g in groups]
    if json_out:
        _print_json(data)
        return
    _table("duplicate groups", ["group", "representative", "members", "review"],
           [[g.group, g.representative, ", ".join(g.members), g.status] for g in groups])


KOpt = Annotated[int, typer.Option("-k", min=1, help="How many.")]


def similar_cmd(
    store: StoreArg,
    product_id: Annotated[str, typer.Argument(help="Product id.")],
    k: KOpt = 12,
    same_category: Annotated[bool, typer.Option("--same-category", help="Only the same category.")] = False,
    in_stock: Annotated[bool, typer.Option("--in-stock", help="Only products in stock.")] = False,
    backend: Annotated[str | None, typer.Option(help="Vectors to use (default: neural if present).")] = None,
    mode: Annotated[str | None, typer.Option(
        help="colour, style (the kind of product; default where style vectors exist) or both.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """More like this: the most similar products to one product."""
    from vismerch.service import search

    result = search.similar(open_workspace(store), product_id, k=k, same_category=same_category,
                            in_stock=in_stock, backend=backend, mode=mode)
    data = [h.model_dump() for h in result.hits]
    if json_out:
        _print_json(data)
        return
    _table(f"similar to {product_id}", ["id", "score"], [[d["id"], f"{d['score']:.3f}"] for d in data])


def search_cmd(
    store: StoreArg,
    query: Annotated[str | None, typer.Argument(help="Text query (needs neural or text features).")] = None,
    colour: Annotated[str | None, typer.Option("--colour", "--color", help="Colour name or #hex.")] = None,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    k: KOpt = 12,
    device: Annotated[str | None, typer.Option(help="Device for the text encoder (setting: device).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Search by text, by colour, or both (settings: search_*)."""
    from vismerch.service import search

    result = search.text(open_workspace(store, {"device": device}), query, colour=colour,
                         category=category, k=k)
    data = [h.model_dump() for h in result.hits]
    if json_out:
        _print_json(data)
        return
    _table("results", ["id", "score"], [[d["id"], f"{d['score']:.3f}"] for d in data])


def reindex_cmd(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Build the search indexes now (ingest does it; a store ingested before them gets them
    on its first search otherwise)."""
    from vismerch.service import search

    built = search.reindex(open_workspace(store))
    if json_out:
        _print_json(built)
        return
    console.print(f"search indexes of {_safe(str(store))}: {built['products']:,} products, "
                  f"{built['titles']:,} with title vectors, {built['palettes']:,} palettes")


def report_cmd(
    store: StoreArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write.")] = Path("report.html"),
) -> None:
    """Write one self-contained HTML report of the store."""
    from vismerch.report.html import write_report

    ws = open_workspace(store)
    path = write_report(ws.store, output, settings=ws.settings)
    console.print(f"report written to [bold]{_safe(path)}[/]")


def demo_cmd(
    n: Annotated[int, typer.Option("--n", help="Products in the sample catalog.")] = 600,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("demo-output"),
    seed: Annotated[int, typer.Option(help="Random seed of the sample catalog.")] = 0,
    workers: Annotated[
        int | None, typer.Option(help="Worker processes, 0 = one per core (setting: workers).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Generate a sample apparel catalog, ingest it, write the report, score against truth."""
    from vismerch.demo import run_demo

    summary = run_demo(n=n, out=out, seed=seed, progress=not json_out,
                       settings=command_settings({"workers": workers}))
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
    similar = summary.get("similar_by_mode")
    if similar:
        _table(f"{similar['k']} nearest by mode ({similar['style_model'] or 'no style'})",
               ["mode", "same category", "same colour", "same both"],
               [[m, *(f"{v[key]:.1%}" for key in ("category", "colour", "both"))]
                for m, v in similar.items() if isinstance(v, dict)])
    traffic = summary.get("traffic")
    if traffic:
        console.print(
            f"simulated shoppers on [bold]{traffic['collection']}[/] over {traffic['days']} days "
            f"({', '.join(traffic['versions'])} published in turn): {traffic['impressions']:,} impressions, "
            f"{traffic['clicks']:,} clicks, {traffic['orders']:,} orders; see it with "
            f"`vismerch analytics {summary['store']} -c {traffic['collection']}` or the workbench"
        )


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_cmd)
    app.command("tags")(tags_cmd)
    from vismerch.features.quality_flags import flag_names

    app.command("quality", help="Image-quality flags with the measured value beside each: "
                f"{', '.join(flag_names())} (thresholds: the quality_* settings).")(quality_cmd)
    app.command("audit")(audit_cmd)
    app.command("errors")(errors_cmd)
    app.command("dupes")(dupes_cmd)
    app.command("similar")(similar_cmd)
    app.command("search")(search_cmd)
    app.command("reindex")(reindex_cmd)
    app.command("report")(report_cmd)
    app.command("demo")(demo_cmd)
