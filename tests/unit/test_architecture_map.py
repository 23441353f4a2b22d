"""docs/architecture.md stays a map a newcomer reads in five minutes, and a true one:
at most 150 lines, every module of src/vismerch named, every path it names real (under
src/vismerch or the repository)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "vismerch"
MAP = ROOT / "docs" / "architecture.md"
MAX_LINES = 150


def _modules() -> list[Path]:
    return sorted(p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py"))


def _named(module: Path, lines: list[str]) -> bool:
    """By its path (``catalog/store.py``), or by its file name on a line that names its
    package (``serve/routes/``); a package's ``__init__``/``__main__`` by the package."""
    path = module.as_posix()
    package = module.parent.as_posix() + "/" if module.parent != Path(".") else ""
    if module.name in ("__init__.py", "__main__.py"):
        return package == "" or any(f"`{package}" in line for line in lines)
    return any(f"`{path}`" in line or (package and f"`{package}" in line and f"`{module.name}`" in line)
               for line in lines)


def test_the_map_is_short():
    lines = MAP.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"docs/architecture.md has {len(lines)} lines; keep to {MAX_LINES}"


def test_every_module_is_on_the_map():
    lines = MAP.read_text().splitlines()
    missing = [m.as_posix() for m in _modules() if not _named(m, lines)]
    assert not missing, f"add a line to docs/architecture.md for: {', '.join(missing)}"


def test_every_path_on_the_map_exists():
    text = MAP.read_text()
    named = set(re.findall(r"`([a-z_]+(?:/[a-z_]+)*(?:/|\.py))`", text))
    gone = sorted(p for p in named if "/" in p and not (PACKAGE / p).exists() and not (ROOT / p).exists())
    assert not gone, f"docs/architecture.md names what does not exist: {', '.join(gone)}"
