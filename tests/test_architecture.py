"""The dependency rule of docs/architecture.md, checked on the source (ast, no imports).

Arrows point down: entry points → commands/service → flow/ingest/schedule/digest →
paging/extensions → chat/remediation/jobs/playbooks/ssh/config → extract → storage →
domain → core (``tests/helpers/imports.py`` ``LAYERS``: nothing imports a row above its
own), bot/config reads no remediation, chat or jobs, and storage/ imports only bot.domain
and bot.core; no import cycle, imports inside functions included. bot/extract (the
worker's torch run) imports no storage; bot/jobs, the flow, remediation, chat and ingest
never load torch; no module under bot/chat/ writes incident state or calls into the flow,
and under bot/flow/ only the runner does, called or handed on (tests/helpers/writers.py).
The checker lives in tests/helpers/imports.py; the tests at the bottom plant violations in
a synthetic tree to prove it reports each rule.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.helpers.imports import (
    client_holders,
    cross_imports,
    cycles,
    private_imports,
    redis_takers,
    violations,
)
from tests.helpers.names import action_kinds, clashing_classes, kind_literals, nx_sets
from tests.helpers.writers import (
    READS,
    WRITES,
    flow_hooks,
    incident_writers,
    store_methods,
    store_writes,
)

ROOT = Path(__file__).resolve().parents[1]

# Known exceptions, each (importing module, imported module prefix). Only code owned by
# the flow/chat/serve work still open in issue 13 is here; remove a line when it is fixed.
KNOWN: tuple[tuple[str, str], ...] = (
)


def test_the_dependency_rule_holds() -> None:
    found = violations(ROOT, KNOWN)
    assert not found, "imports against docs/architecture.md:\n" + "\n".join(found)


def test_no_import_cycles_function_level_imports_included() -> None:
    """No module imports one that imports it back, directly or around a loop, counting
    the imports inside functions (the ones that hid the preflight <-> slurm cycle)."""
    found = cycles(ROOT)
    assert not found, "import cycles:\n" + "\n".join(found)


def test_every_known_exception_is_still_needed() -> None:
    """An allowlist line whose import is gone must go too (so the list only shrinks)."""
    everything = violations(ROOT)
    stale = [k for k in KNOWN if not any(v.startswith(f"{k[0]}:") and f"-> {k[1]}" in v
                                         for v in everything)]
    assert not stale, f"remove from KNOWN: {stale}"


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_imports(ROOT) == []


def test_flow_steps_take_stores_never_a_redis_client() -> None:
    """Not even the composition (``bot/flow/assembly.py``): it gets ``Stores``."""
    assert redis_takers(ROOT, "bot.flow") == []


def test_nothing_outside_storage_takes_a_redis_client() -> None:
    """Entry points open ``storage/stores.py``'s ``Stores``; everything else gets stores."""
    found = client_holders(ROOT)
    assert not found, "Redis clients outside storage/:\n" + "\n".join(found)


@pytest.mark.parametrize("package", ["bot.jobs", "bot.extract"])
def test_the_jobs_api_and_the_run_take_stores_never_a_redis_client(package: str) -> None:
    """bot/jobs takes ``storage/jobs.py`` ``JobStore``; the run takes a ``RunRecord``."""
    assert redis_takers(ROOT, package) == []


def test_tests_share_code_through_helpers_only() -> None:
    assert cross_imports(ROOT) == []


# --- the checker itself -----------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            if str(parent) != ".":
                (tmp_path / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(body))
    return tmp_path


