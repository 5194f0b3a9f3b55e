"""Operator extensions in tests: the documented example directory, a directory of one's
own, and installing a set for the length of a test (the registries are process-wide)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.domain.extension import NO_EXTENSIONS, Extensions
from bot.extensions import install, load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples" / "extensions"
FABRIC = EXAMPLES / "fabric_manager.yaml"
UNIT = "nvidia-fabricmanager.service"
# the healthy host with its fabric manager failed (enabled: it should be running)
FABRIC_DOWN = {"units": {UNIT: {"description": "NVIDIA fabric manager", "active_state": "failed",
                                "unit_file_state": "enabled"}}}


def write_dir(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (root / name).write_text(textwrap.dedent(body))
    return root


def loaded(dirs: Sequence[Path | str]) -> Extensions:
    extensions, problems = load([str(d) for d in dirs])
    assert not problems, [p.line() for p in problems]
    return extensions


@contextmanager
def installed(dirs: Sequence[Path | str]) -> Iterator[Extensions]:
    """The extensions registered beside the built-in ones, and taken away after."""
    extensions = loaded(dirs)
    install(extensions)
    try:
        yield extensions
    finally:
        install(NO_EXTENSIONS)
