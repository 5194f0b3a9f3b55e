"""systemctl and ps parsers on real output shapes (systemd 247-255, procps-ng 3-4)."""

# ruff: noqa: E501 - samples are real tool output, kept on their real (long) lines

from __future__ import annotations

from playbooks.parsers.ps import notable_flags, parse_cgroups, parse_pids, parse_ps, server_kind
from playbooks.parsers.systemd import (
    docker_id_from_scope,
    parse_list_unit_files,
    parse_list_units,
    parse_show,
    parse_show_many,
    unit_from_cgroup,
    unit_from_status,
)

SHOW = """\
Id=vllm-kimi-k25-int4.service
Restart=always
ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m vllm --x=1 ; ignore_errors=no }
UnitFileState=enabled
ActiveState=active

Id=sglang-kimi.service
UnitFileState=disabled
ActiveState=inactive
"""


def test_show_blocks() -> None:
    first = parse_show(SHOW)
    assert first["Id"] == "vllm-kimi-k25-int4.service" and first["Restart"] == "always"
    assert first["ExecStart"].startswith("{ path=/usr/bin/python3")  # '=' inside values kept
    blocks = parse_show_many(SHOW)
    assert [b["UnitFileState"] for b in blocks] == ["enabled", "disabled"]
    assert parse_show("") == {} and parse_show("no equals here\n") == {}


def test_list_units_plain_with_failed_bullet() -> None:
    text = """\
  cron.service        loaded active   running Regular background program processing daemon
● nvidia-fabricmanager.service loaded failed failed NVIDIA fabric manager service
  vllm-glm5.service   loaded inactive dead    vLLM GLM-5
"""
    rows = parse_list_units(text)
    assert [(r.unit, r.active, r.sub) for r in rows] == [
        ("cron.service", "active", "running"),
        ("nvidia-fabricmanager.service", "failed", "failed"),
        ("vllm-glm5.service", "inactive", "dead"),
    ]
    assert rows[0].description == "Regular background program processing daemon"


def test_list_unit_files_with_and_without_preset() -> None:
    text = "UNIT FILE STATE PRESET\nvllm-kimi-k25-int4.service enabled enabled\nssh.service enabled\n\n2 unit files listed.\n"
    rows = parse_list_unit_files(text)
    assert [(r.unit, r.state, r.preset) for r in rows] == [
        ("vllm-kimi-k25-int4.service", "enabled", "enabled"),
        ("ssh.service", "enabled", ""),
    ]


def test_unit_from_cgroup_v1_v2_and_nesting() -> None:
    assert (
        unit_from_cgroup("0::/system.slice/vllm-kimi-k25-int4.service")
        == "vllm-kimi-k25-int4.service"
    )
    assert unit_from_cgroup("0::/system.slice/foo.service/payload") == "foo.service"
    v1 = "12:pids:/system.slice/a.service,11:memory:/system.slice/a.service,1:name=systemd:/system.slice/a.service"
    assert unit_from_cgroup(v1) == "a.service"
    scope = "0::/system.slice/docker-" + "ab" * 32 + ".scope"
    unit = unit_from_cgroup(scope)
    assert unit is not None and docker_id_from_scope(unit) == "ab" * 32
    assert unit_from_cgroup("0::/user.slice/user-0.slice/session-4.scope") == "session-4.scope"
    assert unit_from_cgroup("-") is None and unit_from_cgroup("") is None
    # hostile: returned whole so validation refuses it, never trimmed into something valid
    assert (
        unit_from_cgroup("0::/system.slice/x-$(touch /tmp/c).service")
        == "x-$(touch /tmp/c).service"
    )


def test_unit_from_status_first_line() -> None:
    text = "● vllm-kimi-k25-int4.service - vLLM Kimi K2.5 INT4 (tp=8)\n     Loaded: loaded\n"
    assert unit_from_status(text) == "vllm-kimi-k25-int4.service"
    assert (
        unit_from_status(
            "Failed to get unit for PID 99: PID 99 does not belong to any loaded unit."
        )
        is None
    )
    assert unit_from_status("") is None


PS = """\
    440       1    1371 root     python3 -m vllm.entrypoints.openai.api_server --gpu-memory-utilization 0.95
    433       1    1372 root     /usr/bin/python3 /usr/local/bin/gpu-watchdog --ensure vllm.service
   2211       1      99 a-very-long-user-name python3 train.py
---
    440 0::/system.slice/vllm-kimi-k25-int4.service
    433 0::/system.slice/gpu watchdog.service
"""


def test_ps_rows_and_cgroup_section() -> None:
    rows = {p.pid: p for p in parse_ps(PS)}
    assert set(rows) == {440, 433, 2211}
    assert rows[440].elapsed_s == 1371 and rows[440].args.endswith("0.95")
    assert rows[440].cgroup == "0::/system.slice/vllm-kimi-k25-int4.service"
    assert rows[433].cgroup == "0::/system.slice/gpu watchdog.service"  # spaces survive
    assert rows[2211].user == "a-very-long-user-name" and rows[2211].cgroup == ""
    assert parse_cgroups("abc def\n12\n") == {}


def test_pids_and_server_kinds() -> None:
    assert parse_pids("440\n441\n440\n") == [440, 441]
    assert parse_pids("/dev/nvidia0:  440m 441\n") == [441]  # 'nvidia0' and '440m' are not PIDs
    assert server_kind("python3 -m vllm.entrypoints.openai.api_server") == "vLLM"
    assert server_kind("python -m sglang.launch_server --tp 8") == "SGLang"
    assert server_kind("/opt/tritonserver/bin/tritonserver --model-repository /m") == "Triton"
    assert server_kind("text-generation-launcher --model-id x") == "TGI"
    assert server_kind("ollama serve") == "Ollama"
    assert server_kind("/usr/sbin/cron -f") is None
    assert notable_flags("vllm serve --gpu-memory-utilization=0.9 --model m") == [
        "--gpu-memory-utilization 0.9"
    ]
    assert notable_flags("python -m sglang --mem-fraction-static 0.8 'unclosed") == [
        "--mem-fraction-static 0.8"
    ]
