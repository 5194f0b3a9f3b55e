"""Every `/ir` subcommand the parser knows is in `/ir help`, the usage line, the Slack
app manifest's usage hint (deploy/) and docs/slack.md; none of them names one it lacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bot.chat import slash
from bot.core import strings

ROOT = Path(__file__).resolve().parents[2]
VERBS = sorted(slash.known_verbs())


def manifest_hint() -> str:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-app-manifest.yml").read_text())
    (command,) = manifest["features"]["slash_commands"]
    return str(command["usage_hint"])


def slack_md_section() -> str:
    text = (ROOT / "docs" / "slack.md").read_text()
    return text.split("## `/ir`", 1)[1].split("\n## ", 1)[0]


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text))


@pytest.mark.parametrize("verb", VERBS)
def test_each_subcommand_is_documented_everywhere(verb: str) -> None:
    assert f"*/ir {verb}" in strings.SLASH_HELP.format(cmd="/ir"), "/ir help"
    assert verb in words_of(strings.SLASH_USAGE), "usage line"
    assert verb in words_of(manifest_hint()), "manifest usage_hint"
    assert f"`{verb}" in slack_md_section(), "docs/slack.md"


def test_help_names_no_subcommand_that_does_not_exist() -> None:
    named = set(re.findall(r"\*\{cmd\} ([a-z]+)", strings.SLASH_HELP))
    assert named == set(VERBS)
    hinted = {part.split()[0] for part in manifest_hint().split(" | ")}
    hinted = {v for h in hinted for v in h.split("|")}
    assert hinted == set(VERBS)


def test_the_parser_accepts_what_help_shows() -> None:
    for verb in VERBS:
        try:
            slash.parse(verb)
        except slash.UsageError as exc:
            assert "Unknown subcommand" not in str(exc), verb