BASE = {
    "bot/core/strings.py": "X = 1\n",
    "bot/domain/model.py": "import re\nfrom bot.core import strings\n",
    "bot/chat/render.py": "from bot.domain import model\n",
    "bot/rig/standin.py": "import socket\n",
    "bot/demo/story.py": "from bot.rig import standin\n",
    "storage/store.py": "import redis\nfrom bot.domain.model import re\n",
    "bot/extract/spec.py": "import json\n",
    "bot/extract/model.py": "import torch\n",
    "bot/extract/job.py": "from bot.extract import model, spec\n",
    "bot/jobs/queue.py": "from bot.extract.spec import parse\nfrom storage import store\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, BASE)) == []


@pytest.mark.parametrize(("name", "body", "rule"), [
    ("bot/flow/step.py", "def f():\n    import redis\n", "redis/rq outside storage/"),
    ("bot/extract/q.py", "from rq.job import Job\n", "redis/rq outside storage/"),
    ("bot/domain/bad.py", "from bot.chat import render\n", "bot.domain imports"),
    ("bot/domain/net.py", "import requests\n", "bot.domain imports"),
    ("bot/core/up.py", "from bot.domain import model\n", "bot.core imports"),
    ("storage/up.py", "from bot.chat.render import x\n", "storage imports bot.*"),
    ("playbooks/p.py", "from bot.chat import render\n", "playbooks/bot.extract import bot.chat"),
    ("bot/extract/r.py", "from ..chat import render\n", "playbooks/bot.extract import bot.chat"),
    ("bot/service.py", "from bot import rig\n", "product code imports bot.rig"),
    ("bot/sim/x.py", "if 1:\n    from bot.rig.standin import y\n", "product code imports bot.rig"),
    ("bot/paging/p.py", "from bot.chat import render\n", "bot.paging imports a layer above it"),
    ("bot/extract/s.py", "from storage import store\n", "bot.extract imports storage"),
    ("bot/extract/t.py", "def f():\n    import storage.store\n", "bot.extract imports storage"),
    ("bot/jobs/t.py", "import torch\n", "the bot's process loads torch"),
    ("bot/jobs/r.py", "from bot.extract.job import run\n", "the bot's process loads torch"),
    ("bot/flow/w.py", "def f():\n    from bot.extract import job\n", "loads torch"),
    ("bot/remediation/x.py", "from bot.extract.job import run\n", "the bot's process loads torch"),
    ("bot/chat/h.py", "from ..extract.job import run\n", "the bot's process loads torch"),
    ("bot/ingest/m.py", "import torch.nn\n", "the bot's process loads torch"),
])
def test_a_planted_violation_is_reported(tmp_path: Path, name: str, body: str, rule: str) -> None:
    found = violations(_tree(tmp_path, {**BASE, name: body}))
    module = name.removesuffix(".py").replace("/", ".")
    assert len(found) == 1 and found[0].startswith(f"{module}:") and rule in found[0], found


LAYERED = {**BASE, "bot/flow/step.py": "X = 1\n", "bot/config/settings.py": "X = 1\n",
           "bot/remediation/catalog.py": "X = 1\n"}


@pytest.mark.parametrize(("name", "body", "rule"), [
    ("bot/chat/up.py", "from bot.flow import step\n", "imports a layer above it"),
    ("bot/extract/c.py", "def f():\n    from bot.config import settings\n",
     "imports a layer above it"),
    ("bot/domain/u.py", "from bot.remediation.catalog import X\n", "bot.domain imports"),
    ("bot/config/p.py", "from bot.remediation import catalog\n",
     "bot.config imports remediation, chat or the jobs API"),
    ("bot/config/r.py", "from ..chat import render\n",
     "bot.config imports remediation, chat or the jobs API"),
])
def test_an_import_up_the_layers_is_reported(tmp_path: Path, name: str, body: str,
                                             rule: str) -> None:
    found = violations(_tree(tmp_path, {**LAYERED, name: body}))
    module = name.removesuffix(".py").replace("/", ".")
    assert len(found) == 1 and found[0].startswith(f"{module}:") and rule in found[0], found


def test_a_planted_cycle_is_reported_through_a_function_level_import(tmp_path: Path) -> None:
    late = "def f():\n    from bot.remediation import slurm\n"  # the import that hid it
    back = "from bot.remediation.preflight import f\n"
    root = _tree(tmp_path, {**BASE, "bot/remediation/preflight.py": late,
                            "bot/remediation/slurm.py": back})
    assert cycles(root) == ["bot.remediation.preflight:2 -> bot.remediation.slurm:1 -> "
                            "bot.remediation.preflight"]


def test_a_longer_cycle_is_shown_along_its_loop(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**BASE, "playbooks/a.py": "import playbooks.b\n",
                            "playbooks/b.py": "from playbooks import c\n",
                            "playbooks/c.py": "X = 1\ndef f():\n    import playbooks.a\n"})
    assert cycles(root) == ["playbooks.a:1 -> playbooks.b:1 -> playbooks.c:3 -> playbooks.a"]


def test_a_type_only_import_is_no_cycle(tmp_path: Path) -> None:
    """``if TYPE_CHECKING:`` imports never run: a type named both ways is no cycle."""
    root = _tree(tmp_path, {**BASE,
                            "bot/remediation/base.py": "from bot.remediation import polling\n",
                            "bot/remediation/polling.py": "from typing import TYPE_CHECKING\n"
                                                          "if TYPE_CHECKING:\n"
                                                          "    from bot.remediation import base\n"})
    assert cycles(root) == []
    assert cycles(_tree(tmp_path, {"bot/remediation/polling.py": "import bot.remediation.base\n"}))


