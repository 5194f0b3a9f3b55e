"""Pure playbook rules over hand-built facts: what is proposed, and what never is."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bot.domain.findings import Severity
from playbooks import disk_full, vm_restart
from playbooks.base import PlaybookOptions, Report, action_id
from playbooks.gpu import GpuStat
from playbooks.holders import Holder, Restarter, cron_match, restarter_for
from playbooks.parsers.disk import DuEntry, Filesystem, OpenFile
from playbooks.parsers.host import CronLine
from playbooks.parsers.systemd import UnitFileRow, UnitRow
from playbooks.registry import choose
from playbooks.trace import GpuPicture
from playbooks.vram_idle import assess

OPTS = PlaybookOptions()
UNIT = "vllm-kimi-k25-int4.service"


def stats(n: int = 8, mib: int = 77600, util: int = 0) -> list[GpuStat]:
    return [GpuStat(i, f"GPU-{i}", "H100", mib, 97887, util, 3) for i in range(n)]


def holder(restarter: Restarter, pid: int = 440, **kw: Any) -> Holder:
    args = "python3 -m vllm.entrypoints.openai.api_server --gpu-memory-utilization 0.95"
    base = Holder(
        pid,
        args,
        "root",
        "nvidia-smi",
        tuple(f"GPU-{i}" for i in range(8)),
        8 * 77600,
        1371,
        UNIT,
        restarter,
    )
    return replace(base, **kw)


def picture(holders: list[Holder], gpus: list[GpuStat] | None = None, **kw: Any) -> GpuPicture:
    base = GpuPicture(
        gpus if gpus is not None else stats(),
        holders,
        {},
        [],
        [],
        [],
        [],
        [],
        (10_000.0, 10_000.0 - 1380),
        [],
        {},
    )
    return replace(base, **kw)


def run(p: GpuPicture) -> Report:
    report = Report("gpu-01")
    assess(p, OPTS, report)
    return report


ENABLED = Restarter("systemd", UNIT, "enabled", "active", "always",
                    detail=f"/lib/systemd/system/{UNIT}")


def test_unit_file_in_etc_gets_no_mask_offer() -> None:
    """`systemctl mask` fails for a unit file in /etc/systemd/system: never offer it."""
    in_etc = replace(ENABLED, detail=f"/etc/systemd/system/{UNIT}")
    report = run(picture([holder(in_etc)]))
    assert [(a.kind, a.params) for a in report.actions] == [
        ("systemd.stop_disable", {"unit": UNIT})]


def test_enabled_unit_gets_stop_disable_then_mask() -> None:
    report = run(picture([holder(ENABLED)]))
    assert [(a.kind, a.params) for a in report.actions] == [
        ("systemd.stop_disable", {"unit": UNIT}),
        ("systemd.mask", {"unit": UNIT}),
    ]
    title = report.findings[0].title
    assert title.startswith("8 GPUs hold 75.8 GiB each at 0%")
    assert "PID 440 (vLLM, --gpu-memory-utilization 0.95, user root) started at boot (+9 s)" \
        in title
    assert f"by {UNIT} (enabled, Restart=always)" in title
    assert report.findings[0].severity is Severity.CRITICAL


def test_working_holder_gets_nothing() -> None:
    report = run(picture([holder(ENABLED)], gpus=stats(util=97)))
    assert report.actions == []
    assert [f.code for f in report.findings] == ["gpu.busy_holder"]


def test_one_busy_gpu_is_enough_to_leave_a_holder_alone() -> None:
    gpus = stats()
    gpus[3] = replace(gpus[3], max_util_pct=60)
    assert run(picture([holder(ENABLED)], gpus=gpus)).actions == []


def test_holder_nothing_restarts_gets_terminate() -> None:
    report = run(picture([holder(Restarter("none"), cgroup_unit="session-3.scope")]))
    assert [(a.kind, a.params) for a in report.actions] == [("process.terminate", {"pid": "440"})]


def test_cron_reboot_holder_terminate_plus_warning() -> None:
    r = Restarter("cron", "root", detail="@reboot /opt/start-vllm.sh")
    report = run(picture([holder(r)]))
    assert [a.kind for a in report.actions] == ["process.terminate"]
    assert "cron.reboot" in [f.code for f in report.findings]


def test_docker_restart_policy_gets_no_action() -> None:
    r = Restarter("docker", "vllm", restart="unless-stopped")
    report = run(picture([holder(r)]))
    assert report.actions == []
    assert "docker.restart_policy" in [f.code for f in report.findings]


def test_hostile_unit_is_refused_and_nothing_proposed() -> None:
    bad = "gpu-hog-$(touch /tmp/CANARY).service"
    report = run(
        picture([holder(Restarter("systemd", bad, "enabled", "active", "always"), cgroup_unit=bad)])
    )
    assert report.actions == []  # not even terminate: systemd would restart it
    refused = [f for f in report.findings if f.code == "validate.refused"]
    assert len(refused) == 1 and "refused as a parameter" in refused[0].title


def test_disabled_inactive_gpu_units_named_never_proposed() -> None:
    shown = {
        "sglang-kimi.service": {"UnitFileState": "disabled", "ActiveState": "inactive"},
        UNIT: {"UnitFileState": "enabled", "ActiveState": "active"},
    }
    files = [UnitFileRow("vllm-glm5.service", "disabled")]
    rows = [UnitRow("vllm-glm5.service", "loaded", "inactive", "dead", "")]
    p = picture(
        [holder(ENABLED)],
        shown=shown,
        unit_files=files,
        units=rows,
        gpu_units=["sglang-kimi.service", UNIT, "vllm-glm5.service"],
    )
    report = run(p)
    assert {a.params["unit"] for a in report.actions} == {UNIT}
    quiet = next(f for f in report.findings if f.code == "gpu.units_disabled")
    assert quiet.evidence["units"] == ["sglang-kimi.service", "vllm-glm5.service"]


def test_watchdog_is_stopped_first() -> None:
    p = picture(
        [holder(ENABLED)],
        watchdogs={UNIT: [(433, "gpu-watchdog.service")]},
        shown={"gpu-watchdog.service": {"ActiveState": "active"}},
    )
    report = run(p)
    assert [a.params["unit"] for a in report.actions] == ["gpu-watchdog.service", UNIT, UNIT]


def test_memory_held_but_no_holder_named() -> None:
    report = run(picture([]))
    assert report.actions == [] and report.findings[0].code == "gpu.idle_vram_held"
    assert "no process could be named" in report.findings[0].title


def test_no_memory_held_and_no_gpus() -> None:
    assert [f.code for f in run(picture([], gpus=stats(mib=3))).findings] == ["gpu.free"]
    assert [f.code for f in run(picture([], gpus=[])).findings] == ["gpu.no_data"]


def test_restarter_decisions() -> None:
    h = holder(Restarter("none"))
    shown = {UNIT: {"UnitFileState": "enabled", "ActiveState": "active", "Restart": "always",
                    "FragmentPath": f"/lib/systemd/system/{UNIT}"}}
    assert restarter_for(h, shown, [], []) == ENABLED
    box = "ab" * 32
    dock = replace(h, cgroup_unit=f"docker-{box}.scope")
    boxes = [{"id": box, "name": "vllm", "restart_policy": "always", "image": "vllm/vllm"}]
    assert (
        restarter_for(dock, {}, boxes, []).describe()
        == "docker container vllm (restart policy always)"
    )
    cron = replace(h, cgroup_unit="cron.service", args="/opt/start-vllm.sh --tp 8")
    line = CronLine("root", "@reboot", "/opt/start-vllm.sh --tp 8")
    assert cron_match(cron, [line]) == line
    assert restarter_for(cron, {}, [], [line]).kind == "cron"
    assert restarter_for(replace(h, cgroup_unit="init.scope"), {}, [], []).kind == "none"


def test_action_ids_stable_and_distinct() -> None:
    a = action_id("gpu-01", "systemd.stop_disable", {"unit": UNIT})
    assert a == action_id("gpu-01", "systemd.stop_disable", {"unit": UNIT})
    assert a != action_id("gpu-02", "systemd.stop_disable", {"unit": UNIT})
    assert a != action_id("gpu-01", "systemd.mask", {"unit": UNIT})
    assert len(a) == 12


def fs(mount: str, used: int, avail: int, fstype: str = "ext4") -> Filesystem:
    return Filesystem("/dev/x", fstype, used + avail, used, avail, mount)


def test_disk_rules_and_journal_vacuum() -> None:
    p = disk_full.DiskPicture(
        space=[fs("/", 95, 5), fs("/data", 10, 90), fs("/dev/shm", 50, 50, "tmpfs")],
        inodes=[fs("/", 99, 1)],
        journal_bytes=31 << 30,
        deleted=[OpenFile("python3", 1312, "root", "17w", 400 << 30, "/data/t (deleted)")],
        shm=[DuEntry(181 << 30, "/dev/shm"), DuEntry(180 << 30, "/dev/shm/torch_dumps")],
        largest={"/": [DuEntry(100, "/"), DuEntry(90, "/var")]},
        du_timed_out={"/": True},
    )
    report = Report("gpu-02")
    disk_full.assess(p, OPTS, report)
    codes = [f.code for f in report.findings]
    assert codes == [
        "disk.full",
        "disk.inodes_full",
        "disk.largest_dirs",
        "disk.du_timed_out",
        "disk.deleted_open",
        "disk.shm",
        "disk.journal",
    ]
    assert [(a.kind, a.params) for a in report.actions] == [
        ("disk.journal_vacuum", {"size": "500M"})
    ]


def test_small_journal_not_vacuumed_and_bad_size_never_proposed() -> None:
    p = disk_full.DiskPicture([fs("/", 10, 90)], [], 100 << 20, [], [], {}, {})
    report = Report("h")
    disk_full.assess(p, OPTS, report)
    assert report.actions == [] and [f.code for f in report.findings] == ["disk.ok"]
    big = replace(p, journal_bytes=31 << 30)
    report = Report("h")
    disk_full.assess(big, replace(OPTS, journal_vacuum_size="500M; rm -rf /"), report)
    assert report.actions == []


@pytest.mark.parametrize(
    ("space", "gpus", "uptime", "expected"),
    [
        ([fs("/", 95, 5)], [], 10.0, "disk_full"),
        ([fs("/", 5, 95)], [], 100.0, "vm_restart"),
        ([fs("/", 5, 95)], [(77600, 0)], 86400.0, "vram_idle"),
        ([fs("/", 5, 95)], [(77600, 90)], 86400.0, "triage"),
        ([fs("/dev/shm", 99, 1, "tmpfs")], [], 86400.0, "triage"),
    ],
)
def test_auto_choice(
    space: list[Filesystem], gpus: list[tuple[int, int]], uptime: float, expected: str
) -> None:
    from playbooks.parsers.nvidia import GpuSample

    class _S:
        options = OPTS

    samples = [GpuSample(i, "u", "n", m, 97887, u) for i, (m, u) in enumerate(gpus)]
    name, why = choose(space, samples, (1000.0 + uptime, 1000.0), _S())  # type: ignore[arg-type]
    assert name == expected and why


def test_vm_restart_mounts_and_jobs() -> None:
    report = Report("h")
    options = {"/": {"rw"}, "/scratch": {"ro", "relatime"}}
    vm_restart._mounts([fs("/", 1, 1), fs("/scratch", 1, 1)], options,
                       replace(OPTS, expected_mounts=("/data", "/", "/scratch/")), report)
    vm_restart._jobs([{"job_id": "kimi-k25"}], report)
    assert [(f.code, f.title) for f in report.findings] == [
        ("mount.missing", "expected mount /data is missing"),
        ("mount.read_only", "expected mount /scratch/ is mounted read-only"),
        ("extract.interrupted", "interrupted extraction job on this host (1): kimi-k25"),
    ]


def test_the_first_kill_is_the_biggest_holder_and_each_gain_is_its_own() -> None:
    """Issue 29: never "End PID 3391 (frees 608.3 GiB)" for a process holding 2 GiB."""
    from bot.chat.summary import action_sentence
    from bot.domain.findings import Diagnosis, DiagnosisStatus
    from bot.domain.headline import choose
    from bot.remediation.actions import fixes_of

    none = Restarter("none")
    small = holder(none, pid=3391, gpu_uuids=("GPU-0",), used_mib=2048, cgroup_unit=None)
    big = holder(none, pid=440, used_mib=8 * 77600, cgroup_unit=None)
    report = run(picture([small, big]))
    kills = [a for a in report.actions if a.kind == "process.terminate"]
    assert [a.params["pid"] for a in kills] == ["440", "3391"]
    d = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 1.0, tuple(report.findings),
                  tuple(report.actions))
    assert "(frees 606.2 GiB)" in action_sentence(kills[0], d)
    assert "(frees 2.0 GiB)" in action_sentence(kills[1], d)
    assert choose(d, fixes_of).text == (
        "PID 440 (vLLM, user root), started at boot, holds 8 GPUs × 75.8 GiB at 0% since boot "
        "(22 min)")
