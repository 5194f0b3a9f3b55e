"""The simulated hosts' GPU failure modes, read back by the real parsers (no sshd)."""

from __future__ import annotations

import io
from pathlib import Path

from bot.sim.build import build_state
from bot.sim.scenario import load_scenario
from bot.sim.state import SimCall, write_state
from bot.sim.tools import journal, misc, nvidia_smi
from playbooks.commands import QUERY_GPU_COMMAND, QUERY_XML_COMMAND
from playbooks.parsers.kernel import parse_kernel_log
from playbooks.parsers.nvidia import parse_query_gpu
from playbooks.parsers.nvidia_xml import parse_query_xml
from playbooks.parsers.smi_errors import SmiErrorKind, parse_smi_errors

T0 = 1_790_000_000.0


class Host:
    def __init__(self, tmp: Path, scenario: str) -> None:
        self.dir, self.now, self.slept = tmp, T0, 0.0
        write_state(tmp, build_state(load_scenario(scenario), now=T0))

    def sleep(self, s: float) -> None:
        self.slept += s
        self.now += s

    def run(self, main: object, argv: list[str]) -> tuple[int, str]:
        out = io.StringIO()
        ctx = SimCall(self.dir, out=out, err=io.StringIO(), clock=lambda: self.now,
                      sleep=self.sleep)
        return main(argv, ctx), out.getvalue()  # type: ignore[operator]


def argv(command: str) -> list[str]:
    return command.split()[1:]


def test_xid79_lists_the_others_and_names_the_lost_gpu(tmp_path: Path) -> None:
    host = Host(tmp_path, "gpu_xid79")
    code, out = host.run(nvidia_smi.main, argv(QUERY_GPU_COMMAND))
    assert code == nvidia_smi.EXIT_GPU_LOST
    assert [g.index for g in parse_query_gpu(out)] == [0, 1, 2, 4, 5, 6, 7]
    (err,) = parse_smi_errors(out)
    assert (err.kind, err.bus) == (SmiErrorKind.DEVICE_HANDLE, "0000:5d:00")
    _, kmsg = host.run(journal.main, ["-k", "-b", "--no-pager", "-q"])
    assert [(x.bus, x.xid) for x in parse_kernel_log(kmsg).xids] == [("0000:5d:00", 79)]
    assert " kernel: NVRM: Xid (PCI:0000:5d:00): 79" in kmsg


def test_xml_carries_ecc_remap_and_processes(tmp_path: Path) -> None:
    host = Host(tmp_path, "gpu_ecc_dbe")
    code, out = host.run(nvidia_smi.main, argv(QUERY_XML_COMMAND))
    rep = parse_query_xml(out)
    assert code == 0 and rep.error is None and len(rep.gpus) == 8
    assert [g.ecc_uncorrected for g in rep.gpus] == [0, 0, 0, 0, 0, 2, 0, 0]
    assert all(g.pids == (2211,) and g.persistence == "Enabled" for g in rep.gpus)
    assert rep.gpus[5].bus == "0000:ab:00" and rep.gpus[5].remap_pending is False


def test_mismatch_every_call_fails_with_the_real_wording(tmp_path: Path) -> None:
    host = Host(tmp_path, "gpu_nvml_mismatch")
    for command in (QUERY_GPU_COMMAND, QUERY_XML_COMMAND, "nvidia-smi"):
        code, out = host.run(nvidia_smi.main, argv(command))
        assert code == nvidia_smi.EXIT_LIB_MISMATCH
        (err,) = parse_smi_errors(out)
        assert (err.kind, err.library_version) == (SmiErrorKind.NVML_MISMATCH, "580.105")
    _, kmsg = host.run(misc.main_dmesg, [])
    (m,) = parse_kernel_log(kmsg).mismatches
    assert (m.client_version, m.kernel_version) == ("580.105.08", "580.95.05")


def test_missing_gpu_is_not_enumerated_and_hang_sleeps(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    host = Host(tmp_path / "a", "gpu_missing")
    _, out = host.run(nvidia_smi.main, argv(QUERY_GPU_COMMAND))
    assert len(parse_query_gpu(out)) == 7
    (tmp_path / "b").mkdir()
    hung = Host(tmp_path / "b", "gpu_smi_hang")
    hung.run(nvidia_smi.main, argv(QUERY_GPU_COMMAND))
    assert hung.slept == 3600
