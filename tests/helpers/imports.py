"""An import-graph checker over source trees (ast only: nothing is imported or run).

Every ``import``/``from … import`` counts, at module level or inside a function, under
``TYPE_CHECKING`` or not. ``check(root)`` returns one line per rule broken, so the
architecture test can show all of them at once and a test of the test can plant one.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("bot", "playbooks", "storage")
# demo and test infrastructure: may use the rig; not part of what the bot runs
RIG_USERS = ("bot.rig", "bot.demo", "bot.commands.demo")
# parsing and validation, no I/O: allowed in the domain
PURE_THIRD_PARTY = frozenset({"pydantic", "pytimeparse"})
# paging sits between the flow and storage: it reads events and incidents, never calls up
PAGING_ABOVE = ("bot.flow", "bot.chat", "bot.schedule", "bot.digest", "bot.ingest",
                "bot.commands", "bot.service")
# the bot's process (the jobs API, the flow and the actions it runs, the Home tab, the
# HTTP server) never loads torch: only the worker's run body (bot/extract) does
TORCH_FREE = ("bot.jobs", "bot.flow", "bot.remediation", "bot.chat", "bot.ingest")


# docs/architecture.md's rows, top down: a module imports only from its own row or below
LAYERS: tuple[tuple[str, ...], ...] = (
    ("bot.cli",),
    ("bot.commands",),
    ("bot.service", "bot.demo"),
    ("bot.flow", "bot.ingest", "bot.schedule", "bot.digest", "bot.rig"),
    ("bot.paging", "bot.extensions"),
    ("bot.chat", "bot.remediation", "bot.jobs", "playbooks", "bot.ssh", "bot.config",
     "bot.agent", "bot.sim"),
    ("bot.extract",),
    ("storage",),
    ("bot.domain",),
    ("bot.core", "bot"),
)
# bot/config shares its row with what it configures, and reads of it only the types of
# ssh and playbooks: never remediation, chat or the jobs API
CONFIG_NEVER = ("bot.remediation", "bot.chat", "bot.jobs")


def layer_of(module: str) -> int | None:
    """The row of ``module`` (0: the top), the longest matching prefix; None: not ours."""
    best: tuple[int, int] | None = None
    for row, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _under(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (row, len(prefix))
    return best[0] if best is not None else None


@dataclass(frozen=True)
class Imported:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (absolute)
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(root: Path) -> Iterator[Path]:
    for package in PACKAGES:
        if (root / package).is_dir():
            yield from sorted((root / package).rglob("*.py"))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(root: Path, path: Path) -> Iterator[Imported]:
    module = module_name(root, path)
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Imported(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path.name == "__init__.py", node)
            yield Imported(module, target, node.lineno)
            if target.split(".")[0] in PACKAGES:  # "from bot import rig" imports bot.rig
                for alias in node.names:
                    yield Imported(module, f"{target}.{alias.name}", node.lineno)


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _exists(root: Path, dotted: str) -> bool:
    """True when ``dotted`` names a module or package in the tree (not an attribute)."""
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def torch_loaders(root: Path) -> frozenset[str]:
    """Modules of ours that load torch when imported or called: those importing
    ``torch``, and those importing one of these (transitively; imports inside functions
    count, since calling the function loads torch all the same)."""
    graph: dict[str, set[str]] = {}
    for path in sources(root):
        for imp in imports_of(root, path):
            graph.setdefault(imp.module, set()).add(imp.target)
    loaders = {m for m, targets in graph.items() if any(_under(t, "torch") for t in targets)}
    grew = True
    while grew:
        more = {m for m, targets in graph.items() if m not in loaders and targets & loaders}
        loaders |= more
        grew = bool(more)
    return frozenset(loaders)


def rule_broken(root: Path, imp: Imported, loaders: frozenset[str] = frozenset()) -> str | None:
    """Which rule ``imp`` breaks, if any (the rules of docs/architecture.md);
    ``loaders`` is ``torch_loaders(root)``."""
    src, dst = imp.module, imp.target
    top = dst.split(".")[0]
    ours = top in PACKAGES
    if ours and not _exists(root, dst):
        return None  # a name imported from a module, not a module: its module is checked
    if _under(dst, "redis", "rq") and not _under(src, "storage"):
        return "redis/rq outside storage/"
    if _under(src, "bot.extract") and _under(dst, "storage"):
        return "bot.extract imports storage"
    crossing = dst in loaders and not _under(dst, *TORCH_FREE)  # reported where it enters
    if _under(src, *TORCH_FREE) and (_under(dst, "torch") or crossing):
        return "the bot's process loads torch"
    if _under(src, "bot.core") and ours and not _under(dst, "bot.core"):
        return "bot.core imports the layers above it"
    if _under(src, "bot.domain"):
        pure = _under(dst, "bot.core", "bot.domain") or top in sys.stdlib_module_names
        if not pure and top not in PURE_THIRD_PARTY:
            return "bot.domain imports something other than bot.core, stdlib or pure libraries"
    if _under(src, "storage") and ours and not _under(dst, "storage", "bot.domain", "bot.core"):
        return "storage imports bot.* beyond bot.domain and bot.core"
    if _under(src, "playbooks", "bot.extract") and _under(dst, "bot.chat"):
        return "playbooks/bot.extract import bot.chat"
    if _under(src, "bot.paging") and _under(dst, *PAGING_ABOVE):
        return "bot.paging imports a layer above it"
    if _under(dst, "bot.rig") and not _under(src, *RIG_USERS):
        return "product code imports bot.rig"
    if _under(src, "bot.config") and _under(dst, *CONFIG_NEVER):
        return "bot.config imports remediation, chat or the jobs API"
    up, down = layer_of(src), layer_of(dst)
    if ours and up is not None and down is not None and down < up:
        return "imports a layer above it"
    return None


def violations(root: Path, allowed: Iterable[tuple[str, str]] = ()) -> list[str]:
    """``module -> target: rule`` for each broken rule; ``allowed`` (module, target-prefix)
    pairs are known exceptions and are not reported."""
    allow = list(allowed)
    loaders = torch_loaders(root)
    found: dict[tuple[str, int, str], str] = {}  # one line per import statement and rule
    for path in sources(root):
        for imp in imports_of(root, path):
            rule = rule_broken(root, imp, loaders)
            if rule and not any(imp.module == m and _under(imp.target, t) for m, t in allow):
                key = (imp.module, imp.line, rule)
                found[key] = max(found.get(key, ""), imp.target, key=len)
    return sorted(f"{m}:{line} -> {target}: {rule}" for (m, line, rule), target in found.items())


def cross_imports(root: Path) -> list[str]:
    """Test modules importing other test modules (shared code belongs in tests/helpers/)."""
    out = []
    for path in sorted((root / "tests").rglob("*.py")):
        for imp in imports_of(root, path):
            if _under(imp.target, "tests.unit", "tests.integration"):
                out.append(f"{imp.module}:{imp.line} -> {imp.target}")
    return sorted(set(out))




def private_imports(root: Path) -> list[str]:
    """``from our.module import _name``: a module reaching into another's private names
    (make the name public where it is shared, or keep the code in one module)."""
    out = []
    for path in sources(root):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{module_name(root, path)}:{node.lineno} -> "
                               f"{node.module}.{alias.name}")
    return sorted(out)


def _mentions_redis(annotation: ast.expr | None) -> bool:
    """The annotation names ``Redis`` (``Redis``, ``redis.Redis``, ``"Redis | None"``)."""
    for n in ast.walk(annotation) if annotation is not None else ():
        if ((isinstance(n, ast.Name) and n.id == "Redis")
                or (isinstance(n, ast.Attribute) and n.attr == "Redis")
                or (isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and _mentions_redis(_quoted(n.value)))):
            return True
    return False


def _quoted(text: str) -> ast.expr | None:
    """A string annotation as an expression; None for other text (a ``help=`` string)."""
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _takers(name: str, tree: ast.AST) -> Iterator[str]:
    """``module:line what`` for each parameter, annotated field or variable typed ``Redis``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            yield from (f"{name}:{a.lineno} {node.name}({a.arg})" for a in args
                        if _mentions_redis(a.annotation))
        elif isinstance(node, ast.AnnAssign) and _mentions_redis(node.annotation):
            yield f"{name}:{node.lineno} {ast.unparse(node.target)}"


