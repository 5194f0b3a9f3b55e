"""Pure parts of issue 17: the ladder's next step, systemd time spans, the drop-in text,
the cleanup planner (hostile ``find`` output, checkpoint retention, ranking)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.action_result import ActionResult, Outcome, Seen, Verification
from bot.domain.host_state import CapturedState, ProcState
from bot.remediation import cleanup as cl
from bot.remediation.catalog import dropin_diff
from bot.remediation.ladder import next_step
from bot.sim.tools.dropins import parse_dropin
from bot.sim.tools.systemd_fmt import _usec
from playbooks.parsers.disk import FileSeen, avail_by_mount, parse_df, parse_find
from playbooks.parsers.systemd import parse_timespan

G = 1024 ** 3


def result(kind: str, outcome: Outcome, params: dict[str, str], ok: bool = False,
           evidence: dict[str, Any] | None = None, unit: str | None = None) -> ActionResult:
    captured = CapturedState(kind, params, "gpu-03", 0.0,
                             processes=(ProcState(777, True, unit),) if "pid" in params else ())
    return ActionResult(kind=kind, params=params, host="gpu-03", outcome=outcome, summary="",
                        approver="U1", evidence_hash=None, captured=captured,
                        verification=Verification(Seen.of(ok), "", evidence=evidence or {}))


ALIVE = {"process": {"pid": 777, "alive": True}, "held": [0, 1], "holders": []}
WEDGED = {"process": {"pid": 777, "alive": False}, "held": [0, 1], "holders": [],
          "gpus": [{"index": 0, "used_mib": 40000.0}, {"index": 1, "used_mib": 40000.0}]}


def test_sigterm_ignored_proposes_sigkill() -> None:
    step = next_step(result("process.sigterm", Outcome.FAILED, {"pid": "777", "override": "no"},
                            evidence=ALIVE))
    assert step is not None and step["kind"] == "process.sigkill"
    assert step["params"] == {"pid": "777", "override": "no"}


def test_killed_but_memory_held_with_no_process_proposes_a_reset_of_that_gpu() -> None:
    step = next_step(result("process.sigkill", Outcome.FAILED, {"pid": "777"},
                            evidence=WEDGED))
    assert step is not None and step["kind"] == "gpu.reset"
    assert step["params"] == {"gpu": "0", "release": ""}  # release: the daemons' units
    assert "40000 MiB with no process" in step["reason"]


def test_memory_held_by_another_process_is_not_a_reset() -> None:
    busy = {**WEDGED, "holders": [{"pid": 900, "unit": None, "gpus": [0, 1]}]}
    assert next_step(result("process.sigkill", Outcome.STILL_HELD, {"pid": "777"},
                            evidence=busy)) is None


def test_a_failed_reset_proposes_a_reboot_and_a_good_one_nothing() -> None:
    failed = next_step(result("gpu.reset", Outcome.FAILED, {"gpu": "2"}))
    assert failed is not None and failed["kind"] == "host.reboot"
    assert next_step(result("gpu.reset", Outcome.SUCCEEDED, {"gpu": "2"}, ok=True)) is None


@pytest.mark.parametrize("outcome", [Outcome.REFUSED, Outcome.DRY_RUN, Outcome.UNREACHABLE,
                                     Outcome.NOOP, Outcome.SUCCEEDED])
def test_nothing_is_proposed_unless_the_step_ran_and_was_verified_failed(
    outcome: Outcome
) -> None:
    assert next_step(result("process.sigterm", outcome, {"pid": "777"}, evidence=ALIVE)) is None


def test_a_respawn_proposes_stopping_the_unit_but_never_a_hostile_name() -> None:
    good = next_step(result("process.terminate", Outcome.RESPAWNED, {"pid": "777"},
                            unit="vllm.service"))
    assert good is not None and good["params"] == {"unit": "vllm.service"}
    assert next_step(result("process.terminate", Outcome.RESPAWNED, {"pid": "777"},
                            unit="x$(id).service")) is None


@pytest.mark.parametrize(("text", "seconds"), [
    ("100ms", 0.1), ("10s", 10.0), ("1min 30s", 90.0), ("2h 3min", 7380.0), ("0", 0.0),
    ("infinity", float("inf")), ("1.500s", 1.5),
])
def test_systemd_time_spans(text: str, seconds: float) -> None:
    assert parse_timespan(text, -1) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10 parsecs", "1min; rm -rf /"])
def test_unparsable_spans_give_the_default(text: str) -> None:
    assert parse_timespan(text, -1.0) == -1.0


@pytest.mark.parametrize("seconds", [0.1, 10.0, 30.0, 90.0, 600.0])
def test_the_sims_spans_read_back(seconds: float) -> None:
    assert parse_timespan(_usec(seconds)) == seconds


def test_dropin_diff_is_the_whole_file_and_the_sim_reads_it_back() -> None:
    diff = dropin_diff({"unit": "vllm.service", "timeout_stop_s": "20"})
    assert diff.startswith("--- /dev/null\n+++ /etc/systemd/system/vllm.service.d/"
                           "50-incident-bot.conf\n")
    body = "\n".join(line[1:] for line in diff.splitlines()[3:])
    assert parse_dropin(body) == {"restart": "on-failure", "timeout_stop_sec": 20.0,
                                  "exec_start_pre": "/usr/bin/test ! -e "
                                                    "/run/incident-bot/gpu-reservation"}


def test_find_output_with_hostile_names_keeps_only_safe_paths() -> None:
    text = ("1024\t1700000000.5\troot\t/data/cache/pip/a\0"
            "2048\t1700000000.0\troot\t/data/cache/pip/x\ny; rm -rf /\0"
            "10\t1700000000.0\troot\t/data/cache/pip/$(touch /tmp/c)\0"
            "5\t1700000000.0\troot\t/data/cache/pip/tab\there\0"
            "garbage\0")
    files, unsafe = parse_find(text)
    assert [f.path for f in files] == ["/data/cache/pip/a"]
    assert unsafe == 3


def _f(path: str, size: int, age: float) -> FileSeen:
    return FileSeen(path, size, 1_700_000_000 - age * 86400, "root")


def test_planner_keeps_newest_checkpoints_and_skips_protected_open_and_outside() -> None:
    files = [
        _f("/data/ck/checkpoints/r/step-1.pt", 3 * G, 9), _f("/data/ck/checkpoints/r/step-2.pt",
                                                           3 * G, 5),
        _f("/data/ck/checkpoints/r/step-3.pt", 3 * G, 1),
        _f("/data/hf/huggingface/hub/m/blobs/a", 5 * G, 30),
        _f("/data/hf/huggingface/hub/m/blobs/open", 9 * G, 1),
        _f("/data/jobs/p/checkpoints/r/old.pt", 8 * G, 50),
        _f("/opt/huggingface/hub/m/blobs/b", 7 * G, 50),
        _f("/data/notes/readme.txt", 1 * G, 50),
    ]
    cands = cl.plan_candidates(files, allowed=["/data"], protected=["/data/jobs/p"],
                               open_paths={"/data/hf/huggingface/hub/m/blobs/open"},
                               keep_checkpoints=2)
    assert [(c.category, c.label) for c in cands] == [
        ("hf_cache", "/data/hf/huggingface/hub/m/blobs/a"),
        ("checkpoint", "/data/ck/checkpoints/r/step-1.pt")]
    assert [c.label for c in cl.choose(cands, 4 * G)] == ["/data/hf/huggingface/hub/m/blobs/a"]
    assert len(cl.choose(cands, 100 * G)) == 2
    assert cl.paths_param(cands) == ("/data/hf/huggingface/hub/m/blobs/a|"
                                     "/data/ck/checkpoints/r/step-1.pt")


def test_df_avail_parser() -> None:
    text = ("Filesystem 1-blocks Used Available Capacity Mounted on\n"
            "/dev/sda1 ext4 21474836480 10737418240 10737418240 50% /\n"
            "/dev/sdb1 xfs 1000 1000 0 100% /data\n")
    assert avail_by_mount(parse_df(text)) == {"/": 10737418240, "/data": 0}


REAL = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "real"


def test_real_systemctl_show_gives_the_restart_window_and_stop_timeout() -> None:
    from playbooks.parsers.systemd import parse_show, unit_state

    props = parse_show((REAL / "systemctl_show_ssh_restart.txt").read_text())
    unit = unit_state("ssh.service", props)
    assert unit.restarts and unit.restart == "on-failure"
    assert (unit.restart_s, unit.timeout_stop_s, unit.n_restarts) == (0.1, 90.0, 5)


def test_the_sims_reset_messages_are_the_drivers() -> None:
    from bot.sim.tools.gpu_reset import IN_USE

    real = (REAL / "nvidia_smi_gpu_reset_in_use.txt").read_text()
    assert IN_USE.strip() in real
    assert "  GPU 00000000:1A:00.0: In use by another client" in real
    assert "was successfully reset." in (REAL / "nvidia_smi_gpu_reset_ok.txt").read_text()
