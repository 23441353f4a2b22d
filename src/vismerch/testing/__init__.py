"""Public test helpers: synthetic catalogs with ground truth, bad files, tiny encoders on disk."""

from vismerch.testing.catalog import (  # noqa: E402,F401  (public helpers)
    make_manifest,
    small_catalog,
    write_bad_files,
    write_bad_manifests,
    write_tricky_files,
)
