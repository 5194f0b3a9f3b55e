"""Source checks for one-name-per-thing (ast, no imports): class names and SET NX claims."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("bot", "playbooks", "storage")
CLAIM_MODULE = "storage/claims.py"


def _modules(root: Path, packages: tuple[str, ...]) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            yield path.relative_to(root).as_posix(), ast.parse(path.read_text())


def clashing_classes(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, list[str]]:
    """Top-level classes defined under one name in two modules: a reader cannot tell which."""
    where: dict[str, list[str]] = defaultdict(list)
    for rel, tree in _modules(root, packages):
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(rel)
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def nx_sets(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``set(..., nx=True)`` calls outside the one claim helper."""
    found = []
    for rel, tree in _modules(root, packages):
        if rel == CLAIM_MODULE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(
                    k.arg == "nx" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in node.keywords):
                found.append(f"{rel}:{node.lineno}")
    return found
