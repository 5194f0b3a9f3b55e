"""The probes remediation reads a host with (``playbooks/probes.py``), each a command and
its parser: the parsers on captured real output (``tests/fixtures/real``), and the
commands run through bash against this machine's own tools (find, ps, df), so that the
text a probe sends and what its parser reads are checked together."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TypeVar

from bot.domain.host_state import ProcState, UnitState
from playbooks import probes
from playbooks.base import Probe
from playbooks.parsers.disk import avail_by_mount, parse_df, usage_by_mount
from playbooks.parsers.host import container_owner
from playbooks.parsers.ps import parse_process

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
T = TypeVar("T")


def run(probe: Probe[T]) -> tuple[int, T]:
    """The probe's command through a local shell (as sshd would run it), parsed."""
    done = subprocess.run(["bash", "-c", probe.command], capture_output=True, text=True,
                          timeout=30, check=False)
    return done.returncode, probe.parse(done.stdout)


def test_df_real_output_gives_each_mounts_free_and_used_bytes() -> None:
    filesystems = parse_df((REAL / "df_PT_B1_coreutils_9_1.txt").read_text())
    assert avail_by_mount(filesystems) == {"/dev": 12630212608, "/dev/shm": 25275990016,
                                           "/": 83045294080}
    assert usage_by_mount(filesystems)["/"] == (25898999808, 83045294080)


def test_a_cgroup_that_names_no_unit_is_alive_without_one() -> None:
    text = (REAL / "ps_pid_cgroup_v1_no_unit.txt").read_text()
    assert parse_process(27188, text) == ProcState(27188, alive=True, unit=None)
    assert parse_process(27189, text) == ProcState(27189, alive=False)  # another PID's row


def test_a_process_row_names_its_unit_and_an_empty_answer_is_gone() -> None:
    row = "  440 0::/system.slice/vllm-kimi-k25-int4.service\n"
    assert parse_process(440, row).unit == "vllm-kimi-k25-int4.service"
    assert parse_process(440, "") == ProcState(440, alive=False)


def test_this_process_is_alive_and_a_free_pid_is_gone() -> None:
    code, me = run(probes.process(os.getpid()))
    assert code == 0 and me.alive and me.pid == os.getpid()
    code, args = run(probes.process_args(os.getpid()))
    assert code == 0 and "python" in args
    top = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    # a PID no process has now (pid_max - 1 itself is taken once PIDs wrap on a busy machine)
    free = next(p for p in range(top, 2, -1) if not Path(f"/proc/{p}").exists())
    code, gone = run(probes.process(free))
    assert gone == ProcState(free, alive=False)
    assert os.getpid() in run(probes.pid_units())[1]


def test_regular_files_leaves_out_links_directories_and_missing_paths(tmp_path: Path) -> None:
    real = tmp_path / "a file with spaces.bin"
    real.write_bytes(b"x")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "dir").mkdir()
    paths = [str(real), str(tmp_path / "link"), str(tmp_path / "dir"), str(tmp_path / "gone")]
    code, files = run(probes.regular_files(paths))
    assert code == 1  # find says the missing one is missing
    assert files == {str(real)}


def test_cleanup_find_sees_caches_and_counts_a_hostile_name(tmp_path: Path) -> None:
    blob = tmp_path / "hf/huggingface/hub/m/blobs/a"
    step = tmp_path / "ck/checkpoints/run/step-1.pt"
    hostile = tmp_path / "hf/huggingface/hub/m/blobs/x\n$(reboot)"
    for f, size in ((blob, 3), (step, 5), (hostile, 1), (tmp_path / "keep.txt", 7)):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x" * size)
    code, (seen, unsafe) = run(probes.cleanup_files(str(tmp_path)))
    assert code == 0
    assert sorted((f.path, f.size) for f in seen) == sorted([(str(step), 5), (str(blob), 3)])
    assert unsafe == 1


def test_df_probe_reads_this_hosts_root() -> None:
    code, filesystems = run(probes.df())
    assert code == 0
    assert "/" in avail_by_mount(filesystems)


def test_a_containers_policy_owns_its_scope_and_no_answer_is_none() -> None:
    scope = "docker-" + "ab" * 32 + ".scope"
    owner = container_owner(scope, "ab" * 32, "unless-stopped\n")
    assert owner == UnitState(scope, "loaded", "active", restart="unless-stopped",
                              restart_s=0.1, fragment_path="docker:" + "ab" * 32)
    odd = container_owner(scope, "ab" * 32, "weird\n")
    assert odd is not None and odd.restart == "no"
    assert container_owner(scope, "ab" * 32, "") is None


def test_remote_arguments_are_quoted() -> None:
    assert probes.regular_files(["/a b"]).command.startswith("find '/a b' ")
    assert probes.open_by("/x;reboot").command == "lsof -t -- '/x;reboot'"
    assert probes.show_unit("a b.service", "Restart").command.endswith(" 'a b.service'")
    assert probes.journal_usage(sudo=True).command == f"sudo -n {probes.JOURNAL_USAGE}"