def redis_takers(root: Path, package: str, composition: Iterable[str] = ()) -> list[str]:
    """Functions, methods and dataclass fields under ``package`` that take or hold a Redis
    client (annotated ``Redis``): steps get stores, never the client. ``composition``
    lists the modules that build the stores (they may hold the client)."""
    skip = set(composition)
    out: list[str] = []
    base = root.joinpath(*package.split("."))
    for path in sorted(base.rglob("*.py")):
        name = module_name(root, path)
        if name not in skip:
            out += _takers(name, ast.parse(path.read_text(), filename=str(path)))
    return sorted(out)


CLIENT_MAKERS = frozenset({"Redis", "connect"})  # storage.connection's client and its maker
# storage/ owns the client; the rig starts a local redis-server for the demo and the tests
CLIENT_OWNERS = ("storage", "bot.rig")


def _named_redis(name: str, tree: ast.AST) -> Iterator[str]:
    """A parameter or an attribute named ``redis`` (``redis: Any``, ``self.redis = r``,
    ``app.state.redis = r``): a client passed along untyped."""
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == "redis":
            yield f"{name}:{node.lineno} parameter redis"
        elif (isinstance(node, ast.Attribute) and node.attr == "redis"
              and isinstance(node.ctx, ast.Store)):
            yield f"{name}:{node.lineno} {ast.unparse(node)}"
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id == "redis"):
            yield f"{name}:{node.lineno} field redis"


