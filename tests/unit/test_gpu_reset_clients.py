"""Who holds /dev/nvidia* and what a GPU reset stops around itself (playbooks/device_clients.py,
the reset proposal in playbooks/gpu_view.py, gpu.reset's parameters), pure."""

from __future__ import annotations

import pytest

from bot.domain.xid import XidStep
from bot.remediation.catalog import ActionRefused, get, plan
from bot.ssh.base import SSHTarget
from playbooks.base import Report
from playbooks.device_clients import DeviceClient, clients, pre_hopper_nvswitch, release_plan
from playbooks.gpu_view import reset_proposals
from playbooks.parsers.kernel import KernelReport
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.verdict import GpuVerdict, GpuView, HealthFacts

CID = "4f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3"
STATES = {415: ("Ss", "nvidia-persiste"), 1822: ("Sl", "dcgm-exporter"), 77: ("S", "watch"),
          900: ("Sl", "nv-hostengine"), 950: ("Ssl", "nv-fabricmanage")}
UNITS = {415: "nvidia-persistenced.service", 1822: f"docker-{CID}.scope", 77: "session-3.scope",
         900: "nvidia-dcgm.service", 950: "nvidia-fabricmanager.service"}


def test_clients_name_units_and_containers() -> None:
    found = clients([1822, 415, 77, 31337], STATES, UNITS, {CID: "dcgm-exporter"})
    assert [(c.pid, c.subject) for c in found] == [
        (77, None), (415, "unit:nvidia-persistenced.service"), (1822, "container:dcgm-exporter")]
    assert [c.words for c in found] == ["pid 77 (watch)", "nvidia-persistenced.service",
                                        "dcgm-exporter (container)"]


def test_release_order_fabric_manager_only_for_every_gpu_and_blockers() -> None:
    found = clients([415, 1822, 900, 950], STATES, UNITS, {CID: "dcgm-exporter"})
    one = release_plan(found, all_gpus=False)
    assert one.release == ("container:dcgm-exporter", "unit:nvidia-dcgm.service",
                           "unit:nvidia-persistenced.service")
    every = release_plan(found, all_gpus=True)
    assert every.param == ("container:dcgm-exporter|unit:nvidia-dcgm.service|"
                           "unit:nvidia-fabricmanager.service|unit:nvidia-persistenced.service")
    bare = release_plan([*found, DeviceClient(77, "watch", "session-3.scope")], all_gpus=False,
                        compute=[900])
    assert [c.pid for c in bare.blocking] == [77]
    assert "unit:nvidia-dcgm.service" not in bare.release  # a compute process is never stopped


def gpu(name: str) -> GpuHealth:
    return GpuHealth("0000:18:00", "", "GPU-0", name)


def test_which_baseboards_reset_only_as_a_whole() -> None:
    assert pre_hopper_nvswitch([gpu("NVIDIA A100-SXM4-80GB")], "active")
    assert pre_hopper_nvswitch([gpu("Tesla V100-SXM3-32GB")], "failed")
    assert not pre_hopper_nvswitch([gpu("NVIDIA H100 80GB HBM3")], "active")
    assert not pre_hopper_nvswitch([gpu("NVIDIA A100-PCIE-40GB")], "inactive")  # no NVSwitch


def test_gpu_reset_parameters_render_exact_commands() -> None:
    t = SSHTarget("gpu-08", "h")
    assert plan("gpu.reset", {"gpu": "all", "release": "container:dcgm-exporter|"
                                                       "unit:nvidia-persistenced.service"}, t) == [
        "docker stop dcgm-exporter", "systemctl stop nvidia-persistenced.service",
        "nvidia-smi --gpu-reset", "systemctl start nvidia-persistenced.service",
        "docker start dcgm-exporter"]
    spec = get("gpu.reset")
    for bad in ("container:$(reboot)", "unit:sshd", "unit:a.service|unit:a.service",
                "container:", "volume:x", "unit:-x.service"):
        with pytest.raises(ActionRefused, match="release"):
            spec.validate({"gpu": "0", "release": bad})
    with pytest.raises(ActionRefused, match="gpu"):
        spec.validate({"gpu": "every"})


def wedged(i: int, bus: str) -> GpuView:
    v = GpuView(i, bus, f"GPU-{i}", memory_used_mib=70000, util_pct=0)
    v.mark(GpuVerdict.WEDGED, "memory held and no live process uses this GPU", XidStep.RESET_GPU)
    return v


def facts(name: str = "NVIDIA H100 80GB HBM3", holders: dict[str, list[int]] | None = None
          ) -> HealthFacts:
    return HealthFacts([], [GpuHealth("0000:18:00", "", "GPU-0", name)],
                       KernelReport([], [], []), [], holders or {}, {}, [], 2)


GOT = {"devs": [415, 1822], "stat": STATES, "units": UNITS, "containers": {CID: "dcgm-exporter"},
       "fabric": "inactive"}


def test_a_wedged_gpu_is_proposed_for_a_reset_that_stops_its_clients() -> None:
    report = Report("gpu-08")
    free = GpuView(1, "0000:2a:00", "GPU-1", verdict=GpuVerdict.FREE)
    reset_proposals(facts(), [wedged(0, "0000:18:00"), free], GOT, report)
    (action,) = report.actions
    assert (action.kind, action.params) == ("gpu.reset", {
        "gpu": "0", "release": "container:dcgm-exporter|unit:nvidia-persistenced.service"})
    assert action.reason.startswith("Reset GPU 0 (18:00.0): stops dcgm-exporter (container), "
                                    "nvidia-persistenced.service around the reset")


def test_every_gpu_on_an_a100_baseboard_and_nothing_while_a_job_runs() -> None:
    report = Report("gpu-08")
    got = {**GOT, "devs": [415, 1822, 950], "fabric": "active"}
    views = [wedged(0, "0000:18:00"), GpuView(1, "0000:2a:00", "GPU-1")]
    reset_proposals(facts("NVIDIA A100-SXM4-80GB"), views, got, report)
    (action,) = report.actions
    assert action.params["gpu"] == "all" and "unit:nvidia-fabricmanager.service" in \
        action.params["release"]
    assert "NVSwitch before Hopper: one GPU cannot be reset alone" in action.reason
    busy = Report("gpu-08")
    reset_proposals(facts("NVIDIA A100-SXM4-80GB", {"GPU-1": [2211]}), views, got, busy)
    assert busy.actions == []


def test_a_bare_process_on_the_device_files_blocks_the_proposal() -> None:
    report = Report("gpu-08")
    reset_proposals(facts(), [wedged(0, "0000:18:00")], {**GOT, "devs": [77, 415]}, report)
    assert report.actions == []
    assert [f.code for f in report.findings] == ["gpu.reset_blocked"]
    assert "pid 77 (watch) holds it outside any unit or container" in report.findings[0].title
