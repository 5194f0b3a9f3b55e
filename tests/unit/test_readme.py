"""The README agrees with the repository: its relative links resolve, and its command table
names exactly the CLI's commands (and the playbooks `diagnose` offers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot import cli
from bot.commands.common import playbook_names

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def test_the_readme_links_only_inside_the_repository_and_every_link_resolves() -> None:
    links = relative_links(README)
    assert "docs/design.md" in links
    for target in links:
        resolved = (ROOT / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{target} points outside the repository"
        assert resolved.exists(), target


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_links_in_docs_resolve(doc: Path) -> None:
    for target in relative_links(doc.read_text()):
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{doc.name}: {target}"


def table_commands() -> set[str]:
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    names = set()
    for row in re.findall(r"^\| (`.+?) \| ", table, re.M):
        names |= {cell.split()[0] for cell in re.findall(r"`([^`]+)`", row)}
    return names


def test_the_command_table_names_every_command_and_only_those() -> None:
    assert table_commands() == set(cli.COMMANDS)


def test_the_table_lists_every_playbook() -> None:
    row = next(line for line in README.splitlines() if line.startswith("| `diagnose"))
    listed = row.split("--playbook ", 1)[1].split(" ", 1)[0].replace("\\", "").split("|")
    assert listed == list(playbook_names())
