"""Delete listed files (``rm -f -- PATH`` each) to free a full mount: caches, old
checkpoints and core dumps that ``bot/remediation/cleanup.py`` found and ranked.

Every path is checked twice: by its grammar here (absolute, below a top-level
directory, no odd characters) and in the preflight against the host's one set of allowed
prefixes (``Hosts.act_options``: the inventory's ``allowed_path_prefixes``, the same set
the diagnosis searched), outside the output of an unfinished job, a regular file that no
process holds open. One bad path refuses the whole action. Verified only once the mount
that alerted is under its threshold, whatever was freed; a proposal may be split into
parts (one per category), each its own approval.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from bot.core import fmt, strings
from bot.domain import validate
from bot.domain.action_result import Seen, Verification
from bot.domain.findings import ProposedAction
from bot.domain.headline import Fixes
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal
from bot.remediation.cleanup import open_files, under
from bot.remediation.readings import read_disk_usage, regular_files
from bot.remediation.spec import RemoteStep

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

PATH_SEP = "|"  # not in the path grammar: joins the files of one disk.cleanup
MAX_PATHS = 500
PART_PREFIX = "cleanup-part-"  # the id of a per-category (or per-item) proposal


def check_paths(value: object) -> str:
    """``|``-joined absolute file paths, grammar only. Where they may be is the host's
    one set of allowed prefixes, checked in the preflight: the same set the diagnosis
    searched, so a proposal is never refused by a second, different list."""
    if not isinstance(value, str) or not value:
        raise validate.InvalidIdentifier("paths", value, "one or more paths joined by |")
    parts = value.split(PATH_SEP)
    if len(parts) > MAX_PATHS:
        raise validate.InvalidIdentifier("paths", value, f"at most {MAX_PATHS} paths")
    return PATH_SEP.join(check_file_path(p) for p in parts)


def check_file_path(value: str) -> str:
    clean = validate.abs_path(value)
    if clean == "/" or clean.count("/") < 2:
        raise validate.InvalidIdentifier("paths", value, "a file below a top-level directory")
    return clean


def check_mount(value: object) -> str:
    """The mount point a cleanup frees space on (empty: any mount counts)."""
    return "" if value == "" else validate.abs_path(value)


def check_pct(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or not 0 <= int(value) <= 100:
        raise validate.InvalidIdentifier("full_pct", value, "a whole percentage, 0..100")
    return str(int(value))


def check_bytes(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or len(value) > 20:
        raise validate.InvalidIdentifier("need_bytes", value, "a whole number of bytes")
    return str(int(value))


class CleanupParams(ActionParams):
    paths: Annotated[str, BeforeValidator(check_paths), ParamHelp("files to delete, joined by |")]
    need_bytes: Annotated[str, BeforeValidator(check_bytes),
                          ParamHelp("bytes that must be freed")] = "0"
    mount: Annotated[str, BeforeValidator(check_mount),
                     ParamHelp("the full mount it frees space on")] = ""
    full_pct: Annotated[str, BeforeValidator(check_pct),
                        ParamHelp("verified only once the mount is below this")] = "0"


class DiskCleanup(Action):
    kind = "disk.cleanup"
    title = strings.ACT_TITLE_CLEANUP
    risk = strings.ACT_RISK_CLEANUP
    Params = CleanupParams
    fixes = Fixes.PATHS
    words_from_summary = True  # how much it freed is in its summary
    previewed = True

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return tuple(RemoteStep("rm", ("rm", "-f", "--", path), 30.0)
                     for path in p["paths"].split(PATH_SEP))

    def capture_disks(self) -> bool:
        return True

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return fmt.counted(p["paths"].count(PATH_SEP) + 1, "file")

    def phrase(self, p: Mapping[str, str]) -> str:
        """No stored preview to name the items (the caller has none): count the files."""
        n = len([x for x in p.get("paths", "").split(PATH_SEP) if x])
        return strings.MSG_ACTION_CLEANUP_FILES.format(n=n, s="" if n == 1 else "s")

    @classmethod
    def is_part(cls, action: ProposedAction) -> bool:
        """One part of a split cleanup proposal (its own approval)."""
        return action.kind == cls.kind and action.id.startswith(PART_PREFIX)

    @classmethod
    def part(cls, host: str, params: Mapping[str, str], reason: str) -> ProposedAction:
        whole = cls.propose(host, params, reason)
        return ProposedAction(PART_PREFIX + whole.id[:10], whole.kind, whole.params,
                              whole.reason, whole.risk)

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """Every path: inside the host's prefixes, outside paused/queued job output, a
        regular file, open in no process. One bad path refuses the whole action."""
        o, host = ctx.options, ctx.target.name
        listed = ctx.params["paths"].split(PATH_SEP)
        for path in listed:
            if not under(path, o.allowed_prefixes):
                return Refusal(strings.REM_CLEAN_OUTSIDE.format(
                    path=path, host=host, prefixes=", ".join(o.allowed_prefixes) or "none"))
            guarded = next((d for d in o.protected_dirs if under(path, [d])), None)
            if guarded:
                return Refusal(strings.REM_CLEAN_PROTECTED.format(path=path, dir=guarded))
        files = regular_files(ctx.runner, ctx.target, listed, o.probe_timeout_s)
        missing = next((p for p in listed if p not in files), None)
        if missing:
            return Refusal(strings.REM_CLEAN_NOT_FILE.format(path=missing, host=host))
        busy = open_files(ctx.runner, ctx.target, listed, o.probe_timeout_s)
        if busy:
            return Refusal(strings.REM_CLEAN_OPEN.format(path=sorted(busy)[0]))
        return None

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """Every file gone, and the mount that alerted under its threshold (``mount`` and
        ``full_pct``): never verified while that mount stays above it, whatever was freed.
        Without a mount (a cleanup typed by hand) ``df`` must show ``need_bytes`` more
        free."""
        start = time.monotonic()
        t = ctx.options.probe_timeout_s
        listed = ctx.params["paths"].split(PATH_SEP)
        left = sorted(regular_files(ctx.runner, ctx.target, listed, t))
        usage = read_disk_usage(ctx.runner, ctx.target, t)
        after = {m: avail for m, (_, avail) in usage.items()}
        gained = {m: after[m] - b for m, b in captured.disk_avail.items() if m in after}
        grew = {m: g for m, g in gained.items() if g > 0}
        freed, need = sum(grew.values()), int(ctx.params["need_bytes"])
        ev: dict[str, Any] = {"freed_bytes": freed, "need_bytes": need, "per_mount": grew,
                              "left": left[:20], "avail_before": captured.disk_avail,
                              "avail_after": after}
        where = ctx.params.get("mount", "")
        if where and where in usage:
            ok, detail = _mount_below(ctx, where, usage[where], grew.get(where, 0), ev)
            ok = ok and not left
        else:
            ok = not left and freed >= need
            detail = strings.REM_CLEAN_FREED.format(
                files=fmt.counted(len(listed) - len(left), "file"), freed=fmt.size(freed),
                mounts=", ".join(sorted(grew)) or "no mount", need=fmt.size(need))
        if left:
            detail += "; " + strings.REM_CLEAN_LEFT.format(left=fmt.counted(len(left), "file"))
        return Verification(Seen.of(ok), detail, time.monotonic() - start, evidence=ev)


def _mount_below(ctx: ActionRun, where: str, usage: tuple[int, int], freed: int,
                 ev: dict[str, Any]) -> tuple[bool, str]:
    """Is ``where`` under ``full_pct`` now; the partial result says how far and what next."""
    used, avail = usage
    full = int(ctx.params.get("full_pct") or 0) or 100
    used_pct = math.ceil(used * 100 / (used + avail)) if used + avail else 0  # as df rounds
    still = max(0, used - int((used + avail) * full / 100))
    ev.update(mount=where, used_pct_after=round(used_pct, 2), full_pct=full,
              still_need_bytes=still, freed_on_mount=freed, partial=still > 0)
    if still == 0:
        return True, strings.REM_CLEAN_FREED.format(
            files=fmt.counted(len(ctx.params["paths"].split(PATH_SEP)), "file"),
            freed=fmt.size(freed), mounts=where,
            need=fmt.size(int(ctx.params["need_bytes"]))) + "; " + strings.REM_CLEAN_BELOW.format(
            mount=where, pct=used_pct, full=full)
    return False, strings.REM_CLEAN_PARTIAL.format(
        freed=fmt.size(freed), needed=fmt.size(freed + still), mount=where, pct=used_pct,
        full=full, next=strings.REM_CLEAN_NEXT.format(mount=where))
