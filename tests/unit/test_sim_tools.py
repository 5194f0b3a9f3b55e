"""The sim tools' formatters and state changes, without sshd: a state file in tmp_path,
a fake clock, captured streams."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from bot.sim.build import build_state
from bot.sim.scenario import load_scenario
from bot.sim.state import SimCall, write_state
from bot.sim.tools import disk, journal, kill, misc, nvidia_smi, ps, systemctl

T0 = 1_790_000_000.0
VLLM = "vllm-kimi-k25-int4.service"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


class Host:
    """A state file plus a runner that returns (exit, stdout, stderr) per tool call."""

    def __init__(self, tmp: Path, scenario: str, overrides: dict[str, Any] | None = None):
        self.dir = tmp
        self.clock = Clock()
        write_state(tmp, build_state(load_scenario(scenario, overrides), now=T0))

    def run(self, main: Any, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        ctx = SimCall(self.dir, out=out, err=err, clock=self.clock, sleep=self.clock.sleep)
        code = main(list(argv), ctx)
        return code, out.getvalue(), err.getvalue()

    def state(self) -> dict[str, Any]:
        return SimCall(self.dir, clock=self.clock).read()


@pytest.fixture
def seed(tmp_path: Path) -> Host:
    return Host(tmp_path, "seed")


def smi(host: Host, *argv: str) -> tuple[int, str, str]:
    return host.run(nvidia_smi.main, *argv)


# --- nvidia-smi -------------------------------------------------------------------------


def test_query_gpu_noheader_nounits_rows(seed: Host) -> None:
    code, out, _ = smi(
        seed,
        "--query-gpu=index,memory.used,memory.total,utilization.gpu",
        "--format=csv,noheader,nounits",
    )
    assert code == 0
    assert out.splitlines() == [f"{i}, 77600, 97887, 0" for i in range(8)]


def test_query_gpu_header_keeps_units_even_with_nounits(seed: Host) -> None:
    _, out, _ = smi(
        seed,
        "--query-gpu=index,memory.used,utilization.gpu,power.draw,name",
        "--format=csv,nounits",
    )
    assert out.splitlines()[0] == (
        "index, memory.used [MiB], utilization.gpu [%], power.draw [W], name"
    )
    _, out, _ = smi(seed, "--query-gpu=memory.used,power.draw", "--format=csv", "-i", "3")
    assert out.splitlines() == ["memory.used [MiB], power.draw [W]", "77600 MiB, 83.40 W"]


def test_unknown_field_rejected_like_the_real_tool(seed: Host) -> None:
    code, out, _ = smi(seed, "--query-gpu=index,bogus.field", "--format=csv")
    assert code == 2
    assert out == 'Field "bogus.field" is not a valid field to query.\n\n'


def test_missing_gpu_index_is_no_devices(seed: Host) -> None:
    code, out, _ = smi(seed, "-i", "9", "--query-gpu=index", "--format=csv")
    assert (code, out) == (6, "No devices were found\n")


def test_compute_apps_one_row_per_gpu_and_hidden_in_container(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    seed = Host(tmp_path / "a", "seed")
    _, out, _ = smi(
        seed,
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id",
        "--format=csv",
    )
    lines = out.splitlines()
    assert lines[0] == "pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id"
    assert len(lines) == 9 and lines[1].startswith("440, python3, 77600 MiB, GPU-")
    (tmp_path / "b").mkdir()
    box = Host(tmp_path / "b", "seed_container")
    _, out, _ = smi(box, "--query-compute-apps=pid,used_memory", "--format=csv,noheader")
    assert out == ""
    _, out, _ = smi(box, "--query-gpu=memory.used", "--format=csv,noheader,nounits")
    assert set(out.split()) == {"77600"}
    _, table, _ = smi(box)
    assert "No running processes found" in table and "77600MiB /  97887MiB" in table


def test_table_layout_is_91_columns_with_process_rows(seed: Host) -> None:
    _, out, _ = smi(seed)
    lines = out.splitlines()
    assert all(len(line) == 91 for line in lines[1:]), {len(line) for line in lines[1:]}
    assert "| NVIDIA-SMI 580.95.05" in out and "CUDA Version: 13.0" in out
    assert sum(" 440 " in line and "python3" in line for line in lines) == 8


def test_loop_prints_until_stopped_with_header_once(seed: Host) -> None:
    sleeps: list[float] = []

    def stop_after_two(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    out = io.StringIO()
    ctx = SimCall(seed.dir, out=out, err=io.StringIO(), clock=seed.clock, sleep=stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        nvidia_smi.main(["--query-gpu=index", "--format=csv", "-lms", "250"], ctx)
    assert sleeps == [0.25, 0.25]
    assert out.getvalue().count("index") == 1 and out.getvalue().count("\n") == 17


# --- systemctl --------------------------------------------------------------------------


def sc(host: Host, *argv: str) -> tuple[int, str, str]:
    return host.run(systemctl.main, *argv)


def test_list_units_hides_inactive_unless_all(seed: Host) -> None:
    _, out, _ = sc(seed, "list-units", "--type=service", "--no-legend", "--no-pager")
    names = [line.split()[0] for line in out.splitlines()]
    assert VLLM in names and "vllm-glm5.service" not in names
    _, out, _ = sc(seed, "list-units", "--type=service", "--all", "--no-legend", "--plain")
    assert "vllm-glm5.service" in out and "inactive dead" in " ".join(out.split())
    _, out, _ = sc(seed, "list-units")
    assert out.startswith("  UNIT ") and "loaded units listed. Pass --all" in out


def test_list_unit_files_states(seed: Host) -> None:
    _, out, _ = sc(seed, "list-unit-files", "--type=service", "--state=enabled")
    assert out.splitlines()[0].split() == ["UNIT", "FILE", "STATE", "PRESET"]
    rows = {
        line.split()[0]: line.split()[1]
        for line in out.splitlines()[1:]
        if line.strip() and not line.endswith("listed.")
    }
    assert rows[VLLM] == "enabled" and "vllm-glm5.service" not in rows
    _, out, _ = sc(seed, "list-unit-files", "vllm-*", "--no-legend")
    assert [line.split()[1] for line in out.splitlines()] == [
        "disabled",
        "disabled",
        "enabled",
        "disabled",
    ]


def test_show_properties_and_value(seed: Host) -> None:
    _, out, _ = sc(seed, "show", VLLM, "-p", "MainPID,UnitFileState,Restart,ControlGroup")
    assert out.splitlines() == [
        "MainPID=440",
        "UnitFileState=enabled",
        "Restart=always",
        f"ControlGroup=/system.slice/{VLLM}",
    ]
    assert sc(seed, "show", "vllm-kimi-k25-int4", "-p", "ActiveState", "--value")[1] == "active\n"
    assert sc(seed, "show", "nope", "-p", "LoadState", "--value") == (0, "not-found\n", "")


def test_is_enabled_is_active_exit_codes(seed: Host) -> None:
    assert sc(seed, "is-enabled", VLLM) == (0, "enabled\n", "")
    assert sc(seed, "is-enabled", "vllm-glm5.service")[:2] == (1, "disabled\n")
    assert sc(seed, "is-active", "vllm-glm5")[:2] == (3, "inactive\n")
    code, _, err = sc(seed, "is-enabled", "nope.service")
    assert code == 1 and "No such file or directory" in err


def test_status_unit_pid_and_unknown(seed: Host) -> None:
    code, out, _ = sc(seed, "status", "440")
    assert code == 0 and out.startswith(f"● {VLLM} - ")
    assert "Main PID: 440 (python3)" in out and "└─440 python3 -m vllm" in out
    assert sc(seed, "status", "nope") == (4, "", "Unit nope.service could not be found.\n")


def test_stop_frees_gpu_memory_and_disable_prints_systemd_message(seed: Host) -> None:
    assert sc(seed, "stop", VLLM) == (0, "", "")
    _, out, _ = smi(seed, "--query-gpu=memory.used", "--format=csv,noheader,nounits")
    assert set(out.split()) == {"0"}
    code, _, err = sc(seed, "disable", VLLM)
    assert code == 0
    assert err == f'Removed "/etc/systemd/system/multi-user.target.wants/{VLLM}".\n'
    assert sc(seed, "is-enabled", VLLM)[:2] == (1, "disabled\n")
    assert sc(seed, "disable", VLLM) == (0, "", "")  # already disabled: silent


def test_enable_now_starts_with_new_pid(seed: Host) -> None:
    code, _, err = sc(seed, "enable", "--now", "vllm-glm5.service")
    assert code == 0 and err.startswith("Created symlink /etc/systemd/system/multi-user.target")
    pid = int(sc(seed, "show", "vllm-glm5", "-p", "MainPID", "--value")[1])
    assert pid > 440 and any(p["pid"] == pid for p in seed.state()["processes"])


def test_mask_refuses_unit_file_in_etc_but_masks_lib_units(seed: Host) -> None:
    code, _, err = sc(seed, "mask", VLLM)
    assert code == 1 and "already exists" in err
    code, _, err = sc(seed, "mask", "cron.service")
    assert code == 0 and err == "Created symlink /etc/systemd/system/cron.service → /dev/null.\n"
    assert sc(seed, "is-enabled", "cron")[:2] == (1, "masked\n")
    assert sc(seed, "start", "cron")[:3] == (
        1,
        "",
        "Failed to start cron.service: Unit cron.service is masked.\n",
    )


def test_unknown_unit_stop_is_exit_5(seed: Host) -> None:
    assert sc(seed, "stop", "nope.service") == (
        5,
        "",
        "Failed to stop nope.service: Unit nope.service not loaded.\n",
    )


def test_stop_delay_blocks_then_takes_effect(tmp_path: Path) -> None:
    host = Host(tmp_path, "seed", {"units": {VLLM: {"stop_delay_s": 30}}})
    assert sc(host, "stop", VLLM)[0] == 0
    assert host.clock.now - T0 >= 30
    assert host.state()["units"][VLLM]["active_state"] == "inactive"


def test_queued_stop_lands_even_if_the_client_gave_up(tmp_path: Path) -> None:
    host = Host(tmp_path, "seed", {"units": {VLLM: {"stop_delay_s": 30}}})
    ctx = SimCall(host.dir, out=io.StringIO(), err=io.StringIO(), clock=host.clock)
    with ctx.mutate() as state:  # what `systemctl stop` does before it blocks
        from bot.sim.tools.systemctl_act import _begin_stop

        _begin_stop(state, state["units"][VLLM], host.clock.now)
    assert host.state()["units"][VLLM]["active_state"] == "deactivating"
    host.clock.now += 31
    assert host.state()["units"][VLLM]["active_state"] == "inactive"


# --- kill and respawn -------------------------------------------------------------------


def test_kill_respawns_restart_always_unit_under_new_pid(seed: Host) -> None:
    assert seed.run(kill.main, "-9", "440") == (0, "", "")
    state = seed.state()
    assert state["units"][VLLM]["active_state"] == "activating"
    seed.clock.now += 0.2
    state = seed.state()
    unit = state["units"][VLLM]
    assert unit["active_state"] == "active" and unit["main_pid"] not in (0, 440)
    assert unit["n_restarts"] == 1
    _, out, _ = smi(seed, "--query-gpu=memory.used", "--format=csv,noheader,nounits")
    assert set(out.split()) == {"77600"}


def test_kill_unknown_pid_and_bad_signal(seed: Host) -> None:
    assert seed.run(kill.main, "12345") == (1, "", "bash: kill: (12345) - No such process\n")
    assert seed.run(kill.main, "-FOO", "440")[0] == 1
    assert seed.run(kill.main, "-0", "440") == (0, "", "")
    assert any(p["pid"] == 440 for p in seed.state()["processes"])


def test_watchdog_restarts_unit_after_stop(tmp_path: Path) -> None:
    host = Host(tmp_path, "respawn")
    sc(host, "stop", VLLM)
    assert host.state()["units"][VLLM]["active_state"] == "inactive"
    host.clock.now += 1
    unit = host.state()["units"][VLLM]
    assert unit["active_state"] == "active" and unit["main_pid"] != 440
    sc(host, "stop", "gpu-watchdog.service")
    sc(host, "stop", VLLM)
    host.clock.now += 5
    assert host.state()["units"][VLLM]["active_state"] == "inactive"


# --- ps ---------------------------------------------------------------------------------


def test_ps_custom_fields_and_header_suppression(seed: Host) -> None:
    _, out, _ = seed.run(ps.main, "-eo", "pid,ppid,user,etimes,cgroup")
    head, *rows = out.splitlines()
    assert head.split() == ["PID", "PPID", "USER", "ELAPSED", "CGROUP"]
    row440 = next(r for r in rows if r.split()[0] == "440")
    assert row440.split()[3] == str(1380 - 9)
    assert row440.endswith(f"0::/system.slice/{VLLM}")
    assert seed.run(ps.main, "-o", "pid=,comm=", "-p", "440")[1] == "    440 python3\n"
    assert seed.run(ps.main, "-p", "999", "-o", "pid")[0] == 1


def test_ps_aux_and_unknown_field(seed: Host) -> None:
    _, out, _ = seed.run(ps.main, "aux")
    assert out.splitlines()[0].split() == [
        "USER",
        "PID",
        "%CPU",
        "%MEM",
        "VSZ",
        "RSS",
        "TTY",
        "STAT",
        "START",
        "TIME",
        "COMMAND",
    ]
    code, _, err = seed.run(ps.main, "-eo", "pid,nosuch")
    assert code == 1 and 'unknown user-defined format specifier "nosuch"' in err


def test_ps_shows_control_characters_as_question_marks() -> None:
    assert ps.printable("a\nb\tc") == "a?b?c"
    assert ps.etime(3 * 86400 + 3661) == "3-01:01:01" and ps.etime(59) == "00:59"


# --- disks, journal, misc ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (1023, "1023"),
        (1024, "1.0K"),
        (1536, "1.5K"),
        (15 * 1024**4, "15T"),
        (int(2.91 * 1024**4), "3.0T"),
        (10 * 1024**3 + 1, "11G"),
    ],
)
def test_df_human_rounds_up_like_coreutils(n: int, text: str) -> None:
    assert disk.human(n) == text


def test_df_headers_and_full_filesystem(tmp_path: Path) -> None:
    host = Host(tmp_path, "disk_full")
    _, out, _ = host.run(disk.main_df, "-h")
    assert out.splitlines()[0] == "Filesystem      Size  Used Avail Use% Mounted on"
    assert "100% /data" in out and "100% /\n" in out
    _, out, _ = host.run(disk.main_df, "-P", "-B1", "/data/tmp")
    assert out.splitlines()[0].split() == [
        "Filesystem",
        "1B-blocks",
        "Used",
        "Available",
        "Capacity",
        "Mounted",
        "on",
    ]
    _, out, _ = host.run(disk.main_df, "--output=target,pcent,itotal", "-x", "tmpfs")
    assert out.splitlines()[0].split() == ["Mounted", "on", "Use%", "Inodes"]
    assert "/dev/shm" not in out


def test_du_depth_order_and_missing_path(tmp_path: Path) -> None:
    host = Host(tmp_path, "disk_full")
    _, out, _ = host.run(disk.main_du, "-x", "-d", "1", "-B1", "/data")
    paths = [line.split("\t")[1] for line in out.splitlines()]
    assert paths == ["/data/checkpoints", "/data/hidden_states", "/data/logs", "/data/tmp", "/data"]
    assert host.run(disk.main_du, "-sh", "/data")[1] == "15T\t/data\n"
    assert host.run(disk.main_du, "-sh", "/nope") == (
        1,
        "",
        "du: cannot access '/nope': No such file or directory\n",
    )


def test_journal_vacuum_frees_root_filesystem(tmp_path: Path) -> None:
    host = Host(tmp_path, "disk_full")
    before = next(f for f in host.state()["filesystems"] if f["mount"] == "/")["used"]
    code, _, err = host.run(journal.main, "--vacuum-size=1G")
    assert code == 0 and err.startswith("Vacuuming done, freed 30G")
    after = next(f for f in host.state()["filesystems"] if f["mount"] == "/")["used"]
    assert before - after == 30 * 1024**3
    assert host.run(journal.main, "--disk-usage")[1] == (
        "Archived and active journals take up 1.0G in the file system.\n"
    )


def test_previous_boot_unclean_has_no_shutdown_lines(seed: Host) -> None:
    _, boots, _ = seed.run(journal.main, "--list-boots")
    assert [line.split()[0] for line in boots.splitlines()] == ["IDX", "-2", "-1", "0"]
    _, last, _ = seed.run(journal.main, "-b", "-1", "-n", "3")
    assert "No space left on device" in last and "Journal stopped" not in last
    _, older, _ = seed.run(journal.main, "-b", "-2", "-n", "2")
    assert "Journal stopped" in older
    assert seed.run(journal.main, "-b", "-5")[0] == 1


def test_crontab_uptime_who(seed: Host) -> None:
    assert seed.run(misc.main_crontab, "-l") == (1, "", "no crontab for root\n")
    seed.clock.now = T0
    assert seed.run(misc.main_uptime, "-s")[1].strip() == _utc(T0 - 1380)
    assert "up 23 min," in seed.run(misc.main_uptime)[1]
    assert seed.run(misc.main_who, "-b")[1].strip() == "system boot  " + _utc(T0 - 1380)[:16]


def _utc(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


# --- scenarios, shims, handles ----------------------------------------------------------


def test_every_shipped_scenario_builds(tmp_path: Path) -> None:
    from bot.sim.scenario import shipped_names

    names = shipped_names()
    assert {"seed", "seed_container", "disk_full", "healthy", "respawn", "hostile"} <= set(names)
    for name in names:
        state = build_state(load_scenario(name, canary=str(tmp_path / "CANARY")), now=T0)
        assert state["gpus"] and state["processes"][0]["pid"] == 1
        assert "{canary}" not in str(state)


def test_seed_story_facts() -> None:
    state = build_state(load_scenario("seed"), now=T0)
    gpus = state["gpus"]
    assert len(gpus) == 8 and {g["name"] for g in gpus} == {
        "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    }
    assert {g["memory_total_mib"] for g in gpus} == {97887}
    units = state["units"]
    assert units[VLLM]["unit_file_state"] == "enabled" and units[VLLM]["main_pid"] == 440
    for name in ("vllm-glm5.service", "vllm-kimi-k25-int4-ngram.service", "vllm-kimi-k25.service"):
        assert (units[name]["unit_file_state"], units[name]["active_state"]) == (
            "disabled",
            "inactive",
        )
    assert state["crontabs"]["root"] == []
    assert [b["clean"] for b in state["boot"]["previous"]] == [False, True]
    data = next(f for f in state["filesystems"] if f["mount"] == "/data")
    assert (data["type"], data["size"]) == ("ext4", 15 * 1024**4)


def test_extends_merges_processes_by_pid_and_errors_name_file_and_key(tmp_path: Path) -> None:
    from bot.core.errors import UserError

    state = build_state(load_scenario("respawn"), now=T0)
    assert {433, 440} <= {p["pid"] for p in state["processes"]}
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: seed\nunits:\n  x.service: {restart: sometimes}\n")
    with pytest.raises(UserError) as err:
        load_scenario(bad)
    assert err.value.exit_code == 2
    assert err.value.message.startswith(f"{bad}: key 'units.x.service.restart'")
    with pytest.raises(UserError, match="unknown scenario 'nope'"):
        load_scenario("nope")


def test_tool_entry_point_imports_no_heavy_modules() -> None:
    import subprocess
    import sys

    import bot

    code = (
        "import sys, bot.sim.run\n"
        "for m in ('nvidia_smi','systemctl','systemctl_act','ps','kill','disk','files',"
        "'journal','misc','docker','sudo'):\n"
        "    __import__('bot.sim.tools.' + m)\n"
        "heavy = {'pydantic', 'yaml', 'typer', 'bot.sim.scenario'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    root = str(Path(bot.__file__).resolve().parent.parent)
    r = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": root},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr


def test_sim_handle_target_and_idempotent_stop(tmp_path: Path) -> None:
    from bot.sim.sshd import SimHost

    host = SimHost(
        name="gpu-01",
        port=2222,
        workdir=tmp_path,
        key_path=tmp_path / "k",
        known_hosts_path=tmp_path / "kh",
        pid=0,
        user="root",
    )
    assert host.target == "root@127.0.0.1:2222"
    t = host.ssh_target()
    assert (t.name, t.host, t.port, t.key_path, t.known_hosts) == (
        "gpu-01",
        "127.0.0.1",
        2222,
        str(tmp_path / "k"),
        str(tmp_path / "kh"),
    )
    host.stop()
    host.stop()
    assert not host.alive()


def test_formats_the_playbooks_use(tmp_path: Path) -> None:
    seed = Host(tmp_path, "seed")
    _, out, _ = seed.run(ps.main, "-ww", "-eo", "pid=,ppid=,etimes=,user:32=,args=")
    row = next(r for r in out.splitlines() if "nvidia-persistenced --user" in r)
    assert row.split()[3] == "nvidia-persistenced"  # a width wide enough is not cut
    _, out, _ = seed.run(disk.main_df, "-PT", "-B1")
    assert out.splitlines()[0].split()[:3] == ["Filesystem", "Type", "1B-blocks"]
    assert seed.run(disk.main_df, "-PTi")[1].splitlines()[0].split()[2] == "Inodes"
