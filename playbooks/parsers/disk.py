"""Disk tools: ``df -P`` (bytes and inodes), ``du``, ``lsof`` and ``journalctl --disk-usage``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.domain import validate
from playbooks.parsers.common import integer, lines, size_bytes

# Filesystems that hold no user data of their own.
PSEUDO_FS = frozenset({
    "tmpfs", "devtmpfs", "proc", "sysfs", "cgroup", "cgroup2", "overlay", "squashfs",
    "devpts", "mqueue", "debugfs", "tracefs", "securityfs", "pstore", "bpf", "autofs",
    "hugetlbfs", "configfs", "fusectl", "efivarfs", "ramfs", "nsfs", "binfmt_misc",
})
# "Archived and active journals take up 2.6G in the file system." (systemd >= 246),
# "... take up 1.2G on disk." (older), "Journals take up 8.0M on disk." (oldest).
_JOURNAL = re.compile(r"take up\s+(\d+(?:\.\d+)?[KMGTPE]?)(?:i?B)?\s+(?:in the file system|on disk)"
                      r"|take up\s+(\d+(?:\.\d+)?[KMGTPE]?)\s*\.?\s*$", re.I | re.M)


@dataclass(frozen=True)
class Filesystem:
    device: str
    fstype: str
    size: int | None
    used: int | None
    avail: int | None
    mount: str

    @property
    def used_pct(self) -> float | None:
        """Like df's Use%: used / (used + avail), so root-reserved blocks count as full."""
        if self.used is None or self.avail is None or self.used + self.avail <= 0:
            return None
        return 100.0 * self.used / (self.used + self.avail)

    @property
    def real(self) -> bool:
        return self.fstype not in PSEUDO_FS


@dataclass(frozen=True)
class DuEntry:
    size: int
    path: str


@dataclass(frozen=True)
class OpenFile:
    command: str
    pid: int
    user: str
    fd: str
    size: int | None
    name: str

    @property
    def deleted(self) -> bool:
        return self.name.endswith("(deleted)")


def _df_rows(text: str) -> list[list[str]]:
    rows = []
    for line in lines(text):
        cells = line.split()
        if len(cells) < 7 or cells[0] == "Filesystem" or integer(cells[2]) is None:
            continue
        rows.append([*cells[:6], " ".join(cells[6:])])
    return rows


def parse_df(text: str) -> list[Filesystem]:
    """``df -PT -B1``: Filesystem Type 1B-blocks Used Available Capacity Mounted-on."""
    return [Filesystem(c[0], c[1], integer(c[2]), integer(c[3]), integer(c[4]), c[6])
            for c in _df_rows(text)]


def avail_by_mount(filesystems: list[Filesystem]) -> dict[str, int]:
    """Mount -> bytes available (rows without a figure left out)."""
    return {f.mount: f.avail for f in filesystems if f.avail is not None}


def usage_by_mount(filesystems: list[Filesystem]) -> dict[str, tuple[int, int]]:
    """Mount -> (bytes used, bytes available) (rows without both figures left out)."""
    return {f.mount: (f.used, f.avail) for f in filesystems
            if f.used is not None and f.avail is not None}


@dataclass(frozen=True)
class FileSeen:
    path: str
    size: int
    mtime: float
    owner: str


def parse_find(text: str) -> tuple[list[FileSeen], int]:
    """NUL-separated ``size\\tmtime\\towner\\tpath`` records (``find -printf
    '%s\\t%T@\\t%u\\t%p\\0'``); names the path grammar refuses are counted, not kept."""
    out, unsafe = [], 0
    for record in text.split("\0"):
        parts = record.lstrip("\n").split("\t", 3)
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        size, mtime, owner, path = parts
        if not validate.is_valid(validate.abs_path, path):
            unsafe += 1
            continue
        try:
            out.append(FileSeen(path, int(size), float(mtime), owner[:32]))
        except ValueError:
            continue
    return out, unsafe


def parse_nul_paths(text: str) -> set[str]:
    """``find ... -printf '%p\\0'``: the paths printed, NUL-separated."""
    return {p for p in text.split("\0") if p}


def parse_df_inodes(text: str) -> list[Filesystem]:
    """``df -PTi``: same shape with inode counts (size=Inodes, used=IUsed, avail=IFree)."""
    return parse_df(text)


def parse_du(text: str) -> list[DuEntry]:
    """``du -B1`` lines ``SIZE<TAB>PATH``, largest first."""
    entries = []
    for line in lines(text):
        size, _, path = line.partition("\t")
        if not path:
            size, _, path = line.strip().partition(" ")
        n = integer(size) if size.strip().isdigit() else size_bytes(size)
        if n is not None and path.strip():
            entries.append(DuEntry(n, path.strip()))
    return sorted(entries, key=lambda e: (-e.size, e.path))


def parse_lsof(text: str, *, nlink: bool = True) -> list[OpenFile]:
    """``lsof`` table rows, read by shape rather than by column position: SIZE/OFF is
    blank for some files and COMMAND may hold spaces. PID is the first all-digit token,
    NAME starts at the first ``/`` after TYPE; ``nlink`` says the +L1 column is there."""
    rows = (_lsof_row(line.split(), nlink) for line in lines(text))
    return [r for r in rows if r is not None]


def _lsof_row(cells: list[str], nlink: bool) -> OpenFile | None:
    at = next((i for i, c in enumerate(cells[1:], 1) if c.isdigit()), None)
    if at is None or cells[0] == "COMMAND" or len(cells) < at + 5:
        return None
    name_at = next((i for i in range(at + 4, len(cells)) if cells[i].startswith("/")), None)
    if name_at is None:
        return None
    middle = cells[at + 3:name_at]  # TYPE DEVICE [SIZE/OFF] [NLINK] NODE
    has_size = len(middle) >= (5 if nlink else 4)
    size = integer(middle[2]) if has_size and middle[2].isdigit() else None
    return OpenFile(command=" ".join(cells[:at]), pid=int(cells[at]),
                    user=cells[at + 1], fd=cells[at + 2], size=size,
                    name=" ".join(cells[name_at:]))


def parse_journal_usage(text: str) -> int | None:
    """'Archived and active journals take up 2.6G in the file system.' -> bytes."""
    m = _JOURNAL.search(text)
    return size_bytes(m[1] or m[2]) if m else None


def parse_findmnt(text: str) -> dict[str, set[str]]:
    """``findmnt -rn -o TARGET,OPTIONS`` -> mount point -> its options (``ro``, ``rw``...).
    ``-r`` escapes spaces in targets as ``\\x20``; they are unescaped here."""
    out: dict[str, set[str]] = {}
    for line in lines(text):
        target, _, options = line.strip().rpartition(" ")
        if target.startswith("/") and options:
            out[target.replace("\\x20", " ")] = set(options.split(","))
    return out

