"""A/B tests of arrangements: variants of one collection served to sticky visitor groups.

``vismerch.experiments.stats`` holds the statistics (pure numpy/scipy, no store access): the
metrics, Welch comparisons with Holm correction, the sample-ratio-mismatch check, the sample
size plan and the ``results`` summary. ``docs/experiments.md`` explains the choices.
"""