def test_an_allowed_exception_is_not_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**BASE, "bot/flow/ctx.py": "from redis import Redis\n"})
    assert violations(root, [("bot.flow.ctx", "redis")]) == []
    assert len(violations(root, [("bot.flow.other", "redis")])) == 1


def test_a_test_importing_another_test_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"tests/unit/test_a.py": "X = 1\n",
                            "tests/integration/test_b.py": "from tests.unit.test_a import X\n"})
    assert cross_imports(root) == ["tests.integration.test_b:1 -> tests.unit.test_a"]


def test_each_user_visible_string_is_defined_once() -> None:
    """The strings package merges its area modules: a name in two of them would shadow."""
    seen: dict[str, str] = {}
    clashes = []
    for path in sorted((ROOT / "bot" / "core" / "strings").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        if target.id in seen:
                            clashes.append(f"{target.id}: {seen[target.id]} and {path.name}")
                        seen[target.id] = path.name
    assert len(seen) > 100 and clashes == []


# --- one name per thing ----------------------------------------------------------------

def test_no_two_modules_define_a_class_of_the_same_name() -> None:
    assert clashing_classes(ROOT) == {}


def test_set_nx_is_taken_only_through_the_claim_helper() -> None:
    assert nx_sets(ROOT) == []


def test_no_action_kind_string_outside_its_own_module() -> None:
    """Each action kind (every entry of ``incident_bot.actions``) is spelled only in the
    module of its action class; elsewhere code asks the action (``actions.get(kind)``,
    its attributes and methods) or names its class (``StopDisable.kind``)."""
    owners = action_kinds(ROOT / "pyproject.toml")
    assert len(owners) >= 19
    found = kind_literals(ROOT, owners)
    assert not found, "action kinds spelled outside their module:\n" + "\n".join(found)


# --- the chat layer renders and delivers ---------------------------------------------

def test_no_chat_module_writes_an_incident() -> None:
    """A delivered card is the flow's ``CardDelivered`` event; no module under bot/chat/
    imports the flow or calls one of ``IncidentStore``'s writing methods."""
    found = incident_writers(ROOT)
    assert not found, "incident state written from bot/chat/:\n" + "\n".join(found)


def test_no_chat_module_imports_the_flow_or_calls_its_callbacks() -> None:
    """Clicks are events on the stream, as alerts are (issue 34): the approval desk claims
    and queues ``click.*``; the flow's consumer acts. No module under bot/chat/ imports the
    flow, calls a decision hook (``on_approved``…) or anything through ``callbacks``."""
    found = flow_hooks(ROOT)
    assert not found, "bot/chat/ calling into the flow:\n" + "\n".join(found)


@pytest.mark.parametrize(("body", "found"), [
    ("class Desk:\n    def __init__(self, callbacks):\n        self.callbacks = callbacks\n"
     "    def approve(self, a, u):\n        return self.callbacks.on_approved(a, u)\n",
     ["bot.chat.desk:5 calls self.callbacks.on_approved() of the flow"]),
    ("def deny(hooks, a, u, r):\n    hooks.on_denied(a, u, r)\n",
     ["bot.chat.desk:2 calls hooks.on_denied() of the flow"]),
    ("from dataclasses import dataclass\n@dataclass\nclass ApprovalCallbacks:\n"
     "    on_approved: object\n"
     "def make(c: ApprovalCallbacks) -> None:\n    pass\n",
     ["bot.chat.desk:3 defines ApprovalCallbacks",
      "bot.chat.desk:5 takes c: ApprovalCallbacks"]),
    ("def approve(a):\n    from bot.flow.approve_step import ApproveStep\n    return ApproveStep\n",
     ["bot.chat.desk:2 imports bot.flow.approve_step",
      "bot.chat.desk:2 imports bot.flow.approve_step.ApproveStep"]),
])
def test_a_chat_module_calling_the_flow_is_reported(tmp_path: Path, body: str,
                                                    found: list[str]) -> None:
    ok = {"bot/chat/desk.py": "class Desk:\n    def __init__(self, events):\n"
                              "        self.events = events\n    def approve(self, a, u):\n"
                              "        self.events.click('ack', a, u)\n"
                              "        self.on_change()\n"}
    assert flow_hooks(_tree(tmp_path / "ok", ok)) == []  # the stream, a chat-own hook
    assert flow_hooks(_tree(tmp_path / "bad", {"bot/chat/desk.py": body})) == found


# the flow's one writer (docs/architecture.md)
FLOW_RUNNER = "bot.flow.runner"


def test_the_flow_writes_an_incident_through_the_runner_only() -> None:
    """Every change to an incident in bot/flow/ is an event that ``FlowRunner.handle``
    commits; no other module there calls a writing method of ``IncidentStore`` or holds
    one to hand on. The two openers outside the alert receiver (``/ir diag``, the
    data-loss watch) are handed the receiver's own ``ingest`` by bot/service.py: the
    planner, then ``incident.opened`` for the consumer and the runner."""
    found = store_writes(ROOT)
    others = {w for w in found if w[0] != FLOW_RUNNER}
    assert others == set(), "an incident writer in bot/flow/ other than the runner"
    assert (FLOW_RUNNER, "commit") in found


def test_a_flow_step_writing_an_incident_itself_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CHAT_OK, "bot/flow/step.py": (
        "class Step:\n    def __init__(self, incidents):\n        self.incidents = incidents\n"
        "    def run(self, i):\n        self.incidents.transition(i, 'verified', 'bot', 'x')\n"
        "        return self.incidents.require(i)\n"),
        "bot/flow/opener.py": "from storage.incidents import IncidentStore\n"
                              "def wire(store: IncidentStore, watch):\n"
                              "    watch.opens = store.ingest\n"
                              "    return store.get('1')\n"})
    assert store_writes(root) == {("bot.flow.keep", "update"), ("bot.flow.step", "transition"),
                                  ("bot.flow.opener", "ingest")}  # handed on, not called


