"""Who writes incident state, checked on the source (ast only: nothing imported or run).

The chat layer renders and delivers; it never writes an incident and never calls the
flow (docs/architecture.md). ``incident_writers(root)`` reports, for each module under
``bot/chat/``: an import of ``bot.flow`` (module level or in a function), and a call of
one of ``IncidentStore``'s writing methods (``WRITES``) on something that is an incident
store there: a name or attribute annotated ``IncidentStore``, one bound to
``IncidentStore(...)`` or ``stores.incidents(...)`` (or to another such name), one named
as the code base names its incident stores (``incidents``), or ``IncidentStore(...)``
itself. Reads (``READS``) stay allowed: the Home tab lists open incidents.

``flow_hooks(root)``: the chat layer never calls the flow (issue 34: a click is an event on
the stream, as an alert is): an import of ``bot.flow``, a call of one of the hooks the
flow used to hand the approval desk (``on_approved``, ``on_denied``, ``on_expired``,
``on_incident``) or of anything reached through a ``callbacks`` attribute, and any class,
parameter or annotation naming ``…Callbacks``.

``store_writes(root, package)``: which module under ``package`` calls which writing
method, for the flow's rule (only the runner commits; docs/architecture.md lists the
writers left).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.imports import imports_of, module_name

STORE = "IncidentStore"
STORE_MODULE = ("storage", "incidents.py")
# every public method of storage/incidents.py IncidentStore is one or the other
# (``test_every_incident_store_method_is_a_read_or_a_write`` keeps the lists whole)
WRITES = frozenset({"ingest", "open_or_fold", "resolve_by_fingerprint", "transition", "commit",
                    "drop_stale", "update"})
READS = frozenset({"get", "require", "list", "children", "counts_by_state", "glance",
                   "get_many"})
CONVENTIONAL = frozenset({"incidents", "incident_store"})  # how the code names one
NEVER_IMPORTED = ("bot.flow",)
DECISION_HOOKS = frozenset({"on_approved", "on_denied", "on_expired", "on_incident"})


def store_methods(root: Path) -> frozenset[str]:
    """The public methods ``IncidentStore`` defines (its class in ``storage/incidents.py``)."""
    tree = ast.parse(root.joinpath(*STORE_MODULE).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == STORE:
            return frozenset(f.name for f in node.body
                             if isinstance(f, ast.FunctionDef) and not f.name.startswith("_"))
    raise LookupError(f"no class {STORE} in {'/'.join(STORE_MODULE)}")


def _names_store(annotation: ast.expr | None) -> bool:
    """The annotation names ``IncidentStore`` (also quoted, also in a union)."""
    for n in ast.walk(annotation) if annotation is not None else ():
        if (isinstance(n, ast.Name) and n.id == STORE) or (
                isinstance(n, ast.Attribute) and n.attr == STORE):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and STORE in n.value:
            return True
    return False


def _last(node: ast.expr) -> str | None:
    """``incidents`` of ``incidents``, ``self.incidents`` or ``flow.incidents``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _makes_store(node: ast.expr) -> bool:
    """``IncidentStore(...)`` or ``stores.incidents(...)``."""
    return isinstance(node, ast.Call) and _last(node.func) in (STORE, "incidents")


def _stores(tree: ast.AST) -> set[str]:
    """The names and attributes that hold an incident store in this module."""
    held = set(CONVENTIONAL)
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and _names_store(node.annotation):
            held.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and _names_store(node.annotation):
            name = _last(node.target)
            if name:
                held.add(name)
    grown = True
    while grown:  # ``self.store = incidents``, ``store = IncidentStore(r)``
        grown = False
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            if _makes_store(node.value) or _last(node.value) in held:
                for target in node.targets:
                    name = _last(target)
                    if name and name not in held:
                        held.add(name)
                        grown = True
    return held


def _write_calls(tree: ast.AST) -> Iterator[ast.Call]:
    """Each call of an incident store's writing method in ``tree``."""
    held = _stores(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _a_write(node.func, held):
            yield node


def _write_refs(tree: ast.AST) -> Iterator[ast.Attribute]:
    """Each incident store's writing method ``tree`` names, called or not (a bound
    ``incidents.ingest`` handed on is a write too)."""
    held = _stores(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _a_write(node, held):
            yield node


def _a_write(node: ast.expr, held: set[str]) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr in WRITES):
        return False
    receiver = node.value
    return _makes_store(receiver) or _last(receiver) in held or _last(receiver) == STORE


def _writes(name: str, tree: ast.AST) -> Iterator[str]:
    for node in _write_calls(tree):
        yield f"{name}:{node.lineno} {ast.unparse(node.func)}() writes an incident"


def store_writes(root: Path, package: str = "bot.flow") -> set[tuple[str, str]]:
    """``(module, method)`` for each writing method of ``IncidentStore`` a module under
    ``package`` calls or hands on (the composition root, above the flow, hands the
    openers the alert receiver's ``ingest``)."""
    base = root.joinpath(*package.split("."))
    return {(module_name(root, path), ref.attr)
            for path in (sorted(base.rglob("*.py")) if base.is_dir() else ())
            for ref in _write_refs(ast.parse(path.read_text(), filename=str(path)))}


def incident_writers(root: Path, package: str = "bot.chat") -> list[str]:
    """``module:line why`` for each place a module under ``package`` writes incident
    state or reaches the flow that does."""
    out: list[str] = []
    base = root.joinpath(*package.split("."))
    for path in sorted(base.rglob("*.py")) if base.is_dir() else ():
        name = module_name(root, path)
        out += _flow_imports(root, path)
        out += _writes(name, ast.parse(path.read_text(), filename=str(path)))
    return sorted(set(out))


def flow_hooks(root: Path, package: str = "bot.chat") -> list[str]:
    """``module:line why`` for each place a module under ``package`` reaches the flow: an
    import of it, a call of a decision hook or through ``callbacks``, a ``…Callbacks``."""
    out: list[str] = []
    base = root.joinpath(*package.split("."))
    for path in sorted(base.rglob("*.py")) if base.is_dir() else ():
        name = module_name(root, path)
        out += _flow_imports(root, path)
        out += [f"{name}:{line} {why}"
                for line, why in _hooks(ast.parse(path.read_text(), filename=str(path)))]
    return sorted(set(out))


def _flow_imports(root: Path, path: Path) -> list[str]:
    """``module:line imports target`` for each import of a module chat must never import."""
    return [f"{imp.module}:{imp.line} imports {imp.target}" for imp in imports_of(root, path)
            if any(imp.target == p or imp.target.startswith(p + ".") for p in NEVER_IMPORTED)]


def _hooks(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            chain = _chain(node.func)
            if node.func.attr in DECISION_HOOKS or "callbacks" in chain[:-1]:
                yield node.lineno, f"calls {'.'.join(chain)}() of the flow"
        elif isinstance(node, ast.ClassDef) and node.name.endswith("Callbacks"):
            yield node.lineno, f"defines {node.name}"
        elif isinstance(node, ast.arg) and node.annotation is not None and \
                "Callbacks" in ast.unparse(node.annotation):
            yield node.lineno, f"takes {node.arg}: {ast.unparse(node.annotation)}"


def _chain(node: ast.expr) -> list[str]:
    """``self.callbacks.on_approved`` → ["self", "callbacks", "on_approved"]."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]
