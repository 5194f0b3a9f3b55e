"""Everything the bot can be extended with is registered through entry points, the
built-in ones like a third party's (``pyproject.toml``), and each registry names the same
built-in entries in code for an editable install made before a group existed."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from bot.chat import backends
from bot.core import plugins
from playbooks import probe_registry, registry

ROOT = Path(__file__).resolve().parents[2]


def declared(group: str) -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"]["entry-points"][group])


@pytest.mark.parametrize(("group", "builtin"), [
    (probe_registry.GROUP, probe_registry.BUILTIN), (registry.GROUP, registry.BUILTIN),
    (backends.GROUP, backends.BUILTIN)])
def test_pyproject_declares_exactly_the_built_in_entries(group: str,
                                                         builtin: dict[str, str]) -> None:
    assert declared(group) == builtin


def test_every_built_in_entry_loads_as_what_its_group_holds() -> None:
    for name in probe_registry.names():
        assert probe_registry.get(name).command
    for name in registry.names():
        assert registry.get(name).name == name
    for name in backends.names():
        assert backends.plugin_class(name).name == name


def test_a_third_party_entry_is_read_beside_the_built_in_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed package's entry (another distribution) joins the built-in ones."""
    theirs = EntryPoint("ib_ports", "playbooks.probes:uptime", probe_registry.GROUP)
    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: [theirs] if group == probe_registry.GROUP else [])
    found = dict(plugins.declared(probe_registry.GROUP, probe_registry.BUILTIN))
    assert found["ib_ports"] == "playbooks.probes:uptime" and "uptime" in found


def test_a_bad_entry_is_refused_with_its_group_and_name() -> None:
    with pytest.raises(plugins.BadEntry, match=r"incident_bot\.probes entry 'x' = 'nope\.mod'"):
        plugins.load(probe_registry.GROUP, "x", "nope.mod")
    with pytest.raises(plugins.BadEntry, match=r"bot\.core\.fmt has no Nope"):
        plugins.load(probe_registry.GROUP, "x", "bot.core.fmt:Nope")


def test_the_chat_backend_is_chosen_by_its_registered_name() -> None:
    from bot.config.settings import Settings
    from bot.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown backend 'irc' \(choose from slack, terminal\)"):
        backends.make_plugin(Settings(chat_backend="irc"))
    from bot.chat.terminal import TerminalBackend

    terminal = Settings(chat_backend="terminal")
    assert isinstance(backends.make_plugin(terminal).backend(), TerminalBackend)
    assert backends.plugin_class("terminal").missing_secrets(terminal) == []
    slack = backends.plugin_class("slack").missing_secrets(Settings(chat_backend="slack"))
    assert [name for name, _ in slack] == ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"]
