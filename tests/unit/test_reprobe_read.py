"""The re-probe before an approved action (``bot/flow/act_step.py``): a diagnosis whose
probes never got a session (a frozen sshd at the click) is no reading of the host, even
where it proposes the approved action again (a frozen host reads as a hung nvidia-smi,
whose step is a reboot); a tool the host ran past its deadline is a reading."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, ProbeResult, ProposedAction
from bot.flow.act_step import cut_off, unread
from bot.ssh.pool import NO_ANSWER

REBOOT = ProposedAction("reboot", "host.reboot", {}, "nvidia-smi timed out", "every process stops")


def diagnosis(status: DiagnosisStatus, *probes: ProbeResult) -> Diagnosis:
    return Diagnosis("h1", "gpu_health", status, 3.0, actions=(REBOOT,), probes=probes)


def test_probes_that_never_got_a_session_lose_the_host_even_with_the_action_proposed() -> None:
    frozen = diagnosis(DiagnosisStatus.PARTIAL,
                       ProbeResult("nvidia_smi", "nvidia-smi", None, 10.0, timed_out=True,
                                   error=NO_ANSWER))
    assert cut_off(frozen)
    assert unread(frozen) == "nvidia_smi: timed out"


def test_a_transport_error_under_an_ok_status_is_still_not_a_full_read() -> None:
    lost = diagnosis(DiagnosisStatus.OK,
                     ProbeResult("df", "df -PT", None, 0.1,
                                 error="the server refused every channel (MaxSessions?)"))
    assert cut_off(lost) and unread(lost) is not None


def test_a_tool_the_host_ran_past_its_deadline_is_a_reading() -> None:
    hung = diagnosis(DiagnosisStatus.PARTIAL,
                     ProbeResult("nvidia_smi", "nvidia-smi", 124, 4.0, timed_out=True))
    assert not cut_off(hung)  # the reboot it proposes may go ahead
    full = diagnosis(DiagnosisStatus.OK, ProbeResult("df", "df -PT", 0, 0.1))
    assert not cut_off(full) and unread(full) is None


def test_an_unreachable_host_is_cut_off() -> None:
    assert cut_off(Diagnosis("h1", "gpu_health", DiagnosisStatus.UNREACHABLE, 3.0))