def test_every_incident_store_method_is_a_read_or_a_write() -> None:
    """A new method of ``IncidentStore`` must be classed before the chat rule trusts it."""
    assert store_methods(ROOT) == READS | WRITES and not READS & WRITES


CHAT_OK = {
    "storage/incidents.py": "class IncidentStore:\n    def get(self, i): ...\n"
                            "    def update(self, i, f): ...\n",
    "bot/chat/home.py": "from storage.incidents import IncidentStore\n"
                        "def show(incidents: IncidentStore, backend, ref, m):\n"
                        "    backend.update(ref, m)\n"
                        "    return incidents.get('1')\n",
    "bot/flow/keep.py": "def keep(incidents, i):\n    incidents.update(i, lambda x: x)\n",
}


@pytest.mark.parametrize(("body", "found"), [
    ("from storage.incidents import IncidentStore\n"
     "def keep(store: IncidentStore, i):\n    store.update(i, lambda x: x)\n",
     ["bot.chat.card:3 store.update() writes an incident"]),
    ("class Card:\n    def __init__(self, incidents):\n        self.known = incidents\n"
     "    def keep(self, i):\n        self.known.commit(i, lambda x: (x, ()))\n",
     ["bot.chat.card:5 self.known.commit() writes an incident"]),
    ("from storage.incidents import IncidentStore\n"
     "def keep(r, i):\n    IncidentStore(r).transition(i, 'resolved', 'bot', 'x')\n",
     ["bot.chat.card:3 IncidentStore(r).transition() writes an incident"]),
    ("def keep(stores, i):\n    s = stores.incidents()\n    s.drop_stale(i)\n",
     ["bot.chat.card:3 s.drop_stale() writes an incident"]),
    ("def on_card(i):\n    from bot.flow import runner\n    runner.handle(i)\n",
     ["bot.chat.card:2 imports bot.flow", "bot.chat.card:2 imports bot.flow.runner"]),
])
def test_a_chat_module_writing_an_incident_is_reported(tmp_path: Path, body: str,
                                                       found: list[str]) -> None:
    root = _tree(tmp_path, CHAT_OK)
    assert incident_writers(root) == []  # reads, a backend's update, the flow's own write
    assert incident_writers(_tree(tmp_path, {"bot/chat/card.py": body})) == found


def test_a_kind_string_outside_its_module_is_reported(tmp_path: Path) -> None:
    owners = {"systemd.stop_disable": "bot.remediation.actions.systemd"}
    root = _tree(tmp_path, {
        "bot/remediation/actions/systemd.py": "class StopDisable:\n"
                                              "    kind = 'systemd.stop_disable'\n",
        "bot/flow/ok.py": "from bot.remediation.actions.systemd import StopDisable\n"
                          "K = StopDisable.kind\nCODE = 'gpu.idle_vram_held'\n"
                          "def f(code: str) -> bool:\n    return code.startswith('systemd.')\n",
        "bot/flow/step.py": "def f(kind: str) -> bool:\n"
                            "    return kind == 'systemd.stop_disable'\n",
        "bot/chat/words.py": "def g(a) -> bool:\n    return a.kind.startswith('systemd.')\n",
    })
    assert kind_literals(root, owners) == ["bot/chat/words.py:2 systemd.stop_disable",
                                           "bot/flow/step.py:2 systemd.stop_disable"]


