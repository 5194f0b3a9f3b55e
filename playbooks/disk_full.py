"""disk_full: space and inodes per real filesystem, what fills the full one, deleted files
still held open, /dev/shm leftovers and the journal.

Only one action is ever proposed (``disk.journal_vacuum``): it is safe and specific.
Everything else is a finding with evidence; deleting data is a human decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.domain import validate
from bot.domain.findings import Severity
from bot.remediation.actions.journal import JournalVacuum
from playbooks import probes
from playbooks.base import PlaybookOptions, Report, Session
from playbooks.parsers.disk import DuEntry, Filesystem, OpenFile

NAME = "disk_full"
DESCRIPTION = "full filesystems: largest directories, deleted-but-open files, /dev/shm, journal"


@dataclass(frozen=True)
class DiskPicture:
    space: list[Filesystem]
    inodes: list[Filesystem]
    journal_bytes: int | None
    deleted: list[OpenFile]
    shm: list[DuEntry]
    largest: dict[str, list[DuEntry]]  # mount -> du entries
    du_timed_out: dict[str, bool]


JOURNAL_DIR = "/var/log/journal"


def run(session: Session, context: Mapping[str, Any]) -> Report:
    report = Report(session.target.name)
    assess(gather(session), session.options, report, alerted_mount(context))
    return report


def alerted_mount(context: Mapping[str, Any]) -> str:
    """The mount the alert named (Prometheus's ``mountpoint`` label), or "" for any."""
    mount = context.get("mount")
    return mount if isinstance(mount, str) and safe_mount(mount) else ""


def mount_of(path: str, space: list[Filesystem]) -> str:
    """The mount point ``path`` lives on: the longest mount that is a prefix of it."""
    mounts = [f.mount for f in space if f.real and
              (f.mount == "/" or path == f.mount or path.startswith(f.mount.rstrip("/") + "/"))]
    return max(mounts, key=len, default="/")


def gather(session: Session) -> DiskPicture:
    futures = session.submit_many({
        "df": probes.df(), "inodes": probes.df_inodes(),
        "journal": probes.journal_usage(sudo=session.target.sudo),  # root's to size
        "deleted": probes.deleted_open_files(), "shm": probes.shm_usage()})
    space = futures["df"].result()[1]
    largest, timed_out = _largest(session, full(space, session.options))
    got = session.parsed(futures)
    return DiskPicture(space, got["inodes"], got["journal"], got["deleted"], got["shm"],
                       largest, timed_out)


def full(space: list[Filesystem], opts: PlaybookOptions) -> list[Filesystem]:
    return [f for f in space if f.real and (f.used_pct or 0) >= opts.disk_full_pct]


def _largest(session: Session, targets: list[Filesystem]) -> tuple[dict[str, list[DuEntry]],
                                                                    dict[str, bool]]:
    """``du`` one level down on each full filesystem whose mount point is a safe path."""
    runs = {}
    for fs in targets[:3]:
        mount = safe_mount(fs.mount)
        if mount is not None:
            runs[fs.mount] = session.submit(probes.du(mount, session.options.du_timeout_s))
    results = {m: f.result() for m, f in runs.items()}
    return ({m: r[1] for m, r in results.items()}, {m: r[0].timed_out for m, r in results.items()})


def safe_mount(mount: str) -> str | None:
    """A mount point fit for a command line (grammar-checked, then quoted by ``cmd``)."""
    return mount if validate.is_valid(validate.abs_path, mount) else None


def assess(p: DiskPicture, opts: PlaybookOptions, report: Report, alerted: str = "") -> None:
    assess_space(p.space, p.inodes, opts, report, alerted)
    for mount, entries in p.largest.items():
        _largest_finding(mount, entries, p.du_timed_out.get(mount, False), opts, report)
    _deleted(p.deleted, report)
    _shm(p.shm, opts, report)
    _journal(p.journal_bytes, p.space, opts, report, alerted)


def assess_space(space: list[Filesystem], inodes: list[Filesystem], opts: PlaybookOptions,
                 report: Report, alerted: str = "") -> None:
    """Full filesystems (space or inodes); vm_restart reuses this. The mount the alert named
    is marked (``alerted``) so the headline names it before a fuller one beside it."""
    full_fs = full(space, opts)
    for fs in full_fs:
        pct = fs.used_pct or 0.0
        report.find("disk.full", Severity.CRITICAL if pct >= 98 else Severity.WARNING,
                    S.DIAG_DISK_FULL.format(mount=fs.mount, pct=pct, used=fmt.size(fs.used),
                                            size=fmt.size(fs.size), avail=fmt.size(fs.avail)),
                    filesystem=vars(fs), alerted=bool(alerted) and fs.mount == alerted)
    for fs in inodes:
        pct = fs.used_pct or 0.0
        if fs.real and pct >= opts.inode_full_pct:
            report.find("disk.inodes_full", Severity.WARNING, S.DIAG_INODES_FULL.format(
                mount=fs.mount, pct=pct, used=fs.used, size=fs.size), filesystem=vars(fs))
    if not full_fs and space:
        report.find("disk.ok", Severity.INFO, S.DIAG_DISK_OK.format(pct=opts.disk_full_pct),
                    filesystems=[vars(f) for f in space if f.real])


def _largest_finding(mount: str, entries: list[DuEntry], timed_out: bool, opts: PlaybookOptions,
                     report: Report) -> None:
    below = [e for e in entries if e.path.rstrip("/") != mount.rstrip("/")][:10]
    top = ", ".join(f"{e.path} {fmt.size(e.size)}" for e in below[:5]) or "nothing readable"
    report.find("disk.largest_dirs", Severity.INFO, S.DIAG_LARGEST_DIRS.format(
        mount=mount, top=top), entries=[vars(e) for e in below])
    if timed_out:
        report.find("disk.du_timed_out", Severity.INFO, S.DIAG_DU_TIMED_OUT.format(
            mount=mount, secs=opts.du_timeout_s))


def _deleted(files: list[OpenFile], report: Report) -> None:
    gone = sorted((f for f in files if f.deleted), key=lambda f: -(f.size or 0))
    if not gone:
        return
    total = sum(f.size or 0 for f in gone)
    top = ", ".join(f"{f.name.removesuffix(' (deleted)')} ({fmt.size(f.size)}, PID {f.pid} "
                    f"{f.command})" for f in gone[:3])
    report.find("disk.deleted_open", Severity.WARNING if total else Severity.INFO,
                S.DIAG_DELETED_HELD.format(n=len(gone), s="" if len(gone) == 1 else "s",
                                           verb="holds" if len(gone) == 1 else "hold",
                                           size=fmt.size(total), top=top[:400]),
                files=[vars(f) for f in gone[:50]])


def _shm(entries: list[DuEntry], opts: PlaybookOptions, report: Report) -> None:
    root = next((e for e in entries if e.path.rstrip("/") == "/dev/shm"), None)
    total = root.size if root else sum(e.size for e in entries)
    if total < opts.shm_warn_bytes:
        return
    below = [e for e in entries if e is not root][:10]
    top = ", ".join(f"{e.path} {fmt.size(e.size)}" for e in below[:5]) or "files at the top level"
    report.find("disk.shm", Severity.WARNING, S.DIAG_SHM.format(size=fmt.size(total), top=top),
                entries=[vars(e) for e in below])


def _journal(size: int | None, space: list[Filesystem], opts: PlaybookOptions,
             report: Report, alerted: str = "") -> None:
    """The journal's size; a vacuum is proposed only when the full mount (the alerted one,
    when the alert named it) is the one the journal lives on: vacuuming / frees nothing
    on a full /data."""
    if size is None:
        return
    try:
        keep = validate.size(opts.journal_vacuum_size)
    except validate.InvalidIdentifier:
        return
    home = mount_of(JOURNAL_DIR, space)
    fixes = any(f.mount == home and (not alerted or f.mount == alerted)
                for f in full(space, opts))
    if size < opts.journal_warn_bytes and not fixes:
        return
    report.find("disk.journal", Severity.WARNING, S.DIAG_JOURNAL.format(size=fmt.size(size)),
                bytes=size, mount=home)
    limit = _size_bytes(keep)
    if size > limit and fixes:
        report.propose(JournalVacuum.kind, {"size": keep}, S.DIAG_JOURNAL_REASON.format(
            size=keep, frees=fmt.size(size - limit)), S.DIAG_JOURNAL_RISK)


def _size_bytes(text: str) -> int:
    return int(text[:-1]) * 1024 ** ("KMGT".index(text[-1]) + 1)
