"""``hosts.NAME.slurm_node``: optional, one node name in the validated grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.inventory import options_for, resolve, slurm_node
from bot.config.settings import load_settings
from bot.core.errors import ConfigError
from bot.domain import validate


def config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "bot.yaml"
    path.write_text("hosts:\n"
                    "  gpu-01: {ssh: root@10.0.0.1:22" + extra + "}\n"
                    "  gpu-02: {ssh: root@10.0.0.2:22}\n")
    return path


def test_a_slurm_node_reaches_the_playbook_options(tmp_path: Path) -> None:
    settings = load_settings(config(tmp_path, ", slurm_node: node-01.cluster"))
    one, two = resolve(settings, "gpu-01"), resolve(settings, "gpu-02")
    assert slurm_node(settings, one) == "node-01.cluster"
    assert options_for(settings, one).slurm_node == "node-01.cluster"
    assert slurm_node(settings, two) is None  # absent: not a Slurm node
    assert options_for(settings, two).slurm_node is None


@pytest.mark.parametrize("bad", ["gpu-[01-04]", "a,b", "-x", "a b", "x" * 65, "$(id)"])
def test_a_bad_node_name_fails_at_start(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="slurm_node"):
        load_settings(config(tmp_path, f", slurm_node: '{bad}'"))


@pytest.mark.parametrize("bad", ["", "x [root@now]", "a\nb", "it's", 'say "x"', " pad",
                                 "x" * 161, "$(reboot)", "`id`", "a State=RESUME",
                                 "x NodeName=gpu-02"])
def test_reason_grammar_refuses(bad: str) -> None:
    assert not validate.is_valid(validate.slurm_reason, bad)


def test_reason_and_incident_grammar_accepts() -> None:
    assert validate.slurm_reason("GPU 2 fell off the bus (Xid 79)") == \
        "GPU 2 fell off the bus (Xid 79)"
    assert validate.incident_ref("INC-7") == "INC-7"
    assert validate.incident_ref("") == ""
    assert not validate.is_valid(validate.incident_ref, "INC 7")
