"""``run_playbook``: the one entry point the flow, remediation and the scheduler call.

Beside the playbook: the GPU view (``pipeline``) and the operators' extension findings
(``extension``). It never raises for host trouble: an unreachable host, a refused host
key or failed auth become a ``Diagnosis`` with status ``unreachable`` and a finding
saying why.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bot.core import strings as S
from bot.core.errors import log_internal
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.ssh.base import AuthFailed, HostKeyMismatch, SSHError, SSHRunner, SSHTarget
from playbooks import extension
from playbooks.base import PlaybookOptions, Session
from playbooks.pipeline import run_with_view
from playbooks.registry import get
from playbooks.slurm import drain_first, job_steps

MAX_PARALLEL_PROBES = 16  # the GPU view's probes run beside every playbook's own


def run_playbook(runner: SSHRunner, target: SSHTarget, name: str, *,
                 options: PlaybookOptions | None = None,
                 context: Mapping[str, Any] | None = None) -> Diagnosis:
    """Run playbook ``name`` on ``target``; ``UnknownPlaybook`` for a bad name only."""
    playbook = get(name)
    start = time.monotonic()
    with ThreadPoolExecutor(MAX_PARALLEL_PROBES, thread_name_prefix=f"probe-{target.name}") as ex:
        session = Session(runner, target, options or PlaybookOptions(), ex)
        try:
            report = run_with_view(playbook.run, session, context or {})
            extension.assess(session, report.playbook or playbook.name, report)
        except SSHError as exc:
            if metrics := _metrics():
                metrics.SSH_ERRORS.labels(kind=exc.kind).inc()
            return _observed(_unreachable(target, name, exc, time.monotonic() - start, session))
        except Exception as exc:  # a bug must not take the incident flow down
            return _internal(target, name, exc, time.monotonic() - start, session)
    drain_first(report, session.options.slurm_node, context or {})
    job_steps(report, session.options.slurm_node)
    status = DiagnosisStatus.PARTIAL if session.degraded else DiagnosisStatus.OK
    return _observed(Diagnosis(host=target.name, playbook=report.playbook or name, status=status,
                     duration_s=time.monotonic() - start, findings=tuple(report.findings),
                     actions=tuple(report.actions), probes=tuple(session.results)))


def _metrics() -> Any:
    """``bot.core.metrics`` where this process exports metrics (``serve`` and the worker
    import it), else None: a CLI ``diagnose`` skips prometheus_client's import, 0.07 s."""
    return sys.modules.get("bot.core.metrics")


def _observed(diagnosis: Diagnosis) -> Diagnosis:
    if not (metrics := _metrics()):
        return diagnosis
    metrics.DIAGNOSIS_DURATION.labels(playbook=diagnosis.playbook,
                                      status=diagnosis.status.value).observe(diagnosis.duration_s)
    return diagnosis


def unreachable_finding(target: SSHTarget, exc: SSHError) -> Finding:
    if isinstance(exc, HostKeyMismatch):
        code, title = "ssh.host_key_mismatch", S.DIAG_HOST_KEY.format(host=target.name)
    elif isinstance(exc, AuthFailed):
        code, title = "ssh.auth_failed", S.DIAG_AUTH.format(host=target.name)
    else:
        code = "ssh.unreachable"
        title = S.DIAG_UNREACHABLE.format(host=target.name, reason=str(exc))
    return Finding(code, Severity.CRITICAL, title, str(exc),
                   {"address": target.address, "kind": exc.kind})


def _unreachable(target: SSHTarget, name: str, exc: SSHError, took: float,
                 session: Session) -> Diagnosis:
    return Diagnosis(host=target.name, playbook=name, status=DiagnosisStatus.UNREACHABLE,
                     duration_s=took, findings=(unreachable_finding(target, exc),),
                     probes=tuple(session.results))


def _internal(target: SSHTarget, name: str, exc: Exception, took: float,
              session: Session) -> Diagnosis:
    error_id = log_internal(exc, f"playbook {name} on {target.name}")
    finding = Finding("playbook.error", Severity.WARNING,
                      S.DIAG_INTERNAL.format(playbook=name, error_id=error_id),
                      f"{type(exc).__name__}: {exc}"[:500], {"error_id": error_id})
    return Diagnosis(host=target.name, playbook=name, status=DiagnosisStatus.PARTIAL,
                     duration_s=took, findings=(finding,), probes=tuple(session.results))
