"""The GPU view every diagnosis carries (``playbooks/pipeline.py`` merges it into the
playbook's report): ``gpu_health``'s verdicts and findings, the GPU reset it calls for,
and the fabric and platform's findings (``playbooks/platform.py``).

The reset proposal lives here, not in ``gpu_health``: it names the reset through its
action class (``GpuReset``), whose verification runs the health gate, which reads the
GPUs with ``gpu_health``; keeping the proposal above both leaves no import going round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.core import strings as S
from bot.domain.findings import Severity
from bot.domain.headline import gpu_label
from bot.domain.xid import XidStep
from bot.remediation.actions.gpu_reset import ALL_GPUS, GpuReset
from bot.remediation.actions.reboot import HostReboot
from playbooks import device_clients, gpu_health, platform
from playbooks.base import Report
from playbooks.text import plural
from playbooks.verdict import GpuVerdict, GpuView, HealthFacts, worst_step


def view(pending: gpu_health.Pending, host: str, named: frozenset[str] = frozenset()) -> Report:
    """The verdicts and their findings, the reset they call for, the fabric and platform's.
    ``named``: GPUs the playbook traced to a holder whose process this login cannot see
    (its unit or container): held, not wedged, so the headline never contradicts the body."""
    report = Report(host)
    facts, got = gpu_health.collect(pending)
    facts = replace(facts, named=named)
    views, issues = gpu_health.judge(facts, got, pending.options)
    gpu_health.assess(facts, views, got, report)
    step(facts, views, reset_proposals(facts, views, got, report), report)
    platform.assess(views, issues, platform.reading(got), pending.options, report)
    return report


def reset_proposals(facts: HealthFacts, views: list[GpuView], got: Mapping[str, Any],
                    report: Report) -> list[str]:
    """A GPU reset for GPUs whose step is a reset and that no compute process uses, with
    every other client of /dev/nvidia* stopped around it (``device_clients``); every GPU at
    once where one cannot be reset alone, or where all of them need it. A client that no
    unit or container owns blocks it: said, nothing proposed. Returns the GPUs proposed
    (``ALL_GPUS`` for every one)."""
    due = [v for v in views if v.step is XidStep.RESET_GPU and v.index is not None
           and v.verdict in (GpuVerdict.WEDGED, GpuVerdict.BROKEN)
           and not facts.holders.get(v.uuid)]
    if not due:
        return []
    together = device_clients.pre_hopper_nvswitch(facts.xml, str(got.get("fabric") or ""))
    every = together or (len(due) > 1 and len(due) == len(views))
    if together and any(facts.holders.values()):
        return []  # the whole baseboard resets: not while a job runs on any GPU
    found = device_clients.clients(got.get("devs") or [], got.get("stat") or {},
                                   got.get("units") or {}, got.get("containers") or {})
    compute = {p for pids in facts.holders.values() for p in pids}
    plan = device_clients.release_plan(found, all_gpus=every, compute=compute)
    if plan.blocking:
        report.find("gpu.reset_blocked", Severity.WARNING, S.GPU_RESET_BLOCKED.format(
            who=", ".join(c.words for c in plan.blocking[:4])),
            pids=[c.pid for c in plan.blocking])
        return []
    stops = ", ".join(c.words for c in plan.named) or S.GPU_RESET_NOTHING_TO_STOP
    targets = [ALL_GPUS] if every else [str(v.index) for v in due]
    for target in targets:
        one = next((v for v in due if str(v.index) == target), None)
        reason = (S.GPU_PROPOSE_RESET_ALL.format(
                      host=report.host, why=S.GPU_RESET_WHY_NVSWITCH if together else
                      S.GPU_RESET_WHY_EVERY.format(n=len(due)), stops=stops)
                  if one is None else S.GPU_PROPOSE_RESET.format(
                      gpu=gpu_label({"index": one.index, "bus": one.bus}), stops=stops))
        report.propose(GpuReset.kind, {"gpu": target, "release": plan.param}, reason,
                       S.GPU_RESET_RISK_ALL if one is None else S.GPU_RESET_RISK)
    return targets


def step(facts: HealthFacts, views: list[GpuView], reset: list[str], report: Report) -> None:
    """The step the verdicts call for, said so that every step named as the bot's is a
    button (issue 35): a reset the view proposed, a reboot (proposed here); a reset that
    could not be proposed (a process still uses the GPU, a client outside any unit blocks
    it) and the steps no action takes (a hardware ticket, restarting the application,
    looking closer) are a person's. The reboot carries what it becomes beside the kind's
    own proposals (``playbooks/pipeline.py`` merge): a reboot stops every process, so it
    waits for the narrower fixes and is offered on the look after them."""
    worst = worst_step(views)
    if worst is None:
        return
    said = S.GPU_STEP_PERSON.format(step=S.GPU_STEP_TEXT[worst.value])
    extra: dict[str, Any] = {}
    if worst is XidStep.RESET_GPU and reset:
        said = S.GPU_STEP.format(step=S.GPU_STEP_BUTTON.format(step=S.GPU_STEP_RESET.format(
            gpus=_gpus(reset))))
    elif worst is XidStep.RESET_GPU:
        said = _reset_person(facts, views, report)
    elif worst is XidStep.REBOOT:
        report.propose(HostReboot.kind, {}, S.GPU_STEP_REBOOT_REASON.format(host=report.host),
                       HostReboot.risk)
        said = S.GPU_STEP.format(step=S.GPU_STEP_BUTTON.format(step=S.GPU_STEP_REBOOT))
        extra = {"button": report.actions[-1].id,
                 "otherwise": S.GPU_STEP_PERSON.format(step=S.GPU_STEP_REBOOT_LATER)}
    report.find("gpu.step", Severity.WARNING, said, step=worst.value, **extra)


def _reset_person(facts: HealthFacts, views: list[GpuView], report: Report) -> str:
    due = [v for v in views if v.step is XidStep.RESET_GPU and v.index is not None]
    gpus = _gpus([str(v.index) for v in due])
    pids = sorted({p for v in due for p in facts.holders.get(v.uuid, [])}
                  or {p for ps in facts.holders.values() for p in ps})
    if any(f.code == "gpu.reset_blocked" for f in report.findings):
        return S.GPU_STEP_PERSON.format(step=S.GPU_STEP_RESET_BLOCKED.format(gpus=gpus))
    if pids:
        return S.GPU_STEP_PERSON.format(step=S.GPU_STEP_RESET_HELD.format(
            gpus=gpus, pids=f"PID{plural(len(pids))} {', '.join(map(str, pids[:6]))}"))
    return S.GPU_STEP_PERSON.format(step=S.GPU_STEP_TEXT[XidStep.RESET_GPU.value])


def _gpus(targets: list[str]) -> str:
    if ALL_GPUS in targets or not targets:
        return S.GPU_STEP_EVERY_GPU
    return f"GPU{plural(len(targets))} {', '.join(targets)}"
