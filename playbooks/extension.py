"""Operator extensions' findings in a diagnosis (``docs/extending.md``).

After the playbook (and the GPU view beside it), each installed extension finding whose
``playbooks`` include the one that ran reads its probe's stdout, in the same session:
an extension's own probe (its command as written) or a registered one
(``probe_registry``). A match is a finding like a built-in one (its code, severity and
title), and its proposal is proposed like a built-in rule's: it then goes through the
same plan, approval, policy, preflight, verify and audit. A probe that could not run
(timed out, no answer, no such program) is said as such: "could not check", never "fine".

``install`` is called once at start by the composition root (``bot/extensions``).
"""

from __future__ import annotations

from typing import Any

from bot.core import strings as S
from bot.domain.extension import NO_EXTENSIONS, PREFIX, Extensions, FindingDef
from bot.domain.findings import ProbeResult, Severity
from playbooks import probe_registry
from playbooks.base import Probe, Report, Session
from playbooks.text import printable

PROBE_FAILED = "extension.probe_failed"
NOT_FOUND = (126, 127)  # the shell could not run the program

_installed: list[Extensions] = [NO_EXTENSIONS]


def install(extensions: Extensions) -> None:
    """The findings every later diagnosis adds (replaces what was installed before)."""
    _installed[0] = extensions


def installed() -> Extensions:
    return _installed[0]


def probe_for(extensions: Extensions, name: str) -> Probe[str]:
    """The probe a finding names: an extension's own (listed in the diagnosis as
    ``ext.NAME``, apart from the playbooks' probes), else a registered one under its own
    name and command (run once when the playbook runs it too). The finding reads the raw
    stdout."""
    own = extensions.probes.get(name)
    if own is not None:
        return Probe(PREFIX + name, own.command, _raw, timeout_s=own.timeout_s)
    registered = probe_registry.get(name)
    return Probe(registered.name, registered.command, _raw, timeout_s=registered.timeout_s)


def _raw(stdout: str) -> str:
    return stdout


def answered(result: ProbeResult) -> str:
    """Why the probe could not be read ("" when it answered, whatever its exit status:
    ``systemctl is-active`` says "inactive" with exit 3)."""
    if result.timed_out:
        return "timed out"
    if result.error:
        return result.error[:200]
    if result.exit_status in NOT_FOUND:
        return (result.stderr.strip() or f"exit {result.exit_status}")[:200]
    return ""


def assess(session: Session, playbook: str | None, report: Report,
           extensions: Extensions | None = None) -> list[ProbeResult]:
    """Add the matching extension findings (and their proposals) of ``playbook`` (None:
    every finding) to ``report``; the probe results, for a caller that shows them
    (``incident-bot extensions test``)."""
    ext = extensions if extensions is not None else installed()
    rules = [f for f in ext.findings if playbook is None or f.applies_to(playbook)]
    if not rules:
        return []
    futures = session.submit_many({n: probe_for(ext, n) for n in sorted({f.probe for f in rules})})
    results = {name: future.result()[0] for name, future in futures.items()}
    for name, result in results.items():
        why = answered(result)
        if why:
            sources = sorted({f.source for f in rules if f.probe == name})
            report.find(PROBE_FAILED, Severity.INFO, S.EXT_PROBE_FAILED.format(
                probe=name, source=", ".join(sources), why=why), probe=name, why=why)
    for rule in rules:
        result = results[rule.probe]
        if not answered(result) and rule.matches(result.stdout):
            _found(rule, result, report)
    return list(results.values())


def _found(rule: FindingDef, result: ProbeResult, report: Report) -> None:
    title = rule.title_for(result.stdout)
    report.find(rule.code, Severity(rule.severity), title, probe=rule.probe,
                command=result.command, exit_status=result.exit_status,
                stdout=printable(result.stdout.strip(), 500), extension=rule.source)
    proposal = rule.proposal_for(result.stdout)
    if proposal is not None:
        kind, params = proposal
        report.propose(kind, params, printable(title, 300), _risk(kind))


def _risk(kind: str) -> str:
    """The proposed action's own risk (it is registered by the time a diagnosis runs)."""
    from bot.remediation.actions import find

    action: Any = find(kind)
    return str(action.risk) if action is not None else ""
