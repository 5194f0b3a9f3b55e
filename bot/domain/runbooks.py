"""Which runbook a finding points to (``runbooks: {finding_code: url}`` in the config). Pure.

A code matches its own entry first, then its dotted parents: ``gpu.xid.79`` falls back to
``gpu.xid``, then ``gpu``, so one page can cover a family of findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.domain.findings import Diagnosis, Severity

MAX_LINKS = 3  # link buttons on one message; the rest are in the config for whoever looks


@dataclass(frozen=True)
class RunbookLink:
    code: str  # the finding's code
    url: str


def runbook_for(code: str, runbooks: Mapping[str, str]) -> str | None:
    parts = code.split(".")
    for n in range(len(parts), 0, -1):
        url = runbooks.get(".".join(parts[:n]))
        if url:
            return url
    return None


def runbook_links(diagnosis: Diagnosis, runbooks: Mapping[str, str]) -> tuple[RunbookLink, ...]:
    """One link per distinct URL, for the findings worth reading about (not info), in the
    diagnosis's order (the primary finding first)."""
    if not runbooks:
        return ()
    seen: dict[str, RunbookLink] = {}
    for finding in diagnosis.findings:
        url = runbook_for(finding.code, runbooks) if finding.severity is not Severity.INFO else None
        if url and url not in seen:
            seen[url] = RunbookLink(finding.code, url)
    return tuple(seen.values())[:MAX_LINKS]
