"""The synthetic sample catalog shared by ``vismerch demo``, the tests and the benchmarks.

``generate_catalog(out_dir, n, seed)`` draws an apparel catalog (silhouettes of t-shirts,
dresses, trousers, ... in named retail colours and solid/striped/dotted/checked patterns
on studio-white backgrounds), plants problems with known answers (near-duplicates,
flawed shots, corrupt files, wrong listed colours) and writes::

    out_dir/images/<category>/<id>.<ext>    the photos (JPEG mostly, some PNG/WebP)
    out_dir/manifest.csv                    id,image,title,...,colour,material,season
    out_dir/truth.json                      the ground truth (schema below)

truth.json::

    {"meta": {"generator", "version", "seed", "n", "truth_colours", "excluded_colours",
              "flag_names", "flaws": {flaw: [flags]}},
     "products": {id: {                        # every image that is not corrupt
         "colour": name,                       # the main colour (TRUTH_COLOURS)
         "pattern": "solid" | "striped" | "dotted" | "checked",
         "category": str,
         "flags": [flag, ...],                 # exactly the quality flags to expect
         "flaw": None | "blur" | "dark" | "off-centre" | "background" | "tiny" | "low-res",
         "secondary_colour": name | None,      # the pattern's colour
         "trim_colour": name | None,           # a sole, a belt, a hat band
         "main_fraction": float,               # main colour's share of the product area
         "fill": float,                        # product area / frame area
         "offset": [dx, dy],                   # product centroid - frame centre (fractions)
         "duplicate_transform": str,           # copies only: requality|resize|crop|png|webp
         "image": "images/<category>/<id>.<ext>"}},
     "duplicate_groups": [[id, ...], ...],     # sorted; groups of 2-3
     "corrupt": {id: reason},                  # empty-file | truncated | not-an-image
     "corrupt_images": {id: relative path},
     "listed_colour_wrong": [id, ...]}         # manifest colour far (CIEDE2000 >= 30) from truth

Flaw -> flags: blur -> blur, dark -> under-exposed (only: exposure suppresses the
background checks), off-centre -> off-centre, background -> non-white-background,
tiny -> too-small, low-res -> low-resolution. Clean shots keep clear of every threshold
in vismerch.config (shorter side >= 520, fill >= 0.13, centroid within 0.06 of the
middle, background within CIEDE2000 ~4 of white); flawed shots are well past theirs.

The product's ground-truth colour is its main colour, which covers at least ~65% of the
product area (``main_fraction``, measured on the rendered mask). Main colours come from
``TRUTH_COLOURS``, a subset of colours.csv whose names are well separated (CIEDE2000 >= 14
between any two, >= 19 from white); see ``EXCLUDED_COLOURS`` for why the rest are left out.
Everything is deterministic for a seed (one numpy generator per item).

Modules: ``plan`` (what to draw: roles, colours, flaws, copies), ``render`` (drawing and
encoding one shot or copy), ``write`` (the driver: files, manifest, truth), ``shapes``,
``shading`` and ``edits`` (silhouettes, 3D-like shading, duplicate edit kinds).
"""

from __future__ import annotations

from vismerch.sample.plan import CORRUPT_KINDS, EXCLUDED_COLOURS, FLAWS, TRUTH_COLOURS
from vismerch.sample.write import FLAG_NAMES, MANIFEST_COLUMNS, VERSION, SampleCatalog, generate_catalog

__all__ = ["CORRUPT_KINDS", "EXCLUDED_COLOURS", "FLAG_NAMES", "FLAWS", "MANIFEST_COLUMNS", "TRUTH_COLOURS",
           "VERSION", "SampleCatalog", "generate_catalog"]
