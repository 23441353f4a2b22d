"""The architecture's layers and acyclic imports, checked on the code as it is.

The layers are declared in pyproject.toml's ``[tool.importlinter]`` (docs/architecture.md
says what each layer is for); grimp's graph is also searched for any import cycle between
two modules, package ``__init__`` modules included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

import vismerch

ROOT = Path(__file__).resolve().parents[2]


def test_checked_code_is_this_tree():
    # the linter builds its graph from the vismerch that imports here: it must be this tree's
    assert Path(vismerch.__file__).resolve().is_relative_to(ROOT / "src")


def test_import_contracts_are_kept():
    # in a child process: the linter reconfigures logging, which later tests' log capture needs
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, "
            "no_cache=True, no_logo=True))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.z")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y", "a.z"]]


def test_no_import_cycle_between_modules():
    # imports under TYPE_CHECKING are annotations only and never run
    graph = grimp.build_graph("vismerch", exclude_type_checking_imports=True, cache_dir=None)
    assert _cycles(graph) == []
