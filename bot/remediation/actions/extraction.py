"""Resume an interrupted extraction (``extraction.resume``), or resume it although the GPU
health gate failed (``extraction.resume_override``, behind two distinct approvers).

The only actions that act on the bot's own queue, not over SSH: they call the jobs API
(``bot/remediation/resume.py``); the job itself skips finished samples and repairs
half-written ones. The flow runs the health gate on the host first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.remediation.actions.base import Action, ActionParams, ParamHelp
from bot.ssh.base import SSHTarget


def job_id(value: object) -> str:
    """An extraction job id, in the one grammar ``new_job_id`` makes."""
    if not isinstance(value, str) or not validate.valid_job_id(value):
        raise validate.InvalidIdentifier("job", value, "expected ex- and 12 hex digits")
    return value


class JobIdParams(ActionParams):
    job: Annotated[str, BeforeValidator(job_id), ParamHelp("an extraction job id")]


class ResumeExtraction(Action):
    kind = "extraction.resume"
    title = strings.ACT_TITLE_RESUME
    risk = strings.ACT_RISK_RESUME
    Params = JobIdParams
    remote = False
    resumes = True
    reprobe_first = False  # offered after the fact: the gate decides, not a new diagnosis
    phrase_template = strings.MSG_ACTION_RESUME
    done_template = strings.MSG_DONE_RESUME

    def plan(self, p: Mapping[str, str], target: SSHTarget | None) -> list[str]:
        return [strings.ACT_PLAN_RESUME.format(job=p["job"], forced="")]

    def offer_label(self, reason: str) -> str:
        return strings.REM_OFFER_RESUME


class ResumeOverride(ResumeExtraction):
    kind = "extraction.resume_override"
    title = strings.ACT_TITLE_RESUME_OVERRIDE
    risk = strings.ACT_RISK_RESUME_OVERRIDE
    overrides_gate = True
    phrase_template = strings.MSG_ACTION_RESUME_OVERRIDE
    done_template = strings.MSG_DONE_RESUME_OVERRIDE

    def plan(self, p: Mapping[str, str], target: SSHTarget | None) -> list[str]:
        return [strings.ACT_PLAN_RESUME.format(job=p["job"], forced=strings.ACT_PLAN_FORCED)]

    def offer_label(self, reason: str) -> str:
        return reason
