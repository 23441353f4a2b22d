"""Matplotlib figures for the report, returned as PNG bytes (Agg backend, no display)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def colour_distribution(counts: list[tuple[str, str, int]]) -> bytes:
    """Horizontal bars of dominant-colour counts, each bar in its own colour.

    ``counts``: (name, hex, count), largest first."""
    counts = counts[:30]
    fig, ax = plt.subplots(figsize=(7, 0.28 * max(len(counts), 4) + 0.8))
    names = [c[0] for c in counts][::-1]
    values = [c[2] for c in counts][::-1]
    colours = [c[1] if c[1].startswith("#") else "#999999" for c in counts][::-1]
    ax.barh(names, values, color=colours, edgecolor="#444444", linewidth=0.5)
    ax.set_xlabel("products (dominant colour)")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def flag_counts(counts: dict[str, int]) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 2.8))
    names = list(counts)
    ax.bar(names, [counts[n] for n in names], color="#c8553d")
    ax.set_ylabel("products flagged")
    ax.tick_params(axis="x", rotation=30)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
