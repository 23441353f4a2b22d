"""Public test helpers: synthetic catalogs with ground truth, bad files, tiny encoders on disk."""