def test_the_name_checks_report_planted_clashes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/a.py": "class Ctx:\n    pass\n",
                            "bot/b.py": "class Ctx:\n    pass\n",
                            "storage/claims.py": "def claim(r):\n    r.set('k', 1, nx=True)\n",
                            "storage/other.py": "def own(r):\n    r.set('k', 1, nx=True)\n"})
    assert clashing_classes(root) == {"Ctx": ["bot/a.py", "bot/b.py"]}
    assert nx_sets(root) == ["storage/other.py:2"]


def test_a_private_import_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**BASE, "bot/a.py": "def _x() -> None: ...\n",
                            "bot/b.py": "from bot.a import _x\n"})
    assert private_imports(root) == ["bot.b:1 -> bot.a._x"]


def test_a_flow_step_taking_a_redis_client_is_reported(tmp_path: Path) -> None:
    step = ("from storage.connection import Redis\n"
            "class Step:\n    def __init__(self, redis: Redis) -> None: ...\n"
            "def run(conn: 'Redis | None') -> None: ...\n")
    root = _tree(tmp_path, {**BASE, "bot/flow/__init__.py": "", "bot/flow/step.py": step,
                            "bot/flow/assembly.py": step})
    assert redis_takers(root, "bot.flow", composition=("bot.flow.assembly",)) == [
        "bot.flow.step:3 __init__(redis)", "bot.flow.step:4 run(conn)"]


@pytest.mark.parametrize("body, found", [
    ("from storage.connection import Redis\nclass Esc:\n    def __init__(self, r: Redis): ...\n",
     ["bot.schedule.esc:1 imports storage.connection.Redis", "bot.schedule.esc:3 __init__(r)"]),
    ("from dataclasses import dataclass\n@dataclass\nclass Service:\n    redis: 'Redis'\n",
     ["bot.schedule.esc:4 field redis", "bot.schedule.esc:4 redis"]),
    ("def build(redis: object) -> None:\n    app.state.redis = redis\n",
     ["bot.schedule.esc:1 parameter redis", "bot.schedule.esc:2 app.state.redis"]),
    ("def main() -> None:\n    from storage.connection import connect\n",
     ["bot.schedule.esc:2 imports storage.connection.connect"]),
])
def test_a_client_outside_storage_is_reported(tmp_path: Path, body: str,
                                             found: list[str]) -> None:
    ok = ("from storage.connection import Redis, StorageError, connect\n"
          "def open_(url: str) -> Redis:\n    redis: Redis = connect(url)\n    return redis\n")
    root = _tree(tmp_path, {**BASE, "bot/schedule/__init__.py": "", "bot/schedule/esc.py": body,
                            "storage/stores.py": ok, "bot/rig/__init__.py": "",
                            "bot/rig/local.py": ok, "bot/extract/__init__.py": "",
                            "bot/extract/queue.py": ok})
    assert client_holders(root, ("bot.extract",)) == found
    assert client_holders(root) == sorted([*found, "bot.extract.queue:1 imports "
                                           "storage.connection.Redis", "bot.extract.queue:1 "
                                           "imports storage.connection.connect",
                                           "bot.extract.queue:3 field redis",
                                           "bot.extract.queue:3 redis"])


def test_every_user_visible_string_gets_the_fields_it_names() -> None:
    """``strings.X.format(a=..)`` supplies every ``{field}`` of X: a renamed field in one
    module and an old call in another fail here, not at 3 a.m. (a KeyError mid-action)."""
    import string

    from bot.core import strings

    missing = []
    for path in sorted((ROOT / "bot").rglob("*.py")) + sorted((ROOT / "playbooks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "format" and isinstance(node.func.value, ast.Attribute)
                    and isinstance(node.func.value.value, ast.Name)
                    and node.func.value.value.id in ("strings", "S")):
                continue
            template = getattr(strings, node.func.value.attr, None)
            if not isinstance(template, str) or any(k.arg is None for k in node.keywords):
                continue
            fields = {f[1].split(".")[0].split("[")[0]
                      for f in string.Formatter().parse(template) if f[1]}
            lost = fields - {k.arg for k in node.keywords}
            if lost:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} "
                               f"{node.func.value.attr} lacks {sorted(lost)}")
    assert not missing, "\n".join(missing)