def _client_imports(name: str, tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "storage.connection":
            yield from (f"{name}:{node.lineno} imports storage.connection.{a.name}"
                        for a in node.names if a.name in CLIENT_MAKERS)


def client_holders(root: Path, allowed: Iterable[str] = ()) -> list[str]:
    """Code outside ``storage/`` (and the rig) that takes, holds or makes a Redis client:
    a parameter, field or variable typed ``Redis``, one named ``redis``, or an import of
    ``storage.connection.Redis``/``connect``. It gets stores (``storage/stores.py``)
    instead. ``allowed`` lists module prefixes not checked (known exceptions)."""
    skip = (*CLIENT_OWNERS, *allowed)
    out: set[str] = set()
    for path in sources(root):
        name = module_name(root, path)
        if _under(name, *skip):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        out.update(_takers(name, tree))
        out.update(_named_redis(name, tree))
        out.update(_client_imports(name, tree))
    return sorted(out)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks: imports there never run."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        name = getattr(test, "id", None) or getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for child in node.body:  # type: ignore[attr-defined]
                lines.update(n.lineno for n in ast.walk(child) if hasattr(n, "lineno"))
    return lines


def runtime_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports when it runs: line}, imports inside functions
    included, ``if TYPE_CHECKING:`` ones left out (they never run). ``from pkg import
    mod`` is an edge to ``pkg.mod`` (and to ``pkg`` only for a name that is not a module)."""
    graph: dict[str, dict[str, int]] = {}
    for path in sources(root):
        module = module_name(root, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        edges = graph.setdefault(module, {})
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path.name == "__init__.py", node)
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [t for t in subs if _exists(root, t)]
                if len(targets) < len(subs):
                    targets.append(base)
            else:
                continue
            for target in targets:
                if target.split(".")[0] in PACKAGES and _exists(root, target) and \
                        target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def cycles(root: Path) -> list[str]:
    """Every import cycle among our modules, as ``a:LINE -> b:LINE -> a`` (one per strongly
    connected set of modules, shown along one of its loops)."""
    graph = runtime_graph(root)
    found = []
    for group in _strongly_connected(graph):
        if len(group) > 1:
            found.append(_loop(graph, sorted(group)[0], group))
    return sorted(found)


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively (a deep import chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, {})))]
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
                    work.append((child, iter(graph.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                out.append(group)
    return out


def _loop(graph: dict[str, dict[str, int]], start: str, group: set[str]) -> str:
    """One loop from ``start`` back to it within ``group`` (breadth first: the shortest)."""
    seen = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, {})):
            if nxt == start:
                path = [*seen[node], start]
                hops = (f"{a}:{graph[a][b]}" for a, b in itertools.pairwise(path))
                return " -> ".join(hops) + f" -> {start}"
            if nxt in group and nxt not in seen:
                seen[nxt] = [*seen[node], nxt]
                queue.append(nxt)
    return start

