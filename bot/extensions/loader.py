"""Read the extension directories: every ``*.yaml``/``*.yml`` file at the top of each,
bounded in size and number, parsed with ``yaml.safe_load``, validated and compiled
(``bot.domain.extension``), then checked against each other and the registered probes,
action kinds and playbooks. Every problem names the file, the key and the reason; a
directory that is not there is named by its config key (``extensions.0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import yaml

from bot.core import strings as S
from bot.domain.extension import (
    LIMITS,
    NO_EXTENSIONS,
    ActionDef,
    Extensions,
    FindingDef,
    ProbeDef,
    Problem,
    combine,
    compile_file,
    parse_file,
)
from bot.domain.kinds import KIND_PLAYBOOK

Parts = tuple[list[ProbeDef], list[FindingDef], list[ActionDef]]
SUFFIXES = (".yaml", ".yml")


def load(dirs: Sequence[str], where: str = "config") -> tuple[Extensions, list[Problem]]:
    """Every file of every directory as one checked set, and every problem found."""
    if not dirs:
        return NO_EXTENSIONS, []
    parts: list[Parts] = []
    problems: list[Problem] = []
    names = playbook_names()
    for i, directory in enumerate(dirs):
        files, found = _files(Path(directory).expanduser(), f"extensions.{i}", where)
        problems += found
        for path in files:
            part, found = load_file(path, names)
            problems += found
            if part is not None:
                parts.append(part)
    ext, found = combine(parts, builtin_probes=_probe_names(), builtin_kinds=_entry_kinds())
    return ext, problems + found


def _files(directory: Path, key: str, where: str) -> tuple[list[Path], list[Problem]]:
    if not directory.is_dir():
        return [], [Problem(where, key, S.EXT_NO_DIRECTORY.format(path=directory))]
    try:
        files = sorted(p for p in directory.iterdir()
                       if p.suffix in SUFFIXES and not p.name.startswith(".") and p.is_file())
    except OSError as exc:
        return [], [Problem(where, key, S.EXT_UNREADABLE.format(why=exc.strerror))]
    if len(files) > LIMITS.files:
        return [], [Problem(str(directory), "(directory)",
                            S.EXT_TOO_MANY_FILES.format(n=LIMITS.files))]
    return files, []


def load_file(path: Path, playbooks: dict[str, str]) -> tuple[Parts | None, list[Problem]]:
    """One file's definitions, or its problems (each with its key)."""
    source = str(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(LIMITS.file_bytes + 1)
    except OSError as exc:
        return None, [Problem(source, "(file)", S.EXT_UNREADABLE.format(why=exc.strerror))]
    if len(raw) > LIMITS.file_bytes:
        return None, [Problem(source, "(file)", S.EXT_TOO_BIG.format(n=LIMITS.file_bytes))]
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, [Problem(source, "(file)", S.EXT_UNREADABLE.format(why=exc.reason))]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark else ""
        why = getattr(exc, "problem", None) or exc
        return None, [Problem(source, "(file)", S.EXT_NOT_YAML.format(where=at, why=why))]
    parsed, problems = parse_file(source, {} if data is None else data)
    if parsed is None:
        return None, problems
    probes, findings, actions, problems = compile_file(source, parsed, playbooks)
    return (probes, findings, actions), problems


def playbook_names() -> dict[str, str]:
    """What a finding's ``playbooks:`` may list: every registered playbook, and every
    built-in alert kind standing for the playbook it runs (``gpu_xid`` → ``gpu_health``)."""
    from playbooks.registry import playbooks

    return {**dict(KIND_PLAYBOOK), **{name: name for name in playbooks()}}


def _probe_names() -> Iterable[str]:
    from playbooks.probe_registry import names

    return names()


def _entry_kinds() -> Iterable[str]:
    from bot.remediation.actions.registry import entry_kinds

    return entry_kinds()
