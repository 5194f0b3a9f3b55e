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


def action_kinds(pyproject: Path) -> dict[str, str]:
    """kind → the module that defines it, as ``[project.entry-points."incident_bot.actions"]``
    declares (read, not imported)."""
    import tomllib

    data = tomllib.loads(pyproject.read_text())
    group = data["project"]["entry-points"]["incident_bot.actions"]
    return {kind: str(value).partition(":")[0] for kind, value in group.items()}


def _literals(tree: ast.Module) -> Iterator[tuple[int, str, bool]]:
    """(line, text, is a prefix test) for every string literal; ``kind.startswith("slurm.")``
    (on anything named ``kind``) counts as naming every kind it is a prefix of."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "startswith" and node.args and _about_kind(node.func.value):
            arg = node.args[0]
            for part in (arg.elts if isinstance(arg, ast.Tuple) else [arg]):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    yield part.lineno, part.value, True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value, False


def _about_kind(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr \
        if isinstance(node, ast.Attribute) else ""
    return "kind" in name


def kind_literals(root: Path, owners: dict[str, str],
                  packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Action kind strings outside the kind's own module: ``"path:line kind"`` for each
    literal equal to a registered kind (or a ``startswith`` prefix of one, ``"slurm."``)
    in a module that is not where that kind's action class lives."""
    found = []
    for rel, tree in _modules(root, packages):
        module = rel.removesuffix(".py").replace("/", ".")
        for line, text, prefix in _literals(tree):
            named = [k for k in owners if (k.startswith(text) and "." in text) if prefix] \
                if prefix else ([text] if text in owners else [])
            for kind in named:
                if owners[kind] != module:
                    found.append(f"{rel}:{line} {kind}")
    return sorted(set(found))
