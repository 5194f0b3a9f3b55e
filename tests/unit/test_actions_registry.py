"""The action registry: one class per kind, declared as ``incident_bot.actions`` entry points,
each owning its typed parameters (the grammar refuses a hostile value before any command
is made)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.remediation import actions
from bot.remediation.actions import registry
from bot.remediation.actions.base import Action, ActionParams
from bot.remediation.actions.process import Terminate
from bot.remediation.actions.systemd import StopDisable, UnitParams
from bot.remediation.spec import ActionRefused

ROOT = Path(__file__).resolve().parents[2]


def declared() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"]["entry-points"][registry.GROUP])


def test_pyproject_declares_exactly_the_built_in_action_classes() -> None:
    assert declared() == registry.builtin_entries()
    assert len(declared()) == 20


def test_every_registered_kind_is_its_class_and_loaded_once() -> None:
    for kind in actions.kinds():
        action = actions.get(kind)
        assert isinstance(action, Action) and type(action).kind == kind
        assert actions.get(kind) is action  # cached: the entry points are read once
        module, _, name = declared()[kind].partition(":")
        assert type(action).__module__ == module and type(action).__name__ == name
        assert issubclass(action.Params, ActionParams)
        assert action.title and action.risk


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ActionRefused, match=r"unknown action kind 'vendor.fixit' \(known: "):
        actions.get("vendor.fixit")
    assert actions.find("vendor.fixit") is None


def test_an_entry_point_must_name_an_action_of_its_own_kind() -> None:
    with pytest.raises(registry.BadAction, match=r"whose kind is 'systemd\.stop_disable'"):
        registry.load_entry("vendor.stop", "bot.remediation.actions.systemd:StopDisable")
    with pytest.raises(registry.BadAction, match="is not an Action class"):
        registry.load_entry("vendor.size", "bot.core.fmt:size")


def test_parameters_are_a_typed_model_that_refuses_what_the_grammar_refuses() -> None:
    typed = StopDisable().parse({"unit": "vllm.service"})
    assert isinstance(typed, UnitParams) and typed.unit == "vllm.service"
    with pytest.raises(ValidationError):
        UnitParams(unit="vllm.service; rm -rf /")
    with pytest.raises(ActionRefused, match=r"refused systemd\.stop_disable: invalid unit"):
        StopDisable().parse({"unit": "$(reboot).service"})
    with pytest.raises(ActionRefused, match="missing parameter 'pid' \\(a process id\\)"):
        Terminate().parse({})
    assert Terminate().validate({"pid": "42"}) == {"pid": "42", "override": "no"}


def test_proposing_through_the_class_names_the_kind_without_spelling_it() -> None:
    proposed = StopDisable.propose("gpu-01", {"unit": "vllm.service"}, "frees the GPUs")
    assert proposed.kind == StopDisable.kind and proposed.risk == StopDisable.risk
    assert StopDisable.proposal({"unit": "bad unit"}, "why") is None
